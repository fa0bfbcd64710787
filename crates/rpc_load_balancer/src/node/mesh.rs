//! The full mesh. pg groups are not relayed between nodes, so every node must connect to every
//! other. When a peer comes up we ask it for its peers and dial the ones we lack.
//!
//! This replaces ractor_cluster's transitive mode, which dials a peer once per session that
//! mentions it: a node joining a 3-node cluster dialled the same peer twice, one session was
//! closed as a duplicate, and calls in flight on it failed. Here one dial per address is in
//! flight at a time
//! ([`PeerTable::begin_dial`](super::peer_table::PeerTable::begin_dial)), one task per peer
//! learnt of however many peers list it, a node has at most `max_dials_in_flight` dials in
//! their handshake, and of two nodes that learn of each other, one dials (its dials spread
//! over [`DIAL_SPREAD`]) while the other waits [`MESH_FALLBACK`] first, so that no session
//! has to be dropped ([`schedule_dial`]).
//!
//! A peer's answer lists only the peers ready at its end when it answers, so two nodes joining
//! through the same peer at once can each miss the other (each asked before the other was
//! ready there). So each peer is asked again a few times in the first seconds
//! ([`ASK_AGAIN`]; not when the node has more than [`REFRESH_FANOUT`] peers already, whose
//! first answers together list every node), then every [`MESH_REFRESH`] while it stays
//! connected — less often with
//! more than [`REFRESH_FANOUT`] peers, so that a node asks about `REFRESH_FANOUT` peers per
//! 10 s in all, however large the cluster ([`refresh_pause`]).
//!
//! **Client nodes** (`NodeConfig::client`) are listed by no peer, so asking would find a node
//! that joins (or restarts) after them only at their next refresh, up to 10 s later — and a
//! restarted node that had said it was leaving not before [`LEFT_LISTING`] has passed. So a
//! node that comes up sends a join notice ([`ControlRequest::Joined`]) to the first peer it
//! meshes with, once ([`announce`]); that peer passes it on to each client node connected to
//! it, and each client dials the new node at once ([`on_joined`]; its ready session also
//! ends the "left" record of the name). A join makes one notice per client, whoever else
//! sees the newcomer: only the newcomer sends it, to one peer. Clients only dial out, as
//! elsewhere. A client that is not yet connected to that peer finds the newcomer by asking.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;

use super::connect;
use super::shared::NodeShared;
use crate::call;
use crate::control::{ControlReply, ControlRequest};
use crate::Error;

/// How long the higher-named of two nodes waits before redialling the other after their
/// session was lost (`reconnect.rs`).
pub(crate) const CROSS_DIAL_DELAY: Duration = Duration::from_millis(100);

/// How long the one of two nodes that learnt of each other through the mesh that does not
/// dial first ([`dials_first`]) waits for the other's dial before dialling itself (±20 %): longer than a handshake takes while
/// every node of a forming mesh of ~100 is busy with its own (see [`schedule_dial`]).
const MESH_FALLBACK: Duration = Duration::from_millis(1_500);

/// The node that dials first dials the other after a pause drawn from `0..DIAL_SPREAD`:
/// a node that learns of many peers at once spreads its dials.
const DIAL_SPREAD: Duration = Duration::from_millis(200);

/// After the first question, how long to wait before each further one (cumulative delays:
/// 0.3 s, 1.3 s, 4.3 s after the peer came up), before settling to [`MESH_REFRESH`].
const ASK_AGAIN: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_secs(1),
    Duration::from_secs(3),
];

/// How long after a node that announced it was leaving went down a peer's list naming it is
/// taken as stale; later, the peer has seen it come back (restarted under the same name).
const LEFT_LISTING: Duration = Duration::from_secs(5);

/// How often a connected peer is asked for its peers once the first questions are done (with
/// up to [`REFRESH_FANOUT`] peers; see [`refresh_pause`]).
pub(crate) const MESH_REFRESH: Duration = Duration::from_secs(10);

/// How many peers a node asks for their peers per [`MESH_REFRESH`], at most (once the first
/// questions to each are done).
const REFRESH_FANOUT: usize = 8;

