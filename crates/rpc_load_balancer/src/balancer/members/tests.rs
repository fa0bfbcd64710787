use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::*;

/// An actor that only gives members something to point at.
struct Idle;
impl Actor for Idle {
    type Msg = RpcMessage;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RpcMessage>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// A member actor of `balancer` on `node` (by its registered name, as pg lists it).
async fn member_actor(balancer: &str, node: &str) -> ActorRef<RpcMessage> {
    let (actor, _) = Actor::spawn(Some(member_name(balancer, node)), Idle, ())
        .await
        .unwrap();
    actor
}

fn snapshot(
    metrics: &SelectionMetrics,
    version: u64,
    actors: &[&ActorRef<RpcMessage>],
    previous: &Members,
) -> Members {
    let cells: Vec<ActorCell> = actors.iter().map(|a| a.get_cell()).collect();
    Members::from_cells(metrics, version, &cells, previous, false, None)
}

#[tokio::test]
async fn a_member_that_rejoins_before_the_next_snapshot_starts_at_zero() {
    let metrics = SelectionMetrics::new("least_connections", "rejoin");
    let old_a = member_actor("rejoin", "a@h").await;
    let b = member_actor("rejoin", "b@h").await;
    let first = snapshot(&metrics, 1, &[&old_a, &b], &Members::default());
    // Two selections of a and one of b are in flight (each guard holds its member).
    let held_a = first.get("a@h").unwrap().clone();
    held_a.view().acquire();
    held_a.view().acquire();
    first.get("b@h").unwrap().view().acquire();

    // a's member actor stops and a new one joins on the same node; the next snapshot is built
    // only after both happened (no snapshot in between saw a gone).
    old_a
        .stop_and_wait(None, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    let new_a = member_actor("rejoin", "a@h").await;
    let second = snapshot(&metrics, 2, &[&new_a, &b], &first);
    let rejoined = second.get("a@h").unwrap();
    assert_ne!(rejoined.id(), held_a.id(), "a new actor: a new membership");
    assert_eq!(rejoined.in_flight(), 0, "the rejoined member starts clean");
    assert_eq!(second.get("b@h").unwrap().in_flight(), 1, "b stayed: kept");

    // Late releases of the old selections hit the old counter only, never below zero.
    rejoined.view().acquire();
    held_a.view().release();
    assert_eq!(rejoined.in_flight(), 1);
    held_a.view().release();
    held_a.view().release();
    assert_eq!(held_a.in_flight(), 0);
    assert_eq!(rejoined.in_flight(), 1);
    rejoined.view().release();
    assert_eq!(rejoined.in_flight(), 0);
    new_a.stop(None);
    b.stop(None);
}

#[tokio::test]
async fn a_departed_members_counter_is_freed_with_the_last_holder() {
    let metrics = SelectionMetrics::new("least_connections", "depart");
    let a = member_actor("depart", "a@h").await;
    let b = member_actor("depart", "b@h").await;
    let first = snapshot(&metrics, 1, &[&a, &b], &Members::default());
    // A guard on a outlives the snapshot it came from.
    let held_a = first.get("a@h").unwrap().clone();
    held_a.view().acquire();
    let a_counter = Arc::downgrade(held_a.view().stats());
    let b_counter = Arc::downgrade(first.get("b@h").unwrap().view().stats());

    // a leaves.
    let second = snapshot(&metrics, 2, &[&b], &first);
    assert_eq!(second.nodes(), ["b@h"]);
    drop(first);
    assert!(a_counter.upgrade().is_some(), "the live guard still counts");
    held_a.view().release();
    drop(held_a);
    assert!(a_counter.upgrade().is_none(), "a's counter was freed");
    // b's counter is the one the new snapshot holds.
    let kept = b_counter.upgrade().expect("b's counter is kept");
    assert!(Arc::ptr_eq(
        &kept,
        second.get("b@h").unwrap().view().stats()
    ));
    drop(kept);
    drop(second);
    assert!(b_counter.upgrade().is_none());
    a.stop(None);
    b.stop(None);
}

#[tokio::test]
async fn cpu_views_read_the_nodes_cache_slots_and_a_leave_keeps_the_reading() {
    // (Node names unique to this test: the cache is shared by the whole test process.)
    let metrics = SelectionMetrics::new("least_cpu", "cpu-views");
    let a = member_actor("cpu-views", "cpuviews-a@h").await;
    let b = member_actor("cpu-views", "cpuviews-b@h").await;
    crate::cpu::cache().store("cpuviews-a@h", 10.0, 0);
    let first = snapshot_cpu(&metrics, 1, &[&a, &b], &Members::default());
    let now = crate::load::clock::now_ms();
    let cpu =
        |members: &Members, node: &str| members.get(node).unwrap().view().cpu(now + 1_000, 10_000);
    assert_eq!(cpu(&first, "cpuviews-a@h"), Some(10.0));
    assert_eq!(cpu(&first, "cpuviews-b@h"), None, "no reading yet");
    // A reading stored later is seen through the same view (the slot is shared).
    crate::cpu::cache().store("cpuviews-b@h", 20.0, 0);
    assert_eq!(cpu(&first, "cpuviews-b@h"), Some(20.0));
    // a leaves: its reading stays in the node's cache (other balancers may route to it).
    let second = snapshot_cpu(&metrics, 2, &[&b], &first);
    assert_eq!(second.nodes(), ["cpuviews-b@h"]);
    assert_eq!(
        crate::cpu::cache().get("cpuviews-a@h").map(|r| r.cpu),
        Some(10.0)
    );
    assert_eq!(cpu(&second, "cpuviews-b@h"), Some(20.0));
    // Without `cpu`, views keep no reading.
    let plain = snapshot(&metrics, 3, &[&b], &second);
    assert_eq!(cpu(&plain, "cpuviews-b@h"), None);
    a.stop(None);
    b.stop(None);
}

fn snapshot_cpu(
    metrics: &SelectionMetrics,
    version: u64,
    actors: &[&ActorRef<RpcMessage>],
    previous: &Members,
) -> Members {
    let cells: Vec<ActorCell> = actors.iter().map(|a| a.get_cell()).collect();
    Members::from_cells(metrics, version, &cells, previous, true, None)
}

#[tokio::test]
async fn members_are_marked_in_this_node_s_zone_only_with_locality_keeping_their_counts() {
    let metrics = SelectionMetrics::new("round_robin", "zoned");
    let a = member_actor("zoned", "a@h").await;
    let b = member_actor("zoned", "b@h").await;
    let cells = vec![a.get_cell(), b.get_cell()];
    let plain = Members::from_cells(&metrics, 1, &cells, &Members::default(), false, None);
    assert!(
        plain.views().iter().all(|v| !v.is_preferred()),
        "no locality"
    );
    plain.get("a@h").unwrap().view().acquire();
    let in_a = |node: &str| node == "a@h";
    let zoned = Members::from_cells(&metrics, 2, &cells, &plain, false, Some(&in_a));
    let flags: Vec<(&str, bool)> = zoned
        .views()
        .iter()
        .map(|v| (v.node(), v.is_preferred()))
        .collect();
    assert_eq!(flags, [("a@h", true), ("b@h", false)]);
    assert_eq!(
        zoned.get("a@h").unwrap().in_flight(),
        1,
        "the same member's count"
    );
    for actor in [a, b] {
        actor.stop(None);
    }
}
