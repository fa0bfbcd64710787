//! What a balancer's stop reports: [`DrainReport`] and its [`DrainOutcome`]. Defined with the
//! control protocol that carries it ([`ControlReply::Stopped`](super::ControlReply::Stopped));
//! [`Balancer::stop`](crate::Balancer::stop) returns it, and `balancer::DrainReport` is the
//! same type (a re-export).

use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    /// stopped without calling [`Balancer::stop`](crate::Balancer::stop)), or stopped by its
    /// supervisor after too many restarts of its member actor: nothing was waited for.
    Killed,
}

/// What [`Balancer::stop`](crate::Balancer::stop) did on this node: how the drain ended, how
/// many calls were still running when it gave up, and how long the stop took. A later stop of
/// the same balancer returns the same report. Also the answer to the admin request
/// [`ControlRequest::StopBalancerReport`](super::ControlRequest::StopBalancerReport)
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
    /// waiting, as [`Balancer::in_flight`](crate::Balancer::in_flight) counts them. 0 when
    /// drained; for [`DrainOutcome::Killed`], those counted when the kill was noticed.
    pub routed_in_flight: u64,
    /// Calls this node was still serving as a member of the balancer then (routed to it by
    /// any node), as [`Balancer::served`](crate::Balancer::served) counts them. A call this
    /// node routed to itself counts in both fields.
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
