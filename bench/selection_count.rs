//! Runs N selections (select + release) on a balancer of 8 members and exits: run it under
//! `valgrind --tool=callgrind` with N = 0 and N = 100000, with and without the `telemetry`
//! feature, to count the instructions one selection costs (bench/callgrind_selection.sh).
//!
//! Usage: `selection_count ALGORITHM N` (ALGORITHM: random or round_robin).

use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig};
use rpclb::harness::join_stand_ins;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes `--bench`; treat that run as a smoke run.
    let algorithm = args
        .get(1)
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "round_robin".into());
    let n: u64 = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(1000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let node = runtime
        .block_on(Node::start(
            NodeConfig::new("count", "127.0.0.1:0").cookie("count"),
        ))
        .unwrap();
    let config = BalancerConfig::new("count")
        .algorithm_arc(rpc_load_balancer::algorithm::by_name(&algorithm).unwrap());
    let balancer = runtime.block_on(Balancer::start(config)).unwrap();
    runtime.block_on(join_stand_ins("count", 1..8)).unwrap();
    runtime
        .block_on(balancer.wait_for_members(8, Duration::from_secs(5)))
        .unwrap();
    for _ in 0..n {
        drop(std::hint::black_box(balancer.select_node(None).unwrap()));
    }
    println!("{algorithm}: {n} selections");
    runtime.block_on(node.shutdown());
}
