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

/// Starts a node with an 8-member balancer per built-in algorithm, and per extra name or
/// wrapped one below (this node plus 7 stand-in actors under member names), and counts this
/// thread's allocations over 10,000 selections each, with a key (after a warm-up that builds
/// any per-snapshot cache).
fn allocations_per_selection() -> Vec<(String, u64)> {
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
            NodeConfig::new("alloc", "127.0.0.1:0")
                .cookie("alloc")
                .label("zone", "a"),
        ))
        .unwrap();
    let mut results = Vec::new();
    let wrapped = [
        "hash_ring_bounded",
        "round_robin+ejection",
        "peak_ewma+ejection",
        "round_robin+slow_start",
        "weighted_round_robin+slow_start",
        "least_connections+slow_start",
        "power_of_two+slow_start",
        "peak_ewma+slow_start+ejection",
        "load_weighted+slow_start+ejection",
        "hash_ring_bounded+ejection",
    ];
    // With locality (this node in zone `a`, the stand-ins in none): every pick goes to this
    // node's own member, through the preferred sublist, under a cap it never reaches.
    let local = [
        "round_robin",
        "least_connections",
        "peak_ewma+slow_start+ejection",
    ];
    let runs = BUILT_IN
        .iter()
        .chain(&wrapped)
        .map(|name| (*name, false))
        .chain(local.iter().map(|name| (*name, true)));
    for (name, locality) in runs {
        let balancer_name = format!("alloc-{name}-{locality}");
        let mut config = BalancerConfig::new(&balancer_name).algorithm_arc(by_name(name).unwrap());
        if locality {
            config = config
                .locality(rpc_load_balancer::Locality::zone())
                .max_in_flight_per_member(1_000);
        }
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
        if locality {
            let members = balancer.members();
            let preferred: Vec<&str> = members
                .as_slice()
                .iter()
                .filter(|m| m.view().is_preferred())
                .map(|m| m.node())
                .collect();
            assert_eq!(
                preferred,
                [node.name()],
                "{name}: only this node is in zone a"
            );
        }
        let before = allocations();
        for i in 0..10_000u64 {
            let key = i.to_be_bytes();
            let guard = balancer.select_node(Some(&key)).unwrap();
            std::hint::black_box(guard.node());
            drop(guard);
        }
        let count = allocations() - before;
        let label = match locality {
            true => format!("{name} with locality"),
            false => name.to_string(),
        };
        results.push((label, count));
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

/// Starts balancer `name` with `algorithm` (maybe shared) over this node and stand-ins `ids`.
fn start_balancer(
    runtime: &tokio::runtime::Runtime,
    name: &str,
    algorithm: Arc<dyn rpc_load_balancer::Algorithm>,
    ids: std::ops::Range<usize>,
) -> Balancer {
    let balancer = runtime
        .block_on(Balancer::start(
            BalancerConfig::new(name).algorithm_arc(algorithm),
        ))
        .unwrap();
    let want = ids.len() + 1;
    runtime.block_on(join_stand_ins(name, ids)).unwrap();
    runtime
        .block_on(balancer.wait_for_members(want, Duration::from_secs(5)))
        .unwrap();
    balancer
}

/// One algorithm instance shared by two balancers with different members keeps each one's
/// ring, cycle, position or CPU slots: selections alternating between them allocate nothing,
/// HashRing answers as an unshared instance does over the same members, and RoundRobin and
/// WeightedRoundRobin cycle every member of each balancer however the picks interleave.
#[test]
fn an_instance_shared_by_two_balancers_keeps_each_ones_cache() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("shared", "127.0.0.1:0").cookie("shared"),
        ))
        .unwrap();
    // x: this node and 3 stand-ins; y: this node and 4 others.
    let (x_ids, y_ids) = (1..4, 4..8);
    for name in [
        "hash_ring",
        "weighted_round_robin",
        "round_robin",
        "least_cpu",
    ] {
        let shared = by_name(name).unwrap();
        let x = start_balancer(
            &runtime,
            &format!("{name}-x"),
            Arc::clone(&shared),
            x_ids.clone(),
        );
        let y = start_balancer(
            &runtime,
            &format!("{name}-y"),
            Arc::clone(&shared),
            y_ids.clone(),
        );
        for i in 0..100u64 {
            let key = i.to_be_bytes();
            drop(x.select_node(Some(&key)).unwrap());
            drop(y.select_node(Some(&key)).unwrap());
        }
        let before = allocations();
        for i in 0..5_000u64 {
            let key = i.to_be_bytes();
            for balancer in [&x, &y] {
                let guard = balancer.select_node(Some(&key)).unwrap();
                std::hint::black_box(guard.node());
                drop(guard);
            }
        }
        let count = allocations() - before;
        assert_eq!(
            count, 0,
            "{name}: {count} allocations in 10,000 shared selections"
        );

        // Every pick is a member of its own balancer.
        for balancer in [&x, &y] {
            let members = balancer.members();
            for i in 0..200u64 {
                let key = i.to_be_bytes();
                let guard = balancer.select_node(Some(&key)).unwrap();
                assert!(
                    members.contains(guard.node()),
                    "{name}: {} not in {:?}",
                    guard.node(),
                    members.nodes()
                );
            }
        }
        if name.ends_with("round_robin") {
            // Interleaved picks: each balancer's n consecutive picks reach its n members.
            for _ in 0..3 {
                let (mut on_x, mut on_y) = (Vec::new(), Vec::new());
                for _ in 0..(x.members().len() * y.members().len()) {
                    on_x.push(x.select_node(None).unwrap().node().to_string());
                    on_y.push(y.select_node(None).unwrap().node().to_string());
                }
                for (balancer, picks) in [(&x, on_x), (&y, on_y)] {
                    let n = balancer.members().len();
                    for window in picks.chunks(n) {
                        let distinct: std::collections::BTreeSet<&String> = window.iter().collect();
                        assert_eq!(distinct.len(), n, "{name}: {picks:?}");
                    }
                }
            }
        }
        if name == "hash_ring" {
            // The same answers as an instance of its own over the same members.
            let own_x = start_balancer(&runtime, "own-x", by_name(name).unwrap(), x_ids.clone());
            let own_y = start_balancer(&runtime, "own-y", by_name(name).unwrap(), y_ids.clone());
            let mut differ = 0;
            for i in 0..1_000u64 {
                let key = i.to_be_bytes();
                let shared_x = x.select_node(Some(&key)).unwrap().node().to_string();
                let shared_y = y.select_node(Some(&key)).unwrap().node().to_string();
                assert_eq!(shared_x, own_x.select_node(Some(&key)).unwrap().node());
                assert_eq!(shared_y, own_y.select_node(Some(&key)).unwrap().node());
                differ += usize::from(shared_x != shared_y);
            }
            assert!(
                differ > 100,
                "x and y rings look alike: {differ} of 1,000 keys differ"
            );
            runtime.block_on(own_x.stop());
            runtime.block_on(own_y.stop());
        }
        runtime.block_on(x.stop());
        runtime.block_on(y.stop());
    }
    runtime.block_on(node.shutdown());
}

