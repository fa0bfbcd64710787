//! Cost of one selection for every built-in algorithm at 2, 8 and 32 members:
//!
//! * `raw_pick`: a selector's `pick` alone (a selector built from the algorithm apart from the
//!   balancer and told of the balancer's member list, picking over its views with what it
//!   derived from that list);
//! * `select_and_release`: `Balancer::select_node` plus dropping the guard (stopped check,
//!   lock-free snapshot load, pick, in-flight counts up and down, selection counter, level
//!   check, the algorithm's release);
//! * `contended`: `select_and_release` while a second thread does the same on the same
//!   balancer (time per selection on the measuring thread).
//!
//! Besides every built-in algorithm, [`WITH_OPTIONS`]: the bounded-load HashRing, and
//! algorithms with outlier ejection and slow start on top (issue 19's "every option on"),
//! slow start with 100 ms windows, measured after them (its steady state).
//!
//! `actor_group_8_members/select_and_release`: `ActorGroup::select` plus dropping the
//! selection, over an actor group of 8 local actors in one pg group (8 members on one node),
//! for RoundRobin, LeastConnections, HashRing and PeakEwma with every option.
//!
//! No metrics recorder and no tracing subscriber are installed. Members are this node plus
//! local stand-in actors joined to the balancer's pg group under member names. Keyed: every
//! selection carries an 8-byte key (only HashRing uses it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rpc_load_balancer::algorithm::{by_name, BUILT_IN, EJECTION_SUFFIX, SLOW_START_SUFFIX};
use rpc_load_balancer::routing::{Algorithm, BuildContext, Change, Request};
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig, OutlierEjection, SlowStart};
use rpclb::harness::join_stand_ins;

/// Also measured: the bounded-load HashRing, and algorithms with options on top (their cost
/// over the algorithm's; issue 19's new algorithms with every option that applies to them).
const WITH_OPTIONS: [&str; 6] = [
    "round_robin+ejection",
    "peak_ewma+ejection",
    "peak_ewma+slow_start+ejection",
    "load_weighted+slow_start+ejection",
    "hash_ring_bounded",
    "hash_ring_bounded+ejection",
];

/// Slow start's window here: the selections measured come after it.
const WINDOW: Duration = Duration::from_millis(100);

/// `name` as `by_name` builds it, but slow start's window [`WINDOW`].
fn algorithm(name: &str) -> Arc<dyn Algorithm> {
    if let Some(inner) = name.strip_suffix(EJECTION_SUFFIX) {
        return OutlierEjection::new().wrap(algorithm(inner));
    }
    match name.strip_suffix(SLOW_START_SUFFIX) {
        Some(inner) => SlowStart::new().window(WINDOW).wrap(algorithm(inner)),
        None => by_name(name).unwrap(),
    }
}

fn selection(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("bench", "127.0.0.1:0").cookie("bench"),
        ))
        .unwrap();
    let key = 42u64.to_be_bytes();
    for size in [2usize, 8, 32] {
        let mut group = c.benchmark_group(format!("selection_{size}_members"));
        group
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        for name in BUILT_IN.iter().copied().chain(WITH_OPTIONS) {
            let balancer_name = format!("bench-{name}-{size}");
            let config = BalancerConfig::new(&balancer_name).algorithm_arc(algorithm(name));
            let balancer = runtime.block_on(Balancer::start(config)).unwrap();
            runtime
                .block_on(join_stand_ins(&balancer_name, 1..size))
                .unwrap();
            runtime
                .block_on(balancer.wait_for_members(size, Duration::from_secs(5)))
                .unwrap();
            if name.contains(SLOW_START_SUFFIX) {
                std::thread::sleep(WINDOW * 2);
            }
            let members = balancer.members();
            let raw = algorithm(name)
                .build(&BuildContext::new(&balancer_name))
                .unwrap();
            let joined: Vec<Arc<str>> = members
                .views()
                .iter()
                .map(|m| Arc::clone(m.node_arc()))
                .collect();
            let change = Change {
                balancer: &balancer_name,
                joined: &joined,
                left: &[],
                members: members.views(),
                version: members.version(),
            };
            raw.members_changed(&change);
            let derived = raw.derive(&change);
            let request = Request {
                derived: derived.as_ref(),
                ..Request::new(&balancer_name, Some(&key), members.version())
            };
            group.bench_function(BenchmarkId::new("raw_pick", name), |b| {
                b.iter(|| {
                    raw.pick(std::hint::black_box(members.views()), &request)
                        .unwrap()
                })
            });
            group.bench_function(BenchmarkId::new("select_and_release", name), |b| {
                b.iter(|| {
                    drop(std::hint::black_box(
                        balancer.select_node(Some(&key)).unwrap(),
                    ))
                })
            });
            if size == 8 {
                group.bench_function(BenchmarkId::new("contended_2_threads", name), |b| {
                    b.iter_custom(|iters| {
                        let stop = Arc::new(AtomicBool::new(false));
                        let other = {
                            let (balancer, stop) = (balancer.clone(), Arc::clone(&stop));
                            std::thread::spawn(move || {
                                while !stop.load(Ordering::Relaxed) {
                                    drop(std::hint::black_box(
                                        balancer.select_node(Some(&key)).unwrap(),
                                    ));
                                }
                            })
                        };
                        std::thread::sleep(Duration::from_millis(1));
                        let started = Instant::now();
                        for _ in 0..iters {
                            drop(std::hint::black_box(
                                balancer.select_node(Some(&key)).unwrap(),
                            ));
                        }
                        let elapsed = started.elapsed();
                        stop.store(true, Ordering::Relaxed);
                        other.join().unwrap();
                        elapsed
                    })
                });
            }
        }
        group.finish();
    }
    actor_groups(c, &runtime, &key);
    runtime.block_on(node.shutdown());
}

/// An idle actor of the benchmarked actor group.
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
        ractor::pg::join_scoped("bench".into(), "idle".into(), vec![myself.get_cell()]);
        Ok(())
    }
}

/// `ActorGroup::select` and its release over 8 local actors.
fn actor_groups(c: &mut Criterion, runtime: &tokio::runtime::Runtime, key: &[u8]) {
    use rpc_load_balancer::group::{ActorGroup, ActorGroupConfig};
    for _ in 0..8 {
        runtime
            .block_on(ractor::Actor::spawn(None, Idle, ()))
            .unwrap();
    }
    let mut group = c.benchmark_group("actor_group_8_members");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for name in [
        "round_robin",
        "least_connections",
        "hash_ring",
        "peak_ewma+slow_start+ejection",
    ] {
        let config = ActorGroupConfig::new("bench", "idle").algorithm_arc(algorithm(name));
        let actors: ActorGroup<()> = runtime.block_on(ActorGroup::start(config)).unwrap();
        runtime
            .block_on(actors.wait_for_members(8, Duration::from_secs(5)))
            .unwrap();
        if name.contains(SLOW_START_SUFFIX) {
            std::thread::sleep(WINDOW * 2);
        }
        group.bench_function(BenchmarkId::new("select_and_release", name), |b| {
            b.iter(|| drop(std::hint::black_box(actors.select(Some(key)).unwrap())))
        });
        runtime.block_on(actors.stop());
    }
    group.finish();
}

criterion_group!(benches, selection);
criterion_main!(benches);