/// Asks `peer` for its peers and dials those this node is not connected to (in the sparse
/// mesh: only sends the join notice); asks again after
/// each of [`ASK_AGAIN`], then every [`MESH_REFRESH`], while `peer` stays connected over the
/// same session (a reconnection starts its own round) and answers.
pub(crate) async fn introduce(
    shared: Arc<NodeShared>,
    server: ActorRef<NodeServerMessage>,
    peer: String,
) {
    let session = |shared: &NodeShared| shared.peers.load().get(&peer).map(|p| p.session_id);
    let Some(first) = session(&shared) else {
        return;
    };
    // The sparse mesh dials only seeds and subset members (`subset_dial.rs`): nothing to
    // learn here, but clients still want the join notice.
    if shared.config.sparse_mesh {
        announce(&shared, &peer).await;
        return;
    }
    if !learn_from(&shared, &server, &peer).await {
        return;
    }
    announce(&shared, &peer).await;
    // With many peers, their first answers together already list every node: no need to ask
    // each again so soon (each answer lists every peer of the one asked).
    let again: &[Duration] = if shared.peers.load().len() > REFRESH_FANOUT {
        &[]
    } else {
        &ASK_AGAIN
    };
    for delay in again
        .iter()
        .copied()
        .map(Some)
        .chain(std::iter::repeat(None))
    {
        let delay = delay.unwrap_or_else(|| refresh_pause(shared.peers.load().len()));
        tokio::time::sleep(delay).await;
        if session(&shared) != Some(first) || !learn_from(&shared, &server, &peer).await {
            return;
        }
    }
}

/// How long a peer's round of mesh questions waits before its next question once the first
/// ones are done, with `peers` connected: [`MESH_REFRESH`], longer with more than
/// [`REFRESH_FANOUT`] peers so that the node asks about `REFRESH_FANOUT` peers per
/// `MESH_REFRESH` in all (each answer lists every peer of the one asked: asking all of ~100
/// peers every 10 s costs a node more than its heartbeats), jittered ±20 %.
fn refresh_pause(peers: usize) -> Duration {
    let rounds = (peers as f64 / REFRESH_FANOUT as f64).max(1.0);
    MESH_REFRESH.mul_f64(rounds * (0.8 + rand::random::<f64>() * 0.4))
}

/// Asks `peer` for its peers once and dials those this node is not connected to (nor dialling:
/// see [`connect::connect`]); `false` when `peer` did not answer with its peers.
async fn learn_from(
    shared: &Arc<NodeShared>,
    server: &ActorRef<NodeServerMessage>,
    peer: &str,
) -> bool {
    let reply = call::control(
        &shared.transport,
        peer,
        &ControlRequest::Peers,
        shared.config.connect_timeout,
    )
    .await;
    let peers = match reply {
        Ok(ControlReply::Peers(peers)) => peers,
        Ok(_) | Err(_) => return false, // an older node, or gone again: nothing to learn
    };
    for (name, addr) in peers {
        if name == shared.name
            || addr.is_empty()
            || shared.peers.is_connected(&name)
            || shared.peers.refusal(&name).is_some()
            // Announced it is leaving, and still up or gone only just: a peer that has not
            // seen it go yet still lists it. (Listed later, it has come back.)
            || shared.peers.just_left(&name, LEFT_LISTING)
        {
            continue;
        }
        schedule_dial(shared, server, name, addr);
    }
    true
}

