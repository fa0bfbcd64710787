//! Runs N selections (select + release) on a balancer of 8 members and exits: run it under
//! `valgrind --tool=callgrind` with N = 0 and N = 100000, with and without the `telemetry`
//! feature, to count the instructions one selection costs (bench/callgrind_selection.sh).
//!
//! Usage: `selection_count ALGORITHM N [ramping]`: ALGORITHM as `algorithm::by_name` reads it
//! (`peak_ewma+slow_start+ejection`, …). HashRing (`hash_ring`, `hash_ring_bounded`) selects
//! with an 8-byte key, as the criterion bench does; the others with none. With `+slow_start`
//! the members' windows are 100 ms and the selections start after them (slow start's steady
//! state), unless `ramping` is given: then the default 30 s window, and the 7 members that
//! join after the first are in it for the whole run.
//!
//! `selection_count group:ALGORITHM N`: the same over an actor group (`rpc_load_balancer::group`)
//! of 8 local actors in one pg group — 8 members on one node, told apart by pid — with
//! `ActorGroup::select` (select + release of the guard).

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::algorithm::{by_name, EJECTION_SUFFIX, SLOW_START_SUFFIX};
use rpc_load_balancer::group::{ActorGroup, ActorGroupConfig};
use rpc_load_balancer::routing::Algorithm;
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig, OutlierEjection, SlowStart};
use rpclb::harness::join_stand_ins;

/// Slow start's window, outside `ramping` runs.
const WINDOW: Duration = Duration::from_millis(100);

/// `name` as `by_name` builds it, but slow start's window [`WINDOW`] unless `ramping`.
fn algorithm(name: &str, ramping: bool) -> Arc<dyn Algorithm> {
    if let Some(inner) = name.strip_suffix(EJECTION_SUFFIX) {
        return OutlierEjection::new().wrap(algorithm(inner, ramping));
    }
    match name.strip_suffix(SLOW_START_SUFFIX) {
        Some(inner) if !ramping => SlowStart::new()
            .window(WINDOW)
            .wrap(algorithm(inner, ramping)),
        _ => by_name(name).unwrap(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`; treat that run as a smoke run.
    let name = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "round_robin".into());
    let n: u64 = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(1000);
    let ramping = args.get(3).is_some_and(|a| a == "ramping");
    let key = 42u64.to_be_bytes();
    let key = name.starts_with("hash_ring").then_some(&key[..]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("count", "127.0.0.1:0").cookie("count"),
        ))
        .unwrap();
    if let Some(inner) = name.strip_prefix("group:") {
        let group = runtime.block_on(start_group(algorithm(inner, ramping)));
        if inner.contains(SLOW_START_SUFFIX) && !ramping {
            std::thread::sleep(WINDOW * 2);
        }
        for _ in 0..n {
            drop(std::hint::black_box(group.select(key).unwrap()));
        }
        println!("{name}: {n} selections");
        runtime.block_on(node.shutdown());
        return;
    }
    let config = BalancerConfig::new("count").algorithm_arc(algorithm(&name, ramping));
    let balancer = runtime.block_on(Balancer::start(config)).unwrap();
    runtime.block_on(join_stand_ins("count", 1..8)).unwrap();
    runtime
        .block_on(balancer.wait_for_members(8, Duration::from_secs(5)))
        .unwrap();
    if name.contains(SLOW_START_SUFFIX) && !ramping {
        std::thread::sleep(WINDOW * 2);
    }
    for _ in 0..n {
        drop(std::hint::black_box(balancer.select_node(key).unwrap()));
    }
    println!("{name}: {n} selections");
    runtime.block_on(node.shutdown());
}

/// An idle actor of the counted group.
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
        ractor::pg::join_scoped("count".into(), "idle".into(), vec![myself.get_cell()]);
        Ok(())
    }
}

/// 8 idle actors in pg group `idle` of scope `count`, and an actor group over them.
async fn start_group(algorithm: Arc<dyn Algorithm>) -> ActorGroup<()> {
    for _ in 0..8 {
        ractor::Actor::spawn(None, Idle, ()).await.unwrap();
    }
    let config = ActorGroupConfig::new("count", "idle").algorithm_arc(algorithm);
    let group = ActorGroup::start(config).await.unwrap();
    group
        .wait_for_members(8, Duration::from_secs(5))
        .await
        .unwrap();
    group
}
