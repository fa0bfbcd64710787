//! A killed balancer drains, then leaves nothing behind on its node.

mod drain_during_pick;
mod local_cast_drain;
mod member_start_fails;
mod shutdown_refuses_starts;
mod start_panics;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{Balancer, BalancerConfig, DrainOutcome, Error, Node, NodeConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_balancer_drains_is_freed_and_its_old_handle_fails_typed() {
    let node = Node::start(NodeConfig::new("killed_state", "127.0.0.1:0").cookie("killed"))
        .await
        .unwrap();
    let balancer =
        Balancer::start(BalancerConfig::new("killed").leave_grace(Duration::from_millis(100)))
            .await
            .unwrap();
    assert_eq!(balancer.members().len(), 1);
    let state = Arc::downgrade(balancer.shared());
    balancer.actor().kill();
    // Its actor is gone: nothing new is routed through it, at once.
    let deadline = Instant::now() + Duration::from_secs(2);
    while balancer.is_running() {
        assert!(Instant::now() < deadline, "the killed actor still runs");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(matches!(
        Balancer::lookup("killed"),
        Err(Error::UnknownBalancer { .. })
    ));
    assert!(matches!(
        balancer.select_node(None),
        Err(Error::UnknownBalancer { .. })
    ));
    // The node's keeper drains it (a kill skips post_stop; the drain does not need it): the
    // report is a drain's, not a kill's.
    let report = balancer.stop().await;
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert!(report.took >= Duration::from_millis(100), "{report:?}");
    assert!(balancer.members().is_empty(), "no frozen member list");
    // Nothing else holds the killed balancer's state once it has drained: not the node's
    // registry, not its actors or their watcher; only the handle.
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
    drop(balancer);
    assert_eq!(state.strong_count(), 0);
    assert_eq!(node.shutdown().await, vec![]);
}
