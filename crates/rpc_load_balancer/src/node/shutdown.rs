//! Stopping a node: [`Node::shutdown`] drains its balancers, tells its peers it is leaving,
//! then stops its parts in the reverse order of their start and gives the process's node
//! slot back.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ractor_cluster::NodeServerMessage;

use super::cluster::SUBSCRIPTION_ID;
use super::shared::Lifecycle;
use super::start::{CURRENT, RUNNING};
use super::Node;
use crate::control::ControlRequest;

/// The longest [`Node::shutdown`] waits for balancer starts that were under way when it
/// began, once every balancer has stopped.
const STARTS_WAIT: Duration = Duration::from_secs(5);

impl Node {
    /// Stops the node: stops its balancers gracefully (all at once, each draining as
    /// [`Balancer::stop`](crate::Balancer::stop) does; from its first step on, a balancer
    /// start on this node fails with [`Error::NodeNotRunning`](crate::Error::NodeNotRunning),
    /// and one under way when it began is waited for, at most 5 s, and stopped too: so a
    /// supervisor that restarts its balancer cannot leave one running), tells its peers it is
    /// leaving, then
    /// stops dialling and CPU sampling, leaves pg, stops the endpoint and manager, and stops
    /// the NodeServer if [`Node::start`] created it (closing every session).
    ///
    /// Only balancers drain: direct calls ([`Node::call`], random-node calls not tracked by a
    /// balancer) that this node makes or serves when the sessions close fail with
    /// [`Error::ServiceUnavailable`] (`ConnectionLost`), and the
    /// [`CallContext`](crate::CallContext)s of those still running here are cancelled.
    /// Waiting random-node calls end at once with `NodeStopped`. Calls made afterwards fail
    /// with [`Error::ServiceUnavailable`]; a new node may then be started in this process. A
    /// second call while one runs returns when it is done.
    ///
    /// [`Error::ServiceUnavailable`]: crate::Error::ServiceUnavailable
    ///
    /// Returns the [`DrainReport`](crate::DrainReport) of each balancer it stopped, sorted by
    /// balancer name (empty when none ran); a second call returns the same.
    pub async fn shutdown(&self) -> Vec<crate::control::DrainReport> {
        let inner = &self.inner;
        let mut lifecycle = inner.shared.lifecycle.subscribe();
        if !inner.shut_down.swap(true, Ordering::AcqRel) {
            inner.shared.lifecycle.send_replace(Lifecycle::ShuttingDown);
            // The work runs on its own task: dropping this future does not abandon it.
            let node = self.clone();
            tokio::spawn(async move { node.shut_down().await });
        }
        let _ = lifecycle.wait_for(|l| *l == Lifecycle::Stopped).await;
        self.inner
            .drains
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops every balancer of this node, and those whose starts were under way when the
    /// shutdown began (no new start is let in: they fail with `NodeNotRunning`), all at once,
    /// each bounded by its `drain_timeout`; a start still under way after [`STARTS_WAIT`] is
    /// given up on (logged at WARN: it fails with `NodeNotRunning` and undoes itself when it
    /// gets to register). Returns their reports.
    async fn stop_balancers(&self) -> Vec<crate::control::DrainReport> {
        let registry = &self.inner.shared.balancers;
        registry.close();
        let mut drains = Vec::new();
        // By the address of their state (a balancer stopped here is not stopped again).
        let mut stopped: Vec<usize> = Vec::new();
        let mut starts_until = None;
        loop {
            // Every balancer drains at once (a restart of one by its parent while it drains is
            // refused, or waited for and stopped in the next round).
            let balancers: Vec<_> = registry
                .running()
                .into_iter()
                .filter(|b| !stopped.contains(&(b.state_ptr() as usize)))
                .collect();
            if !balancers.is_empty() {
                stopped.extend(balancers.iter().map(|b| b.state_ptr() as usize));
                drains.extend(
                    futures_util::future::join_all(balancers.iter().map(|b| b.stop())).await,
                );
                continue;
            }
            if !registry.starting() {
                return drains;
            }
            let until =
                *starts_until.get_or_insert_with(|| tokio::time::Instant::now() + STARTS_WAIT);
            if tokio::time::Instant::now() >= until {
                tracing::warn!(
                    node = %self.inner.shared.name,
                    wait_ms = STARTS_WAIT.as_millis() as u64,
                    "a balancer start is still under way; shutting down without it (it will fail)"
                );
                registry.seal();
                return drains;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The work of [`Node::shutdown`], once.
    async fn shut_down(&self) {
        let inner = &self.inner;
        let mut drains = self.stop_balancers().await;
        drains.sort_by(|a, b| a.balancer.cmp(&b.balancer));
        *inner.drains.lock().unwrap_or_else(|p| p.into_inner()) = drains;
        // Drained: tell the peers this node is leaving (bounded; a peer that does not answer
        // learns it when the session closes).
        let leaving = ControlRequest::Leaving(inner.shared.name.clone());
        let peers = self.nodes();
        futures_util::future::join_all(peers.iter().map(|peer| {
            crate::call::control(
                &inner.shared.transport,
                peer,
                &leaving,
                Duration::from_millis(500),
            )
        }))
        .await;
        inner
            .shared
            .transport
            .stopped
            .store(true, Ordering::Release);
        // Direct calls are not drained: those still running here are given up on now.
        inner.shared.transport.abandoned.fire();
        let dialers = std::mem::take(&mut *inner.dialers.lock().unwrap_or_else(|p| p.into_inner()));
        for dialer in dialers {
            dialer.abort();
        }
        inner.stop_sampling();
        let _ = inner.server.cast(NodeServerMessage::UnsubscribeToEvents(
            SUBSCRIPTION_ID.to_string(),
        ));
        let wait = Some(Duration::from_secs(5));
        let _ = inner
            .manager
            .stop_and_wait(Some("node shutdown".into()), wait)
            .await;
        let _ = inner
            .endpoint
            .stop_and_wait(Some("node shutdown".into()), wait)
            .await;
        if inner.owns_server {
            let _ = inner
                .server
                .stop_and_wait(Some("node shutdown".into()), wait)
                .await;
        }
        *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = None;
        RUNNING.store(false, Ordering::Release);
        inner.shared.lifecycle.send_replace(Lifecycle::Stopped);
        tracing::info!(node = %inner.shared.name, "node stopped");
    }
}
