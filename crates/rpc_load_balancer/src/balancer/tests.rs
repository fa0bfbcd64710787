//! A killed balancer leaves nothing behind on its node.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Balancer, BalancerConfig, DrainOutcome, Error, Node, NodeConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_balancer_is_freed_and_its_old_handle_fails_typed() {
    let node = Node::start(NodeConfig::new("killed_state", "127.0.0.1:0").cookie("killed"))
        .await
        .unwrap();
    let balancer = Balancer::start(BalancerConfig::new("killed"))
        .await
        .unwrap();
    assert_eq!(balancer.members().len(), 1);
    let state = Arc::downgrade(balancer.shared());
    balancer.actor().kill();
    // Nothing else holds the killed balancer's state once its actors are gone: not the node's
    // registry, not its actors; only the handle.
    let deadline = Instant::now() + Duration::from_secs(2);
    while state.strong_count() > 1 {
        assert!(
            Instant::now() < deadline,
            "{} holders of the killed balancer's state",
            state.strong_count()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(
        Balancer::lookup("killed"),
        Err(Error::UnknownBalancer { .. })
    ));
    assert!(balancer.members().is_empty(), "no frozen member list");
    assert!(matches!(
        balancer.select_node(None),
        Err(Error::UnknownBalancer { .. })
    ));
    let report = balancer.stop().await;
    assert_eq!(report.outcome, DrainOutcome::Killed);
    drop(balancer);
    assert_eq!(state.strong_count(), 0);
    assert_eq!(node.shutdown().await, vec![]);
}
