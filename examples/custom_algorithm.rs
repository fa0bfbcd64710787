//! A selection algorithm defined outside the library: route to the member whose node name is
//! shortest (a stand-in for "prefer the nearest rack" or any rule of your own), count how often
//! each selection is released, and learn from call outcomes (the slowest call seen). It is
//! checked on the test kit, then run against a real node and balancer.
//!
//! ```text
//! cargo run --example custom_algorithm
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, MemberView, Outcome, OutcomeKind, Request};
use rpc_load_balancer::testkit::SelectorKit;
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, Error, Explanation, FunctionError, Node, NodeConfig,
    RemoteFunction, Selector,
};
use tracing_subscriber::EnvFilter;

/// The configuration: picks the member with the shortest node name; ties go to the first in
/// node-name order. `stats` lets the program read what its balancers' selectors counted.
#[derive(Default)]
struct ShortestName {
    stats: Arc<Stats>,
}

#[derive(Default)]
struct Stats {
    releases: AtomicU64,
    slowest_us: AtomicU64,
}

impl Algorithm for ShortestName {
    fn name(&self) -> &'static str {
        "shortest_name"
    }

    // Required with `name`: check options (none here) and build one balancer's selector.
    fn build(&self, _context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(ShortestNameSelector {
            stats: Arc::clone(&self.stats),
        }))
    }
}

/// One balancer's selector.
struct ShortestNameSelector {
    stats: Arc<Stats>,
}

impl Selector for ShortestNameSelector {
    // Required: pick an index into `members` (never empty, sorted by node).
    fn pick(&self, members: &[MemberView], _request: &Request<'_>) -> Result<usize, Error> {
        Ok(members
            .iter()
            .enumerate()
            .min_by_key(|(_, m)| m.node().len())
            .map(|(i, _)| i)
            .unwrap_or(0))
    }

    // Optional: called exactly once per selection, when its guard drops.
    fn released(&self, _member: &MemberView) {
        self.stats.releases.fetch_add(1, Ordering::Relaxed);
    }

    // Optional: ask for call outcomes (free for selectors that don't).
    fn learns(&self) -> bool {
        true
    }

    // Called once per routed call or cast when `learns` is true.
    fn observe(&self, outcome: &Outcome<'_>) {
        if outcome.kind == OutcomeKind::Ok {
            let us = outcome.latency.as_micros() as u64;
            self.stats.slowest_us.fetch_max(us, Ordering::Relaxed);
        }
    }

    // Optional: shown in the DEBUG event `selection explained`.
    fn explain(
        &self,
        members: &[MemberView],
        _chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        Explanation {
            rule: "shortest node name".into(),
            scores: members
                .iter()
                .map(|m| (m.node().to_string(), m.node().len() as f64))
                .collect(),
        }
    }
}

struct Hello;
impl RemoteFunction for Hello {
    const NAME: &'static str = "hello";
    type Args = ();
    type Reply = String;
    async fn call(&self, _: ()) -> Result<String, FunctionError> {
        Ok("hello".into())
    }
}

/// The rule on the test kit: no node, no network.
fn check_on_the_test_kit() -> Result<(), Error> {
    let algorithm = ShortestName::default();
    let mut kit = SelectorKit::new(&algorithm)?;
    kit.join(["worker_long@h", "w@h", "worker@h"]);
    let pick = kit.pick(None)?;
    assert_eq!(pick.node(), "w@h");
    kit.complete(pick, Duration::from_millis(3), OutcomeKind::Ok);
    kit.leave(["w@h"]);
    assert_eq!(kit.pick_and_release(None)?, "worker@h");
    assert_eq!(algorithm.stats.releases.load(Ordering::Relaxed), 2);
    assert_eq!(algorithm.stats.slowest_us.load(Ordering::Relaxed), 3_000);
    println!("test kit: the rule holds");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's warnings (an unreachable peer, a refused connection) on stderr.
    // RUST_LOG sets the level: RUST_LOG=error quiets them, RUST_LOG=debug shows more.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("warn,ractor_cluster=error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    check_on_the_test_kit()?;
    let node = Node::start(NodeConfig::new("custom", "127.0.0.1:0").cookie("example")).await?;
    node.register(Hello)?;
    let algorithm = ShortestName::default();
    let stats = Arc::clone(&algorithm.stats);
    let balancer = Balancer::start(BalancerConfig::new("custom").algorithm(algorithm)).await?;
    for _ in 0..3 {
        let (reply, served_by) = balancer.call::<Hello>(()).with_node().await?;
        println!("{reply} from {served_by}");
    }
    println!(
        "releases counted by the selector: {}; slowest call: {} µs",
        stats.releases.load(Ordering::Relaxed),
        stats.slowest_us.load(Ordering::Relaxed)
    );
    assert_eq!(stats.releases.load(Ordering::Relaxed), 3);
    balancer.stop().await;
    node.shutdown().await;
    Ok(())
}
