//! Forwarding to an actor: the loop over raw channels (lag, end of source), and node events of
//! a real local node (delivery, skipping, the guard, the actor's and the node's end).

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::{broadcast, mpsc, watch};

use super::{node_events, spawn, ForwardedEvent, ForwardingEnd};
use crate::node::shared::Lifecycle;
use crate::{Node, NodeConfig, NodeEvent};

/// Bound on every wait of these tests.
pub(crate) const BOUND: Duration = Duration::from_secs(5);

/// A test actor's message: what it was told, as text.
#[derive(ractor_cluster::RactorMessage)]
pub(crate) struct Got(pub(crate) String);

/// An actor that passes what it gets on to the test through a channel.
pub(crate) struct Collector;

impl Actor for Collector {
    type Msg = Got;
    type State = mpsc::UnboundedSender<String>;
    type Arguments = mpsc::UnboundedSender<String>;

    async fn pre_start(
        &self,
        _: ActorRef<Got>,
        out: mpsc::UnboundedSender<String>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(out)
    }

    async fn handle(
        &self,
        _: ActorRef<Got>,
        Got(text): Got,
        out: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = out.send(text);
        Ok(())
    }
}

/// A running collector and what it has got.
pub(crate) async fn collector() -> (ActorRef<Got>, mpsc::UnboundedReceiver<String>) {
    let (out, got) = mpsc::unbounded_channel();
    let (actor, _) = Actor::spawn(None, Collector, out).await.unwrap();
    (actor, got)
}

/// The collector's next message, within [`BOUND`].
pub(crate) async fn next(got: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(BOUND, got.recv())
        .await
        .expect("a message within the bound")
        .expect("the collector runs")
}

fn describe(event: ForwardedEvent) -> Option<Got> {
    match event {
        ForwardedEvent::Node(NodeEvent::Up { node }) => Some(Got(format!("up {node}"))),
        ForwardedEvent::Node(NodeEvent::Down { node }) => Some(Got(format!("down {node}"))),
        ForwardedEvent::Lagged(missed) => Some(Got(format!("lagged {missed}"))),
        // Skipped: `None` sends nothing.
        _ => None,
    }
}

// On one thread the forwarding task runs only when the test awaits: all ten events are sent
// before it reads any, so it has lagged behind a channel of four.
#[tokio::test]
async fn lagged_events_reach_the_actor_as_lagged_then_the_rest_and_a_closed_source_ends() {
    let (actor, mut got) = collector().await;
    let (events, receiver) = broadcast::channel(4);
    let (lifecycle, lifecycle_rx) = watch::channel(Lifecycle::Running);
    let forwarding = spawn(node_events(receiver, lifecycle_rx), actor.clone(), describe);
    for i in 0..10 {
        events
            .send(NodeEvent::Up {
                node: format!("n{i}"),
            })
            .unwrap();
    }
    assert_eq!(next(&mut got).await, "lagged 6");
    for i in 6..10 {
        assert_eq!(next(&mut got).await, format!("up n{i}"));
    }
    drop(events);
    let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
    assert_eq!(end, Ok(ForwardingEnd::SourceEnded));
    drop(lifecycle);
    actor.stop(None);
}

#[tokio::test]
async fn a_stopped_node_ends_the_forwarding_after_the_events_sent_before() {
    let (actor, mut got) = collector().await;
    let (events, receiver) = broadcast::channel(4);
    let (lifecycle, lifecycle_rx) = watch::channel(Lifecycle::Running);
    let forwarding = spawn(node_events(receiver, lifecycle_rx), actor.clone(), describe);
    events.send(NodeEvent::Down { node: "a".into() }).unwrap();
    lifecycle.send_replace(Lifecycle::Stopped);
    assert_eq!(next(&mut got).await, "down a");
    let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
    assert_eq!(end, Ok(ForwardingEnd::SourceEnded));
    drop(events);
    actor.stop(None);
}

async fn start_node(name: &str) -> Node {
    Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie("forward"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_events_reach_the_actor_mapped_skipped_ones_do_not_and_shutdown_ends_it() {
    let node = start_node("forward_events").await;
    let (actor, mut got) = collector().await;
    let forwarding = node.forward_events_to(actor.clone(), describe);
    // The events a node's peers cause, told the way its cluster manager tells them.
    let events = &node.state().events;
    events.send(NodeEvent::Up { node: "b".into() }).unwrap();
    events
        .send(NodeEvent::Leaving { node: "b".into() })
        .unwrap();
    events.send(NodeEvent::Down { node: "b".into() }).unwrap();
    assert_eq!(next(&mut got).await, "up b");
    assert_eq!(next(&mut got).await, "down b", "Leaving is skipped");
    node.shutdown().await;
    let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
    assert_eq!(end, Ok(ForwardingEnd::SourceEnded));
    assert!(!actor.get_status().eq(&ractor::ActorStatus::Stopped));
    actor.stop(None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forwarding_ends_when_the_actor_stops_even_with_no_event() {
    let node = start_node("forward_actor_stops").await;
    let (actor, _got) = collector().await;
    let forwarding = node.forward_events_to(actor.clone(), describe);
    actor.stop(None);
    let end = tokio::time::timeout(BOUND, forwarding.finished()).await;
    assert_eq!(end, Ok(ForwardingEnd::ActorStopped));

    // Detached, it still ends with the actor: the actor's life bounds it.
    let (actor, _got) = collector().await;
    let forwarding = node.forward_events_to(actor.clone(), describe);
    actor.stop(None);
    let task_ended = tokio::time::timeout(BOUND, async {
        while !forwarding.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(task_ended.is_ok(), "the forwarding ended with its actor");
    forwarding.detach();
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_stops_forwarding_and_a_detached_one_keeps_on() {
    let node = start_node("forward_guard").await;
    let (actor, mut got) = collector().await;
    let dropped = node.forward_events_to(actor.clone(), describe);
    drop(dropped);
    node.forward_events_to(actor.clone(), |event| {
        describe(event).map(|Got(t)| Got(t + " (detached)"))
    })
    .detach();
    let events = &node.state().events;
    events.send(NodeEvent::Up { node: "c".into() }).unwrap();
    assert_eq!(next(&mut got).await, "up c (detached)");
    // Nothing more comes: the dropped guard's forwarding sent nothing.
    let more = tokio::time::timeout(Duration::from_millis(200), got.recv()).await;
    assert!(more.is_err(), "got {more:?}");
    actor.stop(None);
    node.shutdown().await;
}