/// An idle actor of an actor group.
struct Idle;

impl ractor::Actor for Idle {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ractor::ActorRef<()>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        ractor::pg::join_scoped("alloc".into(), "idle".into(), vec![myself.get_cell()]);
        Ok(())
    }
}

#[test]
fn actor_group_selection_allocates_nothing() {
    use rpc_load_balancer::group::{ActorGroup, ActorGroupConfig};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("alloc_group", "127.0.0.1:0").cookie("alloc"),
        ))
        .unwrap();
    for _ in 0..8 {
        runtime
            .block_on(ractor::Actor::spawn(None, Idle, ()))
            .unwrap();
    }
    for name in [
        "round_robin",
        "least_connections",
        "hash_ring",
        "peak_ewma+slow_start+ejection",
    ] {
        let config = ActorGroupConfig::new("alloc", "idle").algorithm_arc(by_name(name).unwrap());
        let group: ActorGroup<()> = runtime.block_on(ActorGroup::start(config)).unwrap();
        runtime
            .block_on(group.wait_for_members(8, Duration::from_secs(5)))
            .unwrap();
        for _ in 0..100 {
            drop(group.select(Some(b"warm")).unwrap());
        }
        let before = allocations();
        for i in 0..10_000u64 {
            let key = i.to_be_bytes();
            let chosen = group.select(Some(&key)).unwrap();
            std::hint::black_box(chosen.actor());
            drop(chosen);
        }
        let count = allocations() - before;
        assert_eq!(count, 0, "{name}: {count} allocations in 10,000 selections");
        runtime.block_on(group.stop());
    }
    runtime.block_on(node.shutdown());
}
