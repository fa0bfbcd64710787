//! Memory under overload: 256 callers against a member whose handler takes 1 s, with and
//! without `max_in_flight_per_member`. Prints live heap bytes (a counting global allocator)
//! sampled every 250 ms, and the calls in flight, for two loads:
//!
//! * closed loop: 256 callers, each calling again as soon as its call returns;
//! * open loop: 256 new calls every 100 ms whatever became of the earlier ones (arrivals
//!   that don't wait for replies, as requests from outside do).
//!
//! Run: `cargo bench --bench overload_memory`. Results: bench/README.md.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig};
use rpclb::functions::{register_all, Sleep};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: defers to the system allocator; only counts live bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const RUN: Duration = Duration::from_secs(3);

/// Outcome counts of one run.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    overloaded: AtomicU64,
    other: AtomicU64,
}

async fn one_call(balancer: &Balancer, counts: &Counts) {
    match balancer
        .call::<Sleep>(1_000)
        .timeout(Duration::from_secs(30))
        .await
    {
        Ok(()) => counts.ok.fetch_add(1, Ordering::Relaxed),
        Err(rpc_load_balancer::Error::Overloaded { .. }) => {
            counts.overloaded.fetch_add(1, Ordering::Relaxed)
        }
        Err(_) => counts.other.fetch_add(1, Ordering::Relaxed),
    };
}

async fn run(label: &str, cap: Option<usize>, open_loop: bool) {
    let name = format!("slow-{}", label.replace(' ', "-"));
    let mut config = BalancerConfig::new(&name);
    if let Some(cap) = cap {
        config = config.max_in_flight_per_member(cap);
    }
    let balancer = Balancer::start(config).await.unwrap();
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let base = LIVE.load(Ordering::Relaxed);
    let mut tasks = Vec::new();
    if open_loop {
        let (balancer, counts, stop) = (balancer.clone(), counts.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                for _ in 0..256 {
                    let (balancer, counts) = (balancer.clone(), counts.clone());
                    tokio::spawn(async move { one_call(&balancer, &counts).await });
                }
            }
        }));
    } else {
        for _ in 0..256 {
            let (balancer, counts, stop) = (balancer.clone(), counts.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    one_call(&balancer, &counts).await;
                    if counts.overloaded.load(Ordering::Relaxed) > 0 {
                        // A refused caller backs off briefly, as a real client would.
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }));
        }
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < RUN {
        tokio::time::sleep(Duration::from_millis(250)).await;
        samples.push((LIVE.load(Ordering::Relaxed) - base, balancer.in_flight()));
    }
    stop.store(true, Ordering::Relaxed);
    let kib = |b: i64| format!("{:.0}", b as f64 / 1024.0);
    println!(
        "{label:<28} live KiB every 250 ms: {}",
        samples
            .iter()
            .map(|(b, _)| kib(*b))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:<28} in flight:               {}",
        "",
        samples
            .iter()
            .map(|(_, n)| n.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "{:<28} ok {} overloaded {} other {}",
        "",
        counts.ok.load(Ordering::Relaxed),
        counts.overloaded.load(Ordering::Relaxed),
        counts.other.load(Ordering::Relaxed)
    );
    for task in tasks {
        task.abort();
    }
    balancer.stop().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let node = Node::start(NodeConfig::new("overload", "127.0.0.1:0").cookie("overload"))
            .await
            .unwrap();
        register_all(&node, Duration::ZERO).unwrap();
        run("closed loop, cap 4", Some(4), false).await;
        run("closed loop, no cap", None, false).await;
        run("open loop, cap 4", Some(4), true).await;
        run("open loop, no cap", None, true).await;
        node.shutdown().await;
    });
}
