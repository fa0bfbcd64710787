//! The directory exchange of a sparse-mesh node: once per [`GOSSIP_INTERVAL`] it bumps its
//! own counter, writes the balancers it serves and calls with subsetting into its own entry,
//! drops entries that stopped advancing (`directory.rs`), and reconciles directories with up
//! to [`GOSSIP_FANOUT`] connected peers drawn at random. A wanted peer (a subset member) that
//! goes down is dropped from the directory at once.
//!
//! The exchange is Scuttlebutt-style anti-entropy (van Renesse, Dumitriu, Gough and Singh,
//! "Efficient Reconciliation and Flow Control for Anti-Entropy Protocols", LADIS 2008;
//! `directory/anti_entropy.rs`): the node sends its digest
//! ([`ControlRequest::GossipDigest`]: per entry its node, run, counter and content hash);
//! the peer takes the newer counters and answers [`ControlReply::GossipDelta`] with the
//! whole entries the node lacks or holds in another run or content, the newer counters of
//! the others ("beats"), and the nodes it wants whole; the node sends those
//! ([`ControlRequest::GossipEntries`]) — a third message only when an entry is new or
//! changed, which in a settled cluster is almost never.
//!
//! Cost: the digest is still one item per node of the cluster, and the beats one per node
//! whose counter the peer holds older (every counter moves every period: a gossip failure
//! detector's counters must reach every node). An item is a little shorter than a whole entry
//! (about 40 bytes against 50 with short names and one balancer), decodes with one
//! allocation instead of four, and is taken without cloning or re-sorting the directory; the
//! number of exchanges per node does not grow with the cluster. Measured in bench/README.md
//! ("Issue 21: a sparse-mesh node's idle CPU as N grows").
//!
//! Mixed versions: a peer older than the digest exchange answers it with
//! [`Error::BadRequest`]; this node then exchanges whole directories with that peer
//! ([`ControlRequest::Gossip`] answered with [`ControlReply::Directory`], as before) until its
//! session goes down. This node still answers an older peer's [`ControlRequest::Gossip`] with
//! its whole directory.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use tokio::sync::broadcast::error::RecvError;

use super::event::NodeEvent;
use super::shared::NodeShared;
use crate::call;
use crate::control::{ControlReply, ControlRequest, DigestItem, DirectoryEntry};
use crate::Error;

/// How often a node exchanges its directory.
pub(crate) const GOSSIP_INTERVAL: Duration = Duration::from_secs(1);

/// With how many connected peers a node exchanges its directory per period, at most.
pub(crate) const GOSSIP_FANOUT: usize = 3;

