//! Warnings about refused handshakes, so that an operator learns why a peer cannot join (a
//! wrong cookie is otherwise only visible on the dialling side), without a flood of them
//! filling the log: at most one line per [`REFUSAL_LOG_INTERVAL`], which counts the refusals
//! left unlogged since the previous line.
//!
//! ractor_cluster does not say why a session closed before authenticating. The cluster
//! manager (`cluster.rs`) hands every such session of the node's listener here: if the peer
//! hung up, it is no refusal; if the node closed it itself (see `preauth.rs`), that was logged
//! already; if the peer never named itself, it did not start a node handshake; otherwise the
//! node refused its answer to the cookie challenge — unless the peer is connected a moment
//! later, when it was the losing session of a simultaneous connect.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::ActorRef;
use ractor_cluster::NodeSessionMessage;

use super::preauth::Handshake;
use super::shared::NodeShared;

/// Shortest time between two warnings about refused handshakes.
pub(crate) const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// How long after an unauthenticated session of a named peer closed the peer must still be
/// down for the close to count as a refusal: the losing session of a simultaneous connect
/// closes the same way while the winner comes up.
const REFUSAL_GRACE: Duration = Duration::from_secs(1);

/// A session opened and not authenticated yet (kept by the cluster manager, which closes it
/// at its handshake deadline).
pub(crate) struct Opening {
    pub(crate) session: ActorRef<NodeSessionMessage>,
    /// The peer's `ip:port`.
    pub(crate) peer_addr: String,
    /// Accepted by this node (not dialled).
    pub(crate) is_server: bool,
    /// Its connection's handshake state, when the node's own listener accepted it.
    pub(crate) handshake: Option<Arc<Handshake>>,
}

/// Logs refused handshakes at WARN, rate-limited.
#[derive(Default)]
pub(crate) struct Refusals(Mutex<Limit>);

#[derive(Default)]
struct Limit {
    last: Option<Instant>,
    /// Refusals not logged since the last line.
    unlogged: u64,
}

impl Refusals {
    /// Warns (rate-limited) about `opening`, closed before it authenticated, if this node
    /// refused it (see the module docs); `name` is the name its peer claimed, if any.
    pub(crate) fn closed_unauthenticated(
        self: Arc<Self>,
        shared: &Arc<NodeShared>,
        opening: Opening,
        name: Option<String>,
    ) {
        if !opening.is_server {
            return; // our own dial: `connect` reports it
        }
        if let Some(handshake) = &opening.handshake {
            if handshake.peer_closed() || handshake.closed_by_node() {
                tracing::debug!(peer_addr = %opening.peer_addr, outcome = ?handshake.outcome(), "a connection ended during the handshake");
                return;
            }
        }
        let Some(name) = name else {
            let reason = "the peer did not start a node handshake (not an rpc_load_balancer \
                          node, or garbage on the wire)";
            self.refused(&opening.peer_addr, None, reason);
            return;
        };
        let reason = if opening.handshake.is_some() {
            "wrong cookie: its answer to this node's challenge does not match this node's cookie"
        } else {
            "wrong cookie (or the peer gave up during the handshake)"
        };
        let shared = Arc::clone(shared);
        tokio::spawn(async move {
            tokio::time::sleep(REFUSAL_GRACE).await;
            if !shared.peers.is_connected(&name) {
                self.refused(&opening.peer_addr, Some(&name), reason);
            }
        });
    }

    /// Notes that the handshake of the connection from `peer_addr` (`ip:port`), whose peer
    /// called itself `name` if it got that far, failed for `reason`; logs it unless a line
    /// was logged in the last [`REFUSAL_LOG_INTERVAL`].
    pub(crate) fn refused(&self, peer_addr: &str, name: Option<&str>, reason: &str) {
        let Some(unlogged) = self.admit(Instant::now()) else {
            return;
        };
        tracing::warn!(
            %peer_addr,
            peer = %name.unwrap_or("?"),
            %reason,
            also_refused_since_last_warning = unlogged,
            "refused a peer's handshake"
        );
    }

    /// Whether a line may be logged `now`: the refusals left unlogged before it, if so.
    fn admit(&self, now: Instant) -> Option<u64> {
        let mut limit = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match limit.last {
            Some(last) if now.saturating_duration_since(last) < REFUSAL_LOG_INTERVAL => {
                limit.unlogged += 1;
                None
            }
            _ => {
                limit.last = Some(now);
                Some(std::mem::take(&mut limit.unlogged))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_counting_the_rest() {
        let refusals = Refusals::default();
        let start = Instant::now();
        assert_eq!(refusals.admit(start), Some(0));
        for i in 1..=5 {
            assert_eq!(refusals.admit(start + Duration::from_secs(i)), None);
        }
        assert_eq!(refusals.admit(start + REFUSAL_LOG_INTERVAL), Some(5));
        assert_eq!(
            refusals.admit(start + REFUSAL_LOG_INTERVAL + Duration::from_secs(1)),
            None
        );
    }
}
