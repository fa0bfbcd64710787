//! The full mesh. pg groups are not relayed between nodes, so every node must connect to every
//! other. When a peer comes up we ask it for its peers and dial the ones we lack.
//!
//! This replaces ractor_cluster's transitive mode, which dials a peer once per session that
//! mentions it: a node joining a 3-node cluster dialled the same peer twice, one session was
//! closed as a duplicate, and calls in flight on it failed. Here one dial per address is in
//! flight at a time ([`NodeShared::begin_dial`]), and of two nodes that learn of each other at
//! once, the one whose name sorts higher waits [`CROSS_DIAL_DELAY`] first, so the other's dial
//! usually wins and no session has to be dropped.
//!
//! A peer's answer lists only the peers ready at its end when it answers, so two nodes joining
//! through the same peer at once can each miss the other (each asked before the other was
//! ready there); a client node, which no peer lists, never meets a node that joins after it
//! at all. So each peer is asked again a few times in the first seconds ([`ASK_AGAIN`]), then
//! every [`MESH_REFRESH`] while it stays connected: one small control call per peer per 10 s.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;

use super::connect;
use super::shared::NodeShared;
use crate::call;
use crate::control::{ControlReply, ControlRequest};

/// How long the higher-named of two nodes waits before dialling the other.
pub(crate) const CROSS_DIAL_DELAY: Duration = Duration::from_millis(100);

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

/// How often a connected peer is asked for its peers once the first questions are done.
pub(crate) const MESH_REFRESH: Duration = Duration::from_secs(10);

/// Asks `peer` for its peers and dials those this node is not connected to; asks again after
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
    if !learn_from(&shared, &server, &peer).await {
        return;
    }
    for delay in ASK_AGAIN.into_iter().chain(std::iter::repeat(MESH_REFRESH)) {
        tokio::time::sleep(delay).await;
        if session(&shared) != Some(first) || !learn_from(&shared, &server, &peer).await {
            return;
        }
    }
}

/// Asks `peer` for its peers once and dials those this node is not connected to (nor dialling:
/// see [`connect::connect`]); `false` when `peer` did not answer with its peers.
async fn learn_from(
    shared: &Arc<NodeShared>,
    server: &ActorRef<NodeServerMessage>,
    peer: &str,
) -> bool {
    let reply = call::control(shared, peer, &ControlRequest::Peers, shared.connect_timeout).await;
    let peers = match reply {
        Ok(ControlReply::Peers(peers)) => peers,
        Ok(_) | Err(_) => return false, // an older node, or gone again: nothing to learn
    };
    for (name, addr) in peers {
        if name == shared.name
            || addr.is_empty()
            || shared.peers.load().contains_key(&name)
            || shared.refusal(&name).is_some()
            // Announced it is leaving, and still up or gone only just: a peer that has not
            // seen it go yet still lists it. (Listed later, it has come back.)
            || shared.just_left(&name, LEFT_LISTING)
        {
            continue;
        }
        let (shared, server) = (Arc::clone(shared), server.clone());
        tokio::spawn(async move {
            if shared.name > name {
                tokio::time::sleep(CROSS_DIAL_DELAY).await;
                if shared.peers.load().contains_key(&name) {
                    return;
                }
            }
            if let Err(error) =
                connect::connect(&shared, &server, &addr, shared.connect_timeout).await
            {
                tracing::debug!(peer = %name, %addr, %error, "mesh dial failed");
            }
        });
    }
    true
}
