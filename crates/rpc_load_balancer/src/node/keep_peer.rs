//! The background loop that keeps a configured peer connected: dial, and while the peer is
//! down dial again with capped, jittered backoff — slower after the peer said it was leaving,
//! after it refused this node's wire version, or after its handshakes were closed several
//! times in a row (see [`rejection_backoff`]).

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;
use tokio::sync::broadcast::error::RecvError;

use super::connect::{connect, OWN_ADDRESS};
use super::event::NodeEvent;
use super::shared::NodeShared;
use crate::Error;

/// Keeps a session to `addr` up until the node stops: dial, and while down, dial again after
/// a backoff that starts at 100 ms, doubles up to `dial_backoff_max` and is jittered ±20%.
pub(crate) async fn keep_peer(
    shared: Arc<NodeShared>,
    server: ActorRef<NodeServerMessage>,
    addr: String,
) {
    let first = Duration::from_millis(100);
    let mut backoff = first;
    let mut events = shared.events.subscribe();
    let mut failures = 0u32;
    // Handshakes in a row the peer closed (see `rejection_backoff`).
    let mut rejections = 0u32;
    while !shared.transport.is_stopped() {
        match connect(&shared, &server, &addr, shared.config.connect_timeout).await {
            Ok(name) => {
                backoff = first;
                failures = 0;
                rejections = 0;
                shared.peers.clear_leaving(&name);
                // Sleep until that peer goes down (or the node stops).
                loop {
                    match events.recv().await {
                        Ok(NodeEvent::Down { node }) if node == name => {
                            if shared.peers.has_left(&name) {
                                // It said it was leaving: expect it back no sooner than a
                                // restart, and redial at the slowest pace.
                                tracing::debug!(%addr, node = %name, "peer left; redialling slowly");
                                failures = 1;
                                backoff = shared.config.dial_backoff_max;
                                let jitter = 0.8 + rand::random::<f64>() * 0.4;
                                tokio::time::sleep(backoff.mul_f64(jitter)).await;
                            }
                            break;
                        }
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => {
                            if !shared.peers.is_connected(&name) {
                                break;
                            }
                        }
                        Err(RecvError::Closed) => return,
                    }
                }
            }
            Err(error @ Error::WireVersion { .. }) => {
                // Refused (see `version.rs`): dial again once the refusal has lapsed, in case
                // the peer was upgraded meanwhile.
                tracing::warn!(%addr, %error, retry_in_ms = super::version::REFUSAL_KEPT.as_millis() as u64, "configured peer speaks another wire version");
                failures += 1;
                tokio::time::sleep(super::version::REFUSAL_KEPT).await;
            }
            Err(Error::ConnectFailed { reason, .. }) if reason == OWN_ADDRESS => {
                tracing::warn!(%addr, "not dialling this node's own address, listed among its peers");
                return;
            }
            Err(Error::ConnectFailed { .. }) if shared.peers.name_taken_for().is_some() => {
                // Another process runs under this node's name (logged by `connect`): a hung
                // predecessor that heartbeats drop within seconds, or a live duplicate.
                failures += 1;
                let wait = shared.peers.name_taken_for().unwrap_or(Duration::ZERO);
                tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
            }
            Err(error) => {
                // The first failure and every tenth after are worth a warning: a wrong cookie
                // or a duplicate name never fixes itself.
                if failures.is_multiple_of(10) {
                    tracing::warn!(%addr, %error, failures = failures + 1, "configured peer not reachable; retrying");
                } else {
                    tracing::debug!(%addr, %error, retry_in_ms = backoff.as_millis() as u64, "peer not reachable");
                }
                failures += 1;
                rejections = if was_rejected(&error) {
                    rejections + 1
                } else {
                    0
                };
                let jitter = 0.8 + rand::random::<f64>() * 0.4;
                let pause = rejection_backoff(rejections).unwrap_or(backoff);
                tokio::time::sleep(pause.mul_f64(jitter)).await;
                backoff = (backoff * 2).min(shared.config.dial_backoff_max);
            }
        }
    }
}

/// Whether the peer closed the handshake of a failed connect: wrong cookie, TLS mismatch, a
/// duplicate name (ractor_cluster often refuses one before it can be named), or overload.
pub(crate) fn was_rejected(error: &Error) -> bool {
    matches!(error, Error::ConnectFailed { reason, .. }
        if reason.contains("closed the session during the handshake")
            || reason.contains("closed the session after authenticating"))
}

/// The pause after `rejections` handshakes in a row closed by the peer, once it is more than
/// the usual backoff: none for the first 3 (a peer restarting, or a simultaneous connect),
/// then 5 s doubling to 5 minutes. Retrying faster fixes nothing — and when another process
/// holds this node's name, each attempt can make the cluster drop that node for a moment.
pub(crate) fn rejection_backoff(rejections: u32) -> Option<Duration> {
    let over = rejections.checked_sub(3)?;
    Some(Duration::from_secs(5 << over.min(6)).min(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_rejections_back_off_to_five_minutes() {
        let pauses: Vec<Option<u64>> = (0..12)
            .map(|n| rejection_backoff(n).map(|d| d.as_secs()))
            .collect();
        assert_eq!(
            pauses,
            [
                None,
                None,
                None,
                Some(5),
                Some(10),
                Some(20),
                Some(40),
                Some(80),
                Some(160),
                Some(300),
                Some(300),
                Some(300)
            ]
        );
    }
}
