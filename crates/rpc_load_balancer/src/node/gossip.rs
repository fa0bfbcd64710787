//! The directory exchange of a sparse-mesh node: once per [`GOSSIP_INTERVAL`] it bumps its
//! own counter, writes the balancers it serves and calls with subsetting into its own entry,
//! drops entries that stopped advancing (`directory.rs`), and exchanges directories
//! (push-pull: [`ControlRequest::Gossip`] answered with [`ControlReply::Directory`]) with up to
//! [`GOSSIP_FANOUT`] connected peers drawn at random. A wanted peer (a subset member) that
//! goes down is dropped from the directory at once.
//!
//! Cost: each exchange carries the whole directory (about 100 bytes an entry), so a node's
//! bytes per period grow with the cluster's size, as in any gossip failure detector whose
//! counters all move every period; the number of exchanges per node does not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use tokio::sync::broadcast::error::RecvError;

use super::event::NodeEvent;
use super::shared::NodeShared;
use crate::call;
use crate::control::{ControlReply, ControlRequest};

/// How often a node exchanges its directory.
pub(crate) const GOSSIP_INTERVAL: Duration = Duration::from_secs(1);

/// With how many connected peers a node exchanges its directory per period, at most.
pub(crate) const GOSSIP_FANOUT: usize = 3;

/// Runs the exchange until the node stops.
pub(crate) async fn run(shared: Arc<NodeShared>) {
    let mut events = shared.events.subscribe();
    let mut period = tokio::time::interval(GOSSIP_INTERVAL);
    period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !shared.transport.is_stopped() {
        tokio::select! {
            _ = period.tick() => round(&shared).await,
            event = events.recv() => match event {
                Ok(NodeEvent::Down { node }) if shared.wanted.is_wanted(&node) => {
                    shared.directory.peer_down(&node, Instant::now());
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// One period: own entry, expiry, and the exchanges (concurrent, each bounded by a second).
async fn round(shared: &Arc<NodeShared>) {
    let (serves, calls) = shared.balancers.directory_roles();
    shared.directory.set_own_roles(serves, calls);
    shared.directory.tick(Instant::now());
    let mut peers: Vec<String> = shared
        .peers
        .names()
        .into_iter()
        .filter(|p| !shared.peers.is_client(p))
        .collect();
    peers.shuffle(&mut rand::rng());
    peers.truncate(GOSSIP_FANOUT);
    let request = ControlRequest::Gossip(shared.directory.entries());
    let exchanges = peers
        .iter()
        .map(|peer| call::control(&shared.transport, peer, &request, GOSSIP_INTERVAL));
    for reply in futures_util::future::join_all(exchanges).await {
        if let Ok(ControlReply::Directory(entries)) = reply {
            shared.directory.merge(entries, Instant::now());
        }
    }
}

/// Answers a peer's exchange: merges its entries, then replies with this node's directory. A
/// node outside the sparse mesh keeps no directory (it would never expire what it merged):
/// it replies with none.
pub(crate) fn answer(
    shared: &NodeShared,
    entries: Vec<crate::control::DirectoryEntry>,
) -> ControlReply {
    if !shared.config.sparse_mesh {
        return ControlReply::Directory(Vec::new());
    }
    shared.directory.merge(entries, Instant::now());
    ControlReply::Directory(shared.directory.entries())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::DirectoryEntry;
    use crate::NodeConfig;

    fn node(sparse: bool) -> NodeShared {
        let config = NodeConfig::new("me", "127.0.0.1:0").sparse_mesh(sparse);
        NodeShared::new(
            "me@127.0.0.1".into(),
            String::new(),
            Some("127.0.0.1:4100".into()),
            &config,
        )
    }

    fn peer_entry() -> DirectoryEntry {
        DirectoryEntry {
            node: "p@127.0.0.1".into(),
            addr: "127.0.0.1:4101".into(),
            incarnation: 1,
            counter: 3,
            serves: vec!["b".into()],
            calls: Vec::new(),
        }
    }

    #[test]
    fn a_sparse_node_merges_an_exchange_and_answers_its_directory_a_full_mesh_node_neither() {
        let sparse = node(true);
        let ControlReply::Directory(entries) = answer(&sparse, vec![peer_entry()]) else {
            panic!("not a directory");
        };
        let names: Vec<&str> = entries.iter().map(|e| e.node.as_str()).collect();
        assert_eq!(
            names,
            ["me@127.0.0.1", "p@127.0.0.1"],
            "its own entry first"
        );
        assert_eq!(entries[0].addr, "127.0.0.1:4100");
        let full = node(false);
        assert_eq!(
            answer(&full, vec![peer_entry()]),
            ControlReply::Directory(Vec::new())
        );
        assert!(full.directory.serving("b").is_empty(), "nothing merged");
    }
}
