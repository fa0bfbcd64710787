//! A selection algorithm defined outside the library: route to the member whose node name is
//! shortest (a stand-in for "prefer the nearest rack" or any rule of your own), and count how
//! often each is released. It runs against a real node and balancer.
//!
//! ```text
//! cargo run --example custom_algorithm
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, Explanation, FunctionError, Member, Node, NodeConfig,
    RemoteFunction, SelectionAlgorithm, SelectionRequest,
};
use tracing_subscriber::EnvFilter;

/// Picks the member with the shortest node name; ties go to the first in node-name order.
#[derive(Default)]
struct ShortestName {
    releases: AtomicU64,
}

impl SelectionAlgorithm for ShortestName {
    fn name(&self) -> &'static str {
        "shortest_name"
    }

    // Required with `name`: pick an index into `members` (never empty, sorted by node).
    fn choose_from_nodes(
        &self,
        members: &[Member],
        _request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        Ok(members
            .iter()
            .enumerate()
            .min_by_key(|(_, m)| m.node().len())
            .map(|(i, _)| i)
            .unwrap_or(0))
    }

    // Optional: called exactly once per selection, when its guard drops.
    fn release_node(&self, _member: &Member) {
        self.releases.fetch_add(1, Ordering::Relaxed);
    }

    // Optional: shown in the DEBUG event `selection explained`.
    fn explain(
        &self,
        members: &[Member],
        _chosen: usize,
        _request: &SelectionRequest<'_>,
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
    let node = Node::start(NodeConfig::new("custom", "127.0.0.1:0").cookie("example")).await?;
    node.register(Hello)?;
    let algorithm = Arc::new(ShortestName::default());
    let balancer =
        Balancer::start(BalancerConfig::new("custom").algorithm_arc(algorithm.clone())).await?;
    for _ in 0..3 {
        let (reply, served_by) = balancer.call::<Hello>(()).with_node().await?;
        println!("{reply} from {served_by}");
    }
    println!(
        "releases counted by the algorithm: {}",
        algorithm.releases.load(Ordering::Relaxed)
    );
    assert_eq!(algorithm.releases.load(Ordering::Relaxed), 3);
    balancer.stop().await;
    node.shutdown().await;
    Ok(())
}