/// Runs the exchange until the node stops.
pub(crate) async fn run(shared: Arc<NodeShared>) {
    let mut events = shared.events.subscribe();
    let mut period = tokio::time::interval(GOSSIP_INTERVAL);
    period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Peers that answered the digest exchange with BadRequest (an older build), until their
    // session goes down: at most this node's peers.
    let mut whole = HashSet::new();
    while !shared.transport.is_stopped() {
        tokio::select! {
            _ = period.tick() => round(&shared, &mut whole).await,
            event = events.recv() => match event {
                Ok(NodeEvent::Down { node }) => {
                    whole.remove(&node);
                    if shared.wanted.is_wanted(&node) {
                        shared.directory.peer_down(&node, Instant::now());
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// One period: own entry, expiry, and the exchanges (concurrent, each bounded by a period).
/// `whole`: the peers to exchange whole directories with (older builds); grows by those
/// found older in this round.
async fn round(shared: &Arc<NodeShared>, whole: &mut HashSet<String>) {
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
    let digest = ControlRequest::GossipDigest(shared.directory.digest());
    let whole_set = &*whole;
    let exchanges = peers.iter().map(|peer| {
        let exchange = exchange(shared, peer, &digest, whole_set.contains(peer));
        tokio::time::timeout(GOSSIP_INTERVAL, exchange)
    });
    let older: Vec<String> = futures_util::future::join_all(exchanges)
        .await
        .into_iter()
        .zip(&peers)
        .filter(|(outcome, _)| matches!(outcome, Ok(Exchanged::Older)))
        .map(|(_, peer)| peer.clone())
        .collect();
    whole.extend(older);
}

/// How an exchange with a peer went.
enum Exchanged {
    /// Done (or failed for a reason the next period may not have).
    Done,
    /// The peer does not know the digest exchange: the whole directories were exchanged.
    Older,
}

/// One exchange with `peer`: the digest, then the entries it wants; or, with a peer of an
/// older build (`whole`, or found so now), the whole directories.
async fn exchange(
    shared: &NodeShared,
    peer: &str,
    digest: &ControlRequest,
    whole: bool,
) -> Exchanged {
    let transport = &shared.transport;
    if !whole {
        match call::control(transport, peer, digest, GOSSIP_INTERVAL).await {
            Ok(ControlReply::GossipDelta {
                entries,
                beats,
                wants,
            }) => {
                let now = Instant::now();
                shared.directory.merge(entries, now);
                shared.directory.take_beats(beats, now);
                if !wants.is_empty() {
                    let push = ControlRequest::GossipEntries(shared.directory.entries_of(&wants));
                    let _ = call::control(transport, peer, &push, GOSSIP_INTERVAL).await;
                }
                return Exchanged::Done;
            }
            Err(Error::BadRequest { .. }) => {}
            Ok(_) | Err(_) => return Exchanged::Done,
        }
    }
    let request = ControlRequest::Gossip(shared.directory.entries());
    if let Ok(ControlReply::Directory(entries)) =
        call::control(transport, peer, &request, GOSSIP_INTERVAL).await
    {
        shared.directory.merge(entries, Instant::now());
    }
    Exchanged::Older
}

/// Answers a peer's whole-directory exchange ([`ControlRequest::Gossip`], an older build's):
/// merges its entries, then replies with this node's directory. A node outside the sparse
/// mesh keeps no directory (it would never expire what it merged): it replies with none.
pub(crate) fn answer(shared: &NodeShared, entries: Vec<DirectoryEntry>) -> ControlReply {
    if !shared.config.sparse_mesh {
        return ControlReply::Directory(Vec::new());
    }
    shared.directory.merge(entries, Instant::now());
    ControlReply::Directory(shared.directory.entries())
}

/// Answers a peer's digest ([`ControlRequest::GossipDigest`]) with the delta
/// ([`Directory::reconcile`](super::directory::Directory::reconcile)); a node outside the
/// sparse mesh takes nothing and answers an empty delta.
pub(crate) fn answer_digest(shared: &NodeShared, digest: Vec<DigestItem>) -> ControlReply {
    if !shared.config.sparse_mesh {
        return ControlReply::GossipDelta {
            entries: Vec::new(),
            beats: Vec::new(),
            wants: Vec::new(),
        };
    }
    let delta = shared.directory.reconcile(digest, Instant::now());
    ControlReply::GossipDelta {
        entries: delta.entries,
        beats: delta.beats,
        wants: delta.wants,
    }
}

/// Answers the entries a peer sends after a delta ([`ControlRequest::GossipEntries`]):
/// merged (nothing outside the sparse mesh), then [`ControlReply::Done`].
pub(crate) fn answer_entries(shared: &NodeShared, entries: Vec<DirectoryEntry>) -> ControlReply {
    if shared.config.sparse_mesh {
        shared.directory.merge(entries, Instant::now());
    }
    ControlReply::Done
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn a_sparse_node_answers_a_digest_with_its_delta_and_takes_the_wanted_entries() {
        let sparse = node(true);
        let digest = vec![DigestItem::of(&peer_entry())];
        let ControlReply::GossipDelta {
            entries,
            beats,
            wants,
        } = answer_digest(&sparse, digest.clone())
        else {
            panic!("not a delta");
        };
        assert_eq!(wants, ["p@127.0.0.1"], "it lacks the peer's entry");
        assert!(beats.is_empty());
        assert_eq!(entries.len(), 1, "its own entry, which the peer lacks");
        assert_eq!(entries[0].node, "me@127.0.0.1");
        assert_eq!(
            answer_entries(&sparse, vec![peer_entry()]),
            ControlReply::Done
        );
        assert_eq!(sparse.directory.serving("b"), ["p@127.0.0.1"]);
        // A full-mesh node takes nothing and answers an empty delta.
        let full = node(false);
        assert_eq!(
            answer_digest(&full, digest),
            ControlReply::GossipDelta {
                entries: Vec::new(),
                beats: Vec::new(),
                wants: Vec::new(),
            }
        );
        assert_eq!(
            answer_entries(&full, vec![peer_entry()]),
            ControlReply::Done
        );
        assert!(full.directory.serving("b").is_empty(), "nothing merged");
    }
}
