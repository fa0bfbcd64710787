//! Random-node helpers across real processes (reference §7.4): calls and casts land only on
//! connected nodes whose names match the filter (this node's excluded patterns applied),
//! spread over all of them; a regex filter; a node that connects later ends a waiting call.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rpc_load_balancer::{Error, Node, NodeConfig, NodeFilter, Retry, RetryCount};
use rpclb::harness::{random_cookie, Cluster, NodeProcess, NodeSpec};

use crate::{Echo, Fail, Whoami, BIN, MESH_TIMEOUT};

/// Calls per filter: a node with half the share is missed with probability 2⁻⁴⁰.
const CALLS: usize = 40;

/// Starts child `name`, dialling `peer` if given.
async fn child(name: &str, cookie: &str, peer: Option<&str>) -> NodeProcess {
    let mut spec = NodeSpec::new(name, cookie);
    if let Some(peer) = peer {
        spec = spec.peer(peer);
    }
    spec.start(BIN)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Who served each of [`CALLS`] random-node calls with `filter` (checking that each reply
/// names the node `with_node` reports).
async fn served_by(me: &Node, filter: &NodeFilter) -> BTreeMap<String, usize> {
    let mut per_node = BTreeMap::new();
    for _ in 0..CALLS {
        let (reply, node) = me
            .call_on_random_node::<Whoami>(filter.clone(), ())
            .retry(Retry::never())
            .with_node()
            .await
            .unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(reply, &*node, "the reply comes from the node reported");
        *per_node.entry(reply).or_insert(0) += 1;
    }
    per_node
}

/// Where each of [`CALLS`] random-node casts with `filter` was handed.
async fn cast_to(me: &Node, filter: &NodeFilter) -> BTreeMap<String, usize> {
    let mut per_node = BTreeMap::new();
    for _ in 0..CALLS {
        let node = me
            .cast_on_random_node::<Echo>(filter.clone(), "hi".to_string())
            .retry(Retry::never())
            .with_node()
            .await
            .unwrap_or_else(|e| panic!("{filter}: {e}"));
        *per_node.entry(node.to_string()).or_insert(0) += 1;
    }
    per_node
}

fn names(per_node: &BTreeMap<String, usize>) -> Vec<&str> {
    per_node.keys().map(String::as_str).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_land_only_on_matching_nodes_spread_over_them() {
    let cookie = random_cookie();
    let worker_a = child("worker_a", &cookie, None).await;
    let worker_b = child("worker_b", &cookie, Some(worker_a.addr())).await;
    let other = child("other", &cookie, Some(worker_a.addr())).await;
    let worker_qa = child("worker_qa", &cookie, Some(worker_a.addr())).await;
    // This node matches none of the filters below, and excludes `_qa` nodes unless named.
    let me = Node::start(
        NodeConfig::new("rpc_load_balancer_primary", "127.0.0.1:0")
            .cookie(&cookie)
            .excluded_node_patterns(["_qa"]),
    )
    .await
    .unwrap();
    me.connect(worker_a.addr()).await.unwrap();
    me.wait_for_peers(4, MESH_TIMEOUT).await.unwrap();
    let workers = vec![worker_a.node(), worker_b.node()];

    // A substring: both workers, never `other`, never the excluded `worker_qa`.
    let substring = NodeFilter::from("worker");
    assert_eq!(names(&served_by(&me, &substring).await), workers);
    assert_eq!(names(&cast_to(&me, &substring).await), workers);

    // A regex: the two nodes it names.
    let regex = NodeFilter::regex("^(worker_b|other)@").unwrap();
    let both = served_by(&me, &regex).await;
    assert_eq!(names(&both), vec![other.node(), worker_b.node()]);

    // A filter naming the excluded part asks for that node.
    let qa = NodeFilter::from("worker_qa");
    assert_eq!(names(&served_by(&me, &qa).await), vec![worker_qa.node()]);

    // A remote failure is the result: the call is not sent elsewhere.
    match me
        .call_on_random_node::<Fail>("worker_b", "boom".to_string())
        .await
    {
        Err(Error::Remote { node, .. }) => assert_eq!(node, worker_b.node()),
        other => panic!("a failing function gave {other:?}"),
    }

    // Nobody matches: at once with no retry.
    let started = Instant::now();
    let none = me
        .call_on_random_node::<Whoami>("nobody", ())
        .retry(Retry::never())
        .await;
    assert!(
        matches!(none, Err(Error::NoMatchingNodes { .. })),
        "{none:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_connects_later_ends_a_waiting_call() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let me = cluster
        .join("rpc_load_balancer_primary", MESH_TIMEOUT)
        .await
        .unwrap();
    // Unlimited retries, 30 s apart (at least 24 s with jitter): only the node watch can end
    // the wait in time.
    let call = {
        let me = me.clone();
        tokio::spawn(async move {
            me.call_on_random_node::<Whoami>("late_worker", ())
                .retry(Retry::new(RetryCount::Unlimited, Duration::from_secs(30)))
                .timeout(Duration::from_secs(60))
                .with_node()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!call.is_finished(), "no node matches yet: {:?}", me.nodes());
    let started = Instant::now();
    let mut late = NodeSpec::new("late_worker", cluster.cookie())
        .peer(me.listen_addr())
        .start(BIN)
        .await
        .unwrap();
    let served = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "still waiting {:?} after the node started",
                started.elapsed()
            )
        })
        .unwrap();
    let (reply, node) = served.unwrap();
    assert_eq!((reply.as_str(), &*node), (late.node(), late.node()));
    me.shutdown().await;
    late.kill().await;
    cluster.shutdown().await;
}
