//! `call_directly`: per call, and as the node's default, routed calls run on the calling node
//! whatever the algorithm and members; a call can opt out of the default.

use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, NodeConfig, RoundRobin};
use rpclb::harness::Cluster;

use crate::{Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_directly_runs_here_per_call_and_by_default() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let config = NodeConfig::new("tester", "127.0.0.1:0").call_directly(true);
    let me = cluster.join_with(config, MESH_TIMEOUT).await.unwrap();
    rpclb::functions::register_all(&me, Duration::ZERO).unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    // The node's default: here, although this node is no member.
    for _ in 0..4 {
        assert_eq!(work.call::<Whoami>(()).await.unwrap(), me.name());
    }
    work.cast::<Whoami>(()).await.unwrap();
    // Opting out routes to the members.
    let mut routed = std::collections::BTreeSet::new();
    for _ in 0..4 {
        routed.insert(work.call::<Whoami>(()).call_directly(false).await.unwrap());
    }
    assert_eq!(routed, cluster.names().into_iter().collect());
    // Per call, also with the default off.
    assert_eq!(
        work.call::<Whoami>(()).call_directly(true).await.unwrap(),
        me.name()
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
