//! The short-lived client node of `rpclb call`, `load` and `control`, and the client-only
//! balancer it calls through.

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{Algorithm, Balancer, BalancerConfig, Error, Node, NodeConfig};

use crate::cli::ClusterArgs;
use crate::load;

/// Starts a client node and connects it to `peer`. It serves the demo functions too, so a
/// CallDirect balancer (which runs calls on the calling node) works from it.
///
/// Errors: the node's start or connect error.
pub async fn join_cluster(cluster: &ClusterArgs, peer: &str) -> Result<Node, Error> {
    join_cluster_sampling(cluster, peer, None).await
}

/// [`join_cluster`], the client node sampling its CPU every `sample_interval` (default 1 s):
/// a LeastCpu balancer's `cpu_cache_ttl` must exceed the interval of the node it runs on.
///
/// Errors: the node's start or connect error.
pub async fn join_cluster_sampling(
    cluster: &ClusterArgs,
    peer: &str,
    sample_interval: Option<Duration>,
) -> Result<Node, Error> {
    join_cluster_with(cluster, peer, |config| match sample_interval {
        Some(interval) => config.cpu_sample_interval(interval),
        None => config,
    })
    .await
}

/// [`join_cluster`], the client node's configuration changed by `configure` first.
///
/// Errors: the node's start or connect error.
pub(crate) async fn join_cluster_with(
    cluster: &ClusterArgs,
    peer: &str,
    configure: impl FnOnce(NodeConfig) -> NodeConfig,
) -> Result<Node, Error> {
    let name = format!("rpclb-client-{}", std::process::id());
    let config = configure(cluster.apply(NodeConfig::new(name, "127.0.0.1:0").client(true)));
    let node = Node::start(config).await?;
    crate::functions::register_all(&node, Duration::ZERO)?;
    if let Err(error) = node.connect(peer).await {
        node.shutdown().await;
        return Err(error);
    }
    Ok(node)
}

/// Starts a client-only balancer `name` with `algorithm` and waits (≤ 5 s) until it has
/// members and its membership has been quiet for 300 ms (the rest of the cluster connects to
/// a new node within milliseconds of the first peer).
///
/// Errors: the balancer's start error (e.g. invalid algorithm options).
pub async fn client_balancer(name: &str, algorithm: Arc<dyn Algorithm>) -> Result<Balancer, Error> {
    let config = BalancerConfig::new(name)
        .algorithm_arc(algorithm)
        .node_match_list(Vec::<String>::new());
    let balancer = Balancer::start(config).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let first = load::wait_for_members(&balancer, 1, Duration::from_secs(5)).await;
    if first.is_err() {
        tracing::warn!(balancer = %name, "no member after 5 s; calling anyway");
        return Ok(balancer);
    }
    let mut members = balancer.watch_members();
    members.mark_unchanged();
    while tokio::time::Instant::now() < deadline {
        let quiet = tokio::time::timeout(Duration::from_millis(300), members.changed()).await;
        if !matches!(quiet, Ok(Ok(()))) {
            break;
        }
    }
    Ok(balancer)
}

/// Waits until `target` is connected, or the node list has been quiet for 300 ms (the mesh
/// is complete and `target` is not in it), at most 5 s.
pub(crate) async fn wait_for_node(node: &Node, target: &str) {
    if !target.contains('@') {
        eprintln!("note: node names are full names, like {target}@127.0.0.1");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut nodes = node.watch_nodes();
    while !nodes.borrow_and_update().iter().any(|n| n == target)
        && tokio::time::Instant::now() < deadline
    {
        let quiet = tokio::time::timeout(Duration::from_millis(300), nodes.changed()).await;
        if !matches!(quiet, Ok(Ok(()))) {
            break;
        }
    }
}
