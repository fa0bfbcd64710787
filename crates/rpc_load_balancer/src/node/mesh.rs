//! The full mesh. pg groups are not relayed between nodes, so every node must connect to every
//! other. When a peer comes up we ask it for its peers and dial the ones we lack.
//!
//! This replaces ractor_cluster's transitive mode, which dials a peer once per session that
//! mentions it: a node joining a 3-node cluster dialled the same peer twice, one session was
//! closed as a duplicate, and calls in flight on it failed. Here one dial per address is in
//! flight at a time ([`NodeShared::begin_dial`]), and of two nodes that learn of each other at
//! once, the one whose name sorts higher waits [`CROSS_DIAL_DELAY`] first, so the other's dial
//! usually wins and no session has to be dropped.

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

/// Asks `peer` for its peers and dials those this node is not connected to.
pub(crate) async fn introduce(
    shared: Arc<NodeShared>,
    server: ActorRef<NodeServerMessage>,
    peer: String,
) {
    let reply = call::control(
        &shared,
        &peer,
        &ControlRequest::Peers,
        shared.connect_timeout,
    )
    .await;
    let peers = match reply {
        Ok(ControlReply::Peers(peers)) => peers,
        Ok(_) | Err(_) => return, // an older node, or gone again: nothing to learn
    };
    for (name, addr) in peers {
        if name == shared.name
            || addr.is_empty()
            || shared.peers.load().contains_key(&name)
            || shared.refusal(&name).is_some()
        {
            continue;
        }
        let (shared, server) = (Arc::clone(&shared), server.clone());
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
}
