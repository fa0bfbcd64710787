//! A balancer's members forwarded to an actor on a real local node: the current snapshot, each
//! change, and the end of the forwarding with the balancer or with the actor.

use crate::node::forward::tests::{collector, next, Got, BOUND};
use crate::{Balancer, BalancerConfig, ForwardingEnd, Node, NodeConfig};

async fn start_node(name: &str) -> Node {
    Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie("forward"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_changes_reach_the_actor_and_a_stopped_balancer_ends_the_forwarding() {
    let node = start_node("forward_members").await;
    let (actor, mut got) = collector().await;
    let balancer = Balancer::start(BalancerConfig::new("forwarded"))
        .await
        .unwrap();
    let forwarding = balancer.forward_members_to(actor.clone(), |members| {
        Some(Got(members.nodes().join(",")))
    });
    // The first message is the snapshot at that moment; this node joins as a member.
    let mut last = next(&mut got).await;
    while last != node.name() {
        assert_eq!(last, "", "the only members before are none");
        last = next(&mut got).await;
    }
    // It leaves when the balancer stops: forwarding ends and the empty snapshot is not sent.
    balancer.stop().await;
    let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
    assert_eq!(end, Ok(ForwardingEnd::SourceEnded));
    assert!(got.try_recv().is_err(), "nothing after the last members");
    actor.stop(None);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_forwarding_ends_when_the_actor_stops_and_none_skips() {
    let node = start_node("forward_members_actor").await;
    let (actor, mut got) = collector().await;
    let balancer = Balancer::start(BalancerConfig::new("forwarded"))
        .await
        .unwrap();
    balancer
        .wait_for_members(1, BOUND)
        .await
        .expect("this node is a member");
    // Only snapshots with no members are sent: none is.
    let forwarding = balancer.forward_members_to(actor.clone(), |members| {
        members.is_empty().then(|| Got("empty".into()))
    });
    actor.stop(None);
    let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
    assert_eq!(end, Ok(ForwardingEnd::ActorStopped));
    assert!(got.try_recv().is_err(), "the snapshot was skipped");
    balancer.stop().await;
    node.shutdown().await;
}
