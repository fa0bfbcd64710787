//! Draining a balancer on this node ([`Balancer::stop`]) and what it reports.

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{member_name, Balancer, DRAIN_POLL, MIN_REFUSING, PEERS_SAW_LEAVE};

/// How a balancer's stop ended: see [`DrainReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum DrainOutcome {
    /// Every call it routed and served had finished before `drain_timeout`.
    Drained,
    /// `drain_timeout` ran out with calls still running ([`DrainReport::routed_in_flight`],
    /// [`DrainReport::served_in_flight`]); it stopped anyway. Their callers may get
    /// [`Error::ServiceUnavailable`](crate::Error::ServiceUnavailable) (`ConnectionLost`).
    TimedOut,
    /// Its actors had ended without a drain — killed (`actor().kill()`, or with a parent that
    /// stopped without calling [`Balancer::stop`]), or stopped by its supervisor after too many
    /// restarts of its member actor: nothing was waited for.
    Killed,
}

/// What [`Balancer::stop`] did on this node: how the drain ended, how many calls were still
/// running when it gave up, and how long the stop took. A later stop of the same balancer
/// returns the same report. Also the answer to the admin request
/// [`ControlRequest::StopBalancerReport`](crate::ControlRequest::StopBalancerReport)
/// (`rpclb control stop_balancer`): its fields are on the wire, in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DrainReport {
    /// The balancer's name.
    pub balancer: String,
    /// Drained, timed out, or killed before any stop.
    pub outcome: DrainOutcome,
    /// Calls and casts this node had routed through the balancer (and live
    /// [`SelectionGuard`](crate::SelectionGuard)s) still running when the stop gave up
    /// waiting, as [`Balancer::in_flight`] counts them. 0 when drained; for
    /// [`DrainOutcome::Killed`], those counted when the kill was noticed.
    pub routed_in_flight: u64,
    /// Calls this node was still serving as a member of the balancer then (routed to it by
    /// any node), as [`Balancer::served`] counts them. A call this node routed to itself
    /// counts in both fields.
    pub served_in_flight: u64,
    /// From the start of the stop to its end: the leave grace, the wait for the calls, and
    /// the wait for the peers to see this member leave (at least 250 ms for a member). Zero
    /// for [`DrainOutcome::Killed`].
    pub took: Duration,
}

impl DrainReport {
    /// Whether every call finished before the drain timeout.
    pub fn drained(&self) -> bool {
        self.outcome == DrainOutcome::Drained
    }

    /// The report of a balancer whose actors ended without a drain, with the calls counted
    /// then.
    pub(crate) fn killed(balancer: &str, routed: usize, served: usize) -> Self {
        DrainReport {
            balancer: balancer.to_string(),
            outcome: DrainOutcome::Killed,
            routed_in_flight: routed as u64,
            served_in_flight: served as u64,
            took: Duration::ZERO,
        }
    }
}

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
