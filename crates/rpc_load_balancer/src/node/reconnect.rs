//! Reconnecting peers lost uncleanly. ractor_cluster never redials; configured peers have
//! their own dial loop (`keep_peer.rs`), and this covers the rest: a peer found through
//! the mesh whose last session closed without it saying it was leaving (killed, crashed, cut
//! off, or dropped for missing heartbeats) is redialled at its advertised address with capped,
//! jittered exponential backoff (100 ms doubling to `dial_backoff_max`, ±20 %) until it is
//! back — by our dial or its own — or `reconnect_give_up` has passed.
//!
//! Not redialled: in the sparse mesh (`NodeConfig::sparse_mesh`), peers no subset of this
//! node wants; peers that announced they were leaving (a drained shutdown: they come back,
//! if ever, by dialling us), client nodes (`NodeConfig::client`), peers refused for another
//! wire version, peers with no advertised
//! address (attached nodes), and configured peers (their own loop runs for as long as the
//! node does). A peer restarted under the same name at a new address cannot be found at the
//! old one; it comes back when it dials its own configured peers, which introduce it to the
//! rest of the mesh (`mesh.rs`).

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;
use tokio::time::Instant;

use super::mesh::CROSS_DIAL_DELAY;
use super::shared::NodeShared;
use super::{connect, keep_peer};

/// First pause before a redial; doubles up to `dial_backoff_max`.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Whether `name`, lost at `addr`, is one to redial (see the module docs).
pub(crate) fn should_redial(shared: &NodeShared, name: &str, addr: &str) -> bool {
    !shared.config.reconnect_give_up.is_zero()
        && !addr.is_empty()
        && !shared.transport.is_stopped()
        && !shared.is_configured(addr)
        && !shared.peers.has_left(name)
        && !shared.peers.is_client(name)
        && shared.peers.refusal(name).is_none()
        // The sparse mesh keeps only the sessions its subsets want (`subset_dial.rs`).
        && (!shared.config.sparse_mesh || shared.wanted.is_wanted(name))
}

/// Redials `name` at `addr` until it is connected again, it turns out to have left or been
/// refused, the node stops, or `reconnect_give_up` has passed. One task per name.
pub(crate) async fn redial(
    shared: Arc<NodeShared>,
    server: ActorRef<NodeServerMessage>,
    name: String,
    addr: String,
) {
    if !shared.peers.begin_redial(&name) {
        return;
    }
    let _slot = RedialSlot {
        shared: &shared,
        name: &name,
    };
    let give_up_at = crate::deadline::after(shared.config.reconnect_give_up);
    let mut backoff = FIRST_BACKOFF;
    // Both sides of a lost session may redial: the higher name waits a little longer, so the
    // other's dial usually wins and no duplicate session has to be dropped.
    let mut pause = if shared.name.as_str() > name.as_str() {
        FIRST_BACKOFF + CROSS_DIAL_DELAY
    } else {
        FIRST_BACKOFF
    };
    let mut attempts = 0u32;
    let mut rejections = 0u32;
    loop {
        let jitter = 0.8 + rand::random::<f64>() * 0.4;
        tokio::time::sleep(pause.mul_f64(jitter)).await;
        if shared.peers.is_connected(&name) {
            tracing::debug!(node = %name, attempts, "lost peer is back");
            return;
        }
        if !should_redial(&shared, &name, &addr) {
            return;
        }
        let left = give_up_at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::warn!(
                node = %name,
                %addr,
                attempts,
                give_up_ms = shared.config.reconnect_give_up.as_millis() as u64,
                "lost peer did not come back; no longer redialling it"
            );
            return;
        }
        attempts += 1;
        match connect::connect(
            &shared,
            &server,
            &addr,
            shared.config.connect_timeout.min(left),
        )
        .await
        {
            Ok(found) if found == name => {
                tracing::info!(node = %name, %addr, attempts, "reconnected to a lost peer");
                return;
            }
            Ok(other) => {
                // Another node took the address (e.g. restarted under a new name): the one we
                // lost is not there.
                tracing::debug!(node = %name, %addr, %other, "another node now has the address of a lost peer");
                return;
            }
            Err(error) => {
                tracing::debug!(node = %name, %addr, %error, attempts, "redial of a lost peer failed");
                rejections = if keep_peer::was_rejected(&error) {
                    rejections + 1
                } else {
                    0
                };
            }
        }
        pause = keep_peer::rejection_backoff(rejections).unwrap_or(backoff);
        backoff = (backoff * 2).min(shared.config.dial_backoff_max);
    }
}

/// Frees the name's redial slot however the task ends.
struct RedialSlot<'a> {
    shared: &'a NodeShared,
    name: &'a str,
}

impl Drop for RedialSlot<'_> {
    fn drop(&mut self) {
        self.shared.peers.end_redial(self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, NodeConfig};

    fn shared(config: NodeConfig) -> NodeShared {
        NodeShared::new("me@127.0.0.1".into(), String::new(), None, &config)
    }

    #[test]
    fn only_peers_lost_uncleanly_and_not_configured_are_redialled() {
        let config = NodeConfig::new("me", "127.0.0.1:0").peers(["127.0.0.1:4100"]);
        let node = shared(config.clone());
        assert!(should_redial(&node, "b@127.0.0.1", "127.0.0.1:4101"));
        // Configured: its own loop redials it.
        assert!(!should_redial(&node, "a@127.0.0.1", "127.0.0.1:4100"));
        // No advertised address.
        assert!(!should_redial(&node, "b@127.0.0.1", ""));
        // Said it was leaving, or was refused.
        node.peers.mark_leaving("b@127.0.0.1");
        assert!(!should_redial(&node, "b@127.0.0.1", "127.0.0.1:4101"));
        let refusal = Error::WireVersion {
            node: "c@127.0.0.1".into(),
            local: 1,
            remote: 2,
        };
        node.peers.refuse("c@127.0.0.1", &refusal);
        assert!(!should_redial(&node, "c@127.0.0.1", "127.0.0.1:4102"));
        // A client node.
        node.peers.set_client("d@127.0.0.1", true);
        assert!(!should_redial(&node, "d@127.0.0.1", "127.0.0.1:4103"));
        // Turned off, or the node is stopping.
        let off = shared(config.clone().reconnect_give_up(Duration::ZERO));
        assert!(!should_redial(&off, "b@127.0.0.1", "127.0.0.1:4101"));
        let stopping = shared(config);
        stopping
            .transport
            .stopped
            .store(true, std::sync::atomic::Ordering::Release);
        assert!(!should_redial(&stopping, "b@127.0.0.1", "127.0.0.1:4101"));
    }
}
