//! The node's events as `rpclb node`'s stdout lines: every peer that comes up gets one
//! `node_up` line, also those already connected when the node subscribed.

use std::collections::HashSet;

use rpc_load_balancer::NodeEvent;
use serde_json::{json, Value};

/// Turns the node's events into stdout lines, so that every peer that comes up gets one
/// `node_up` line — also those already connected when the node subscribed to its events.
#[derive(Debug, Default)]
pub(super) struct EventLines {
    /// Peers reported from the node list at subscription whose `Up` may still come through
    /// the events (a peer that came up while the node subscribed): that `Up` is not reported
    /// again. A peer leaves the set at its first event.
    reported_at_start: HashSet<String>,
}

impl EventLines {
    /// Starts with `peers`, the peers connected when the node subscribed; returns a `node_up`
    /// line for each of them.
    pub(super) fn new(peers: &[String]) -> (Self, Vec<Value>) {
        let lines = peers
            .iter()
            .map(|node| node_line("node_up", node))
            .collect();
        let reported_at_start = peers.iter().cloned().collect();
        (Self { reported_at_start }, lines)
    }

    /// The line of `event`, if it is reported: `node_up`, `node_down`, `node_leaving` or
    /// `node_refused`.
    pub(super) fn event(&mut self, event: NodeEvent) -> Option<Value> {
        match event {
            NodeEvent::Up { node } if self.reported_at_start.remove(&node) => None,
            NodeEvent::Up { node } => Some(node_line("node_up", &node)),
            NodeEvent::Down { node } => {
                self.reported_at_start.remove(&node);
                Some(node_line("node_down", &node))
            }
            NodeEvent::Leaving { node } => Some(node_line("node_leaving", &node)),
            NodeEvent::Refused { node, reason } => {
                self.reported_at_start.remove(&node);
                Some(json!({"event": "node_refused", "node": node, "reason": reason}))
            }
            _ => None,
        }
    }

    /// The line saying `missed` events were dropped (this reader fell behind the node's event
    /// buffer), with `peers`, the peers connected now, to resynchronise from:
    /// `{"event":"events_lagged","missed":N,"peers":[..]}`.
    pub(super) fn lagged(&mut self, missed: u64, peers: Vec<String>) -> Value {
        // A dropped `Down` would otherwise hide the `Up` of the peer's return.
        self.reported_at_start.clear();
        json!({"event": "events_lagged", "missed": missed, "peers": peers})
    }
}

/// `{"event": event, "node": node}`.
fn node_line(event: &str, node: &str) -> Value {
    json!({"event": event, "node": node})
}

#[cfg(test)]
mod tests {
    use tokio::sync::broadcast::error::RecvError;

    use super::*;

    fn up(node: &str) -> NodeEvent {
        NodeEvent::Up { node: node.into() }
    }

    fn down(node: &str) -> NodeEvent {
        NodeEvent::Down { node: node.into() }
    }

    #[test]
    fn peers_connected_before_subscribing_are_reported_once() {
        let (mut lines, startup) = EventLines::new(&["a@h".to_string(), "b@h".to_string()]);
        assert_eq!(
            startup,
            [
                json!({"event": "node_up", "node": "a@h"}),
                json!({"event": "node_up", "node": "b@h"})
            ]
        );
        // a's `Up` raced the subscription: already reported.
        assert_eq!(lines.event(up("a@h")), None);
        assert_eq!(
            lines.event(up("c@h")),
            Some(json!({"event": "node_up", "node": "c@h"}))
        );
        // b goes down and comes back: both reported.
        assert_eq!(
            lines.event(down("b@h")),
            Some(json!({"event": "node_down", "node": "b@h"}))
        );
        assert_eq!(
            lines.event(up("b@h")),
            Some(json!({"event": "node_up", "node": "b@h"}))
        );
        // a, too, once it has had its first event.
        assert_eq!(
            lines.event(up("a@h")),
            Some(json!({"event": "node_up", "node": "a@h"}))
        );
    }

    #[tokio::test]
    async fn a_lagging_reader_says_how_many_events_it_missed() {
        let (events, mut received) = tokio::sync::broadcast::channel(2);
        for i in 0..5 {
            events.send(up(&format!("n{i}@h"))).unwrap();
        }
        let (mut lines, _) = EventLines::new(&["n0@h".to_string()]);
        let missed = match received.recv().await {
            Err(RecvError::Lagged(missed)) => missed,
            other => panic!("expected a lag, got {other:?}"),
        };
        assert_eq!(
            lines.lagged(missed, vec!["n0@h".into(), "n3@h".into()]),
            json!({"event": "events_lagged", "missed": 3, "peers": ["n0@h", "n3@h"]})
        );
        // After a lag nothing is assumed reported: n0's `Up` is printed.
        assert_eq!(
            lines.event(up("n0@h")),
            Some(json!({"event": "node_up", "node": "n0@h"}))
        );
        assert_eq!(
            lines.event(received.recv().await.unwrap()),
            Some(json!({"event": "node_up", "node": "n3@h"}))
        );
    }
}
