//! Heartbeats: ractor_cluster never notices a hung peer (a paused process keeps its TCP
//! connection open), so its members would stay listed and calls to it would wait out their
//! timeouts. Every `heartbeat_interval` this node pings each connected peer that serves rpc
//! (a `Control` ping); a peer that has not answered a ping for `heartbeat_timeout` has its
//! session stopped: its members leave every snapshot here and the calls in flight to it fail
//! with [`Error::ServiceUnavailable`](crate::Error::ServiceUnavailable). If it comes back, it
//! reconnects as any peer that lost its session does.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::shared::NodeShared;
use crate::control::ControlRequest;
use crate::Error;

/// Pings every peer each `interval`; stops the session of one silent for `timeout`.
pub(crate) async fn run(shared: Arc<NodeShared>, interval: Duration, timeout: Duration) {
    let pending: Arc<Mutex<HashSet<String>>> = Arc::default();
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let peers = shared.peers.load();
        for (name, peer) in peers.iter() {
            if peer.endpoint.is_none()
                || !pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.clone())
            {
                continue;
            }
            let (shared, pending, name, session) = (
                Arc::clone(&shared),
                Arc::clone(&pending),
                name.clone(),
                peer.session.clone(),
            );
            tokio::spawn(async move {
                let answer =
                    crate::call::control(&shared.transport, &name, &ControlRequest::Ping, timeout)
                        .await;
                if let Err(Error::RequestTimeout { .. }) = answer {
                    // Still the same session? (It may have been replaced meanwhile.)
                    let same = shared
                        .peers
                        .load()
                        .get(&name)
                        .is_some_and(|p| p.session_id == session.get_id());
                    if same {
                        tracing::warn!(node = %name, silent_ms = timeout.as_millis() as u64, "peer did not answer heartbeats; closing its session");
                        session.stop(Some("heartbeat timeout".into()));
                    }
                }
                pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&name);
            });
        }
    }
}
