//! Draining a balancer on this node ([`Balancer::stop`]). What it reports, [`DrainReport`],
//! is defined with the control protocol that carries it (`control::DrainReport`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{member_name, Balancer, DRAIN_POLL, MIN_REFUSING, PEERS_SAW_LEAVE};

pub use crate::control::{DrainOutcome, DrainReport};

impl Balancer {
    /// The work of [`Balancer::stop`], once: leave, drain, stop the actors, report.
    pub(super) async fn drain_and_stop(&self) {
        let shared = &self.shared;
        let config = &shared.config;
        let started = tokio::time::Instant::now();
        let deadline = crate::deadline::after(config.drain_timeout);
        if shared.member {
            if let Some(cell) =
                ractor::registry::where_is(member_name(&shared.name, &shared.node.name))
            {
                ractor::pg::leave_scoped(
                    crate::wire::SCOPE.to_string(),
                    shared.name.clone(),
                    vec![cell],
                );
            }
            tokio::time::sleep_until(deadline.min(crate::deadline::after(config.leave_grace)))
                .await;
        }
        shared.accepting.store(false, Ordering::Release);
        let (routed, served) = loop {
            let (routed, served) = (shared.in_flight.get(), shared.served.get());
            if routed + served == 0 || tokio::time::Instant::now() >= deadline {
                break (routed, served);
            }
            tokio::time::sleep(DRAIN_POLL).await;
        };
        let drained = routed + served == 0;
        if !drained {
            // Given up: calls of this balancer still running here see their cancellation.
            shared.abandoned.fire();
        }
        if shared.member {
            // Refuse (not drop) calls until every peer has seen the leave, so nothing is
            // selected for this member any more, and at least MIN_REFUSING after it: a call
            // reaching a stopped actor fails (it may have run, for all its caller knows); a
            // refused one goes to another member.
            shared.wait_until_peers_saw_leave(PEERS_SAW_LEAVE).await;
            tokio::time::sleep_until(started + MIN_REFUSING).await;
        }
        if !drained {
            tracing::warn!(
                balancer = %shared.name,
                routed = shared.in_flight.get(),
                served = shared.served.get(),
                drain_timeout_ms = config.drain_timeout.as_millis() as u64,
                "drain timed out; stopping with calls in flight"
            );
        }
        let _ = self
            .supervisor
            .stop_and_wait(
                Some("balancer stopped".into()),
                Some(Duration::from_secs(5)),
            )
            .await;
        shared.clear();
        shared.node.balancers.release(&shared.name, shared);
        let report = DrainReport {
            balancer: shared.name.clone(),
            outcome: if drained {
                DrainOutcome::Drained
            } else {
                DrainOutcome::TimedOut
            },
            routed_in_flight: routed as u64,
            served_in_flight: served as u64,
            took: started.elapsed(),
        };
        tracing::info!(
            balancer = %shared.name,
            drained,
            routed,
            served,
            took_ms = report.took.as_millis() as u64,
            "balancer stopped"
        );
        shared.stopped.send_replace(Some(report));
    }
}
