//! Selection allocates nothing: neither with no metrics recorder nor with a recorder whose
//! handles are plain atomics. A counting global allocator counts this thread's allocations
//! while a balancer selects (and releases) members many times.
//!
//! Each test installs process-wide state (a recorder) and runs a `Node`: nextest runs each
//! test in its own process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use std::time::Duration;

use rpc_load_balancer::algorithm::{by_name, BUILT_IN};
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig};
use rpclb::harness::join_stand_ins;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// A recorder whose handles are plain atomics (registration allocates; recording does not).
struct AtomicRecorder;

struct Atomic(AtomicU64);
impl CounterFn for Atomic {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }
}
impl GaugeFn for Atomic {
    fn increment(&self, value: f64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some((f64::from_bits(v) + value).to_bits())
            });
    }
    fn decrement(&self, value: f64) {
        GaugeFn::increment(self, -value);
    }
    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}
impl HistogramFn for Atomic {
    fn record(&self, _value: f64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Recorder for AtomicRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(Atomic(AtomicU64::new(0))))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(Arc::new(Atomic(AtomicU64::new(0))))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(Arc::new(Atomic(AtomicU64::new(0))))
    }
}

/// Starts a node with an 8-member balancer per built-in algorithm (this node plus 7 stand-in
/// actors under member names) and counts this thread's allocations over 10,000 selections
/// each, with a key (after a warm-up that builds any per-snapshot cache).
fn allocations_per_selection() -> Vec<(&'static str, u64)> {
    // The counter sees this thread's allocations.
    let before = allocations();
    std::hint::black_box(vec![1u8; 16]);
    assert_eq!(allocations() - before, 1);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("alloc", "127.0.0.1:0").cookie("alloc"),
        ))
        .unwrap();
    let mut results = Vec::new();
    for name in BUILT_IN {
        let balancer_name = format!("alloc-{name}");
        let config = BalancerConfig::new(&balancer_name).algorithm_arc(by_name(name).unwrap());
        let balancer = runtime.block_on(Balancer::start(config)).unwrap();
        let stand_ins = runtime
            .block_on(join_stand_ins(&balancer_name, 1..8))
            .unwrap();
        runtime
            .block_on(balancer.wait_for_members(8, Duration::from_secs(5)))
            .unwrap();
        let key = 42u64.to_be_bytes();
        for _ in 0..100 {
            drop(balancer.select_node(Some(&key)).unwrap());
        }
        let before = allocations();
        for i in 0..10_000u64 {
            let key = i.to_be_bytes();
            let guard = balancer.select_node(Some(&key)).unwrap();
            std::hint::black_box(guard.node());
            drop(guard);
        }
        results.push((*name, allocations() - before));
        runtime.block_on(balancer.stop());
        for actor in stand_ins {
            actor.stop(None);
        }
    }
    runtime.block_on(node.shutdown());
    results
}

#[test]
fn selection_allocates_nothing_without_a_recorder() {
    for (algorithm, count) in allocations_per_selection() {
        assert_eq!(
            count, 0,
            "{algorithm}: {count} allocations in 10,000 selections"
        );
    }
}

#[test]
fn selection_allocates_nothing_with_an_atomics_recorder() {
    metrics::set_global_recorder(AtomicRecorder).unwrap();
    for (algorithm, count) in allocations_per_selection() {
        assert_eq!(
            count, 0,
            "{algorithm}: {count} allocations in 10,000 selections"
        );
    }
}