/// Dials `name`, learnt through the mesh at `addr`, on a task of its own unless one is
/// already on it (however many peers list it). Of two nodes that learn of each other, one
/// ([`dials_first`]; a client node, always: no node dials it) dials, after a pause drawn from
/// `0..`[`DIAL_SPREAD`]; the other
/// dials only if it is still not connected after [`MESH_FALLBACK`] (±20 %), nor has a
/// session of the other on its way up — so that a forming mesh makes one session per pair,
/// not two of which ractor_cluster closes one (which may be the one already in use: a flap).
/// The dial itself waits for one of the node's dial slots (`max_dials_in_flight`).
fn schedule_dial(
    shared: &Arc<NodeShared>,
    server: &ActorRef<NodeServerMessage>,
    name: String,
    addr: String,
) {
    if !shared.peers.begin_mesh_dial(&name) {
        return;
    }
    let (shared, server) = (Arc::clone(shared), server.clone());
    tokio::spawn(async move {
        let _slot = MeshDialSlot {
            shared: &shared,
            name: &name,
        };
        // A client node dials every node it learns of at once: no node dials a client.
        let waits = if !shared.config.client && !dials_first(&shared.name, &name) {
            // Waiting again while a session of the peer is on its way up, a few times.
            vec![MESH_FALLBACK.mul_f64(0.8 + rand::random::<f64>() * 0.4); 3]
        } else {
            vec![DIAL_SPREAD.mul_f64(rand::random::<f64>())]
        };
        let last = waits.len() - 1;
        for (i, wait) in waits.into_iter().enumerate() {
            tokio::time::sleep(wait).await;
            if shared.peers.is_connected(&name) || shared.transport.is_stopped() {
                return;
            }
            // A session of the peer on its way up: wait again. After the last wait, give it
            // until `connect_timeout` to be ready, then dial if it was not (left to the next
            // mesh refresh, the pair could wait minutes in a large mesh; dialling while it is
            // on its way would make a second session of which ractor_cluster closes one).
            if shared.peers.is_authenticating(&name) {
                if i < last {
                    continue;
                }
                let until = tokio::time::Instant::now() + shared.config.connect_timeout;
                while shared.peers.is_authenticating(&name) && tokio::time::Instant::now() < until {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                if shared.peers.is_connected(&name) || shared.transport.is_stopped() {
                    return;
                }
            }
            mesh_dial(&shared, &server, &name, &addr).await;
            return;
        }
    });
}

/// Dials `name`, learnt through the mesh at `addr`: waits on while the node's other dials hold
/// every dial slot, and after a failed dial tries again after [`MESH_RETRY`] (doubling,
/// ±20 %), [`MESH_ATTEMPTS`] dials in all, unless the peer is connected meanwhile, was
/// refused, or this node's name is taken: a failed dial left to the next mesh refresh would
/// keep the pair apart for as long (minutes in a mesh of ~100, see [`refresh_pause`]).
async fn mesh_dial(
    shared: &Arc<NodeShared>,
    server: &ActorRef<NodeServerMessage>,
    name: &str,
    addr: &str,
) {
    let (mut pause, mut attempt) = (MESH_RETRY, 0);
    loop {
        let bound = shared.config.connect_timeout;
        match connect::connect(shared, server, addr, bound).await {
            Ok(_) => return,
            // The node's other dials held every slot: still wanted, wait on.
            Err(Error::ConnectFailed { reason, .. })
                if reason.starts_with(connect::NO_DIAL_SLOT) => {}
            Err(error) => {
                attempt += 1;
                tracing::debug!(peer = %name, %addr, %error, attempt, "mesh dial failed");
                if attempt == MESH_ATTEMPTS {
                    return;
                }
                tokio::time::sleep(pause.mul_f64(0.8 + rand::random::<f64>() * 0.4)).await;
                pause *= 2;
            }
        }
        let wanted = !shared.peers.is_connected(name)
            && !shared.transport.is_stopped()
            && shared.peers.refusal(name).is_none()
            && shared.peers.name_taken_for().is_none();
        if !wanted {
            return;
        }
    }
}

/// First pause before a failed mesh dial is tried again ([`mesh_dial`]).
const MESH_RETRY: Duration = Duration::from_millis(500);

/// Most dials of a peer learnt through the mesh, per listing ([`mesh_dial`]).
const MESH_ATTEMPTS: u32 = 3;

/// Whether `own` is the one of two nodes named `own` and `other` that dials the other when
/// they learn of each other through the mesh: decided by a hash of the two names (the same on
/// both, in every process and build: FNV-1a), so that each node dials about half of its
/// peers — by name order, the lowest-named node of a cluster would dial every other.
fn dials_first(own: &str, other: &str) -> bool {
    let (low, high) = if own < other {
        (own, other)
    } else {
        (other, own)
    };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in low.bytes().chain([0]).chain(high.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let low_dials = hash & 1 == 0;
    low_dials == (own == low)
}

/// Frees a name's mesh dial slot however its task ends.
struct MeshDialSlot<'a> {
    shared: &'a NodeShared,
    name: &'a str,
}

impl Drop for MeshDialSlot<'_> {
    fn drop(&mut self) {
        self.shared.peers.end_mesh_dial(self.name);
    }
}

/// Sends this node's join notice to `peer` unless one was already handed to a peer: once per
/// run of the node, and not at all from a client node or one advertising no address, nor to
/// a client node (which passes nothing on: a client that met this node first by asking must
/// not use up the notice). If `peer` does not take it (gone, or an older node), the next peer
/// to come up is asked.
async fn announce(shared: &Arc<NodeShared>, peer: &str) {
    let Some(addr) = shared.connection_string.clone() else {
        return;
    };
    if !may_announce_to(shared, peer) || shared.announced.swap(true, Ordering::AcqRel) {
        return;
    }
    let notice = ControlRequest::Joined {
        node: shared.name.clone(),
        addr,
    };
    match call::control(
        &shared.transport,
        peer,
        &notice,
        shared.config.connect_timeout,
    )
    .await
    {
        Ok(ControlReply::Done) => {
            tracing::debug!(%peer, "join notice sent, for client nodes");
        }
        other => {
            tracing::debug!(%peer, ?other, "a peer did not take the join notice");
            shared.announced.store(false, Ordering::Release);
        }
    }
}

/// Whether this node may hand its join notice to `peer`: it is not a client node, and
/// neither is `peer`.
fn may_announce_to(shared: &NodeShared, peer: &str) -> bool {
    !shared.config.client && !shared.peers.is_client(peer)
}

/// Handles a join notice ([`ControlRequest::Joined`]): a client node dials `addr` unless it
/// is connected to `node`; any other node passes the notice on to its client nodes if `node`
/// is its peer advertising `addr` (so a notice cannot send clients elsewhere). Returns at
/// once; the dials and notices run on their own tasks.
pub(crate) fn on_joined(shared: &Arc<NodeShared>, node: String, addr: String) {
    if node == shared.name || addr.is_empty() {
        return;
    }
    if shared.config.client {
        tracing::debug!(%node, %addr, "join notice");
        if shared.peers.is_connected(&node) || shared.peers.refusal(&node).is_some() {
            return;
        }
        // The node itself says it is back: listings of it are no longer stale.
        shared.peers.forget_left(&node);
        let Some(server) = shared.server.get().cloned() else {
            return;
        };
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            if let Err(error) =
                connect::connect(&shared, &server, &addr, shared.config.connect_timeout).await
            {
                tracing::debug!(%node, %addr, %error, "cannot dial the node of a join notice");
            }
        });
        return;
    }
    if shared.peers.connection_of(&node).as_deref() != Some(addr.as_str()) {
        tracing::debug!(%node, %addr, "ignoring a join notice for a node that is not a peer at that address");
        return;
    }
    let clients = shared.peers.client_peers();
    if clients.is_empty() {
        return;
    }
    tracing::debug!(%node, clients = clients.len(), "passing a join notice on to client nodes");
    let notice = ControlRequest::Joined { node, addr };
    for client in clients {
        let (shared, notice) = (Arc::clone(shared), notice.clone());
        tokio::spawn(async move {
            let _ = call::control(
                &shared.transport,
                &client,
                &notice,
                shared.config.connect_timeout,
            )
            .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeConfig;

    fn shared(client: bool) -> Arc<NodeShared> {
        let config = NodeConfig::new("me", "127.0.0.1:0").client(client);
        Arc::new(NodeShared::new(
            "me@127.0.0.1".into(),
            String::new(),
            Some("127.0.0.1:4100".into()),
            &config,
        ))
    }

    #[test]
    fn the_refresh_asks_a_bounded_number_of_peers_per_round() {
        for _ in 0..20 {
            let few = refresh_pause(3);
            assert!(few >= MESH_REFRESH.mul_f64(0.8) && few <= MESH_REFRESH.mul_f64(1.2));
            // 96 peers: each asked every ~120 s, so 8 questions per 10 s in all.
            let many = refresh_pause(96);
            assert!(many >= MESH_REFRESH.mul_f64(12.0 * 0.8));
            assert!(many <= MESH_REFRESH.mul_f64(12.0 * 1.2));
        }
    }

    #[test]
    fn of_two_nodes_exactly_one_dials_first_and_each_dials_about_half() {
        let names: Vec<String> = (0..64).map(|i| format!("m{i}@127.0.0.1")).collect();
        for a in &names {
            let first = names
                .iter()
                .filter(|b| *b != a && dials_first(a, b))
                .count();
            assert!((12..=51).contains(&first), "{a} dials {first} of 63 first");
            for b in names.iter().filter(|b| *b != a) {
                assert_ne!(dials_first(a, b), dials_first(b, a), "{a} and {b}");
            }
        }
    }

    #[tokio::test]
    async fn a_join_notice_ends_the_left_record_on_a_client_node_only() {
        for client in [true, false] {
            let node = shared(client);
            node.peers.mark_leaving("b@127.0.0.1");
            node.peers.note_down("b@127.0.0.1");
            assert!(node.peers.just_left("b@127.0.0.1", LEFT_LISTING));
            on_joined(&node, "b@127.0.0.1".into(), "127.0.0.1:4101".into());
            // A client takes the node's word that it is back; a server (for which b is not a
            // peer at that address) ignores the notice.
            assert_eq!(node.peers.just_left("b@127.0.0.1", LEFT_LISTING), !client);
        }
    }

    #[tokio::test]
    async fn a_node_announces_once_and_not_as_a_client() {
        // No peer answers here: the notice is not taken, so the next peer would be asked.
        let node = shared(false);
        announce(&node, "p@127.0.0.1").await;
        assert!(!node.announced.load(Ordering::Acquire));
        // Already handed to a peer: nothing is sent.
        node.announced.store(true, Ordering::Release);
        announce(&node, "p@127.0.0.1").await;
        assert!(node.announced.load(Ordering::Acquire));
        // Not from a client node, nor to one: the notice is kept for a peer that passes it on.
        assert!(!may_announce_to(&shared(true), "p@127.0.0.1"));
        let node = shared(false);
        node.peers.set_client("c@127.0.0.1", true);
        assert!(!may_announce_to(&node, "c@127.0.0.1"));
        assert!(may_announce_to(&node, "p@127.0.0.1"));
    }
}
