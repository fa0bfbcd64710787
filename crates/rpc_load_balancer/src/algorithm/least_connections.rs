//! LeastConnections: the member with the fewest calls in flight from this node.

use super::by_in_flight::InFlightRule;
use crate::routing::{Explanation, MemberView, Rng};

/// Picks the member with the fewest calls this node's balancer has in flight to it
/// ([`MemberView::in_flight`]), ties broken at random (the first least-loaded member after a
/// random position): a fixed tie order would send every caller to the same idle member.
///
/// Source: the classic least-connections scheduler — LVS's `lc`, nginx's `least_conn` — and
/// the original's LeastConnections, which broke ties to the first member in the list.
///
/// Counts are taken when a member is selected and released exactly once when the selection
/// guard drops, however the call ends (success, error, timeout, panic, a dropped future); they
/// never go below 0. A member that leaves and rejoins (a new member actor) starts at 0, even if
/// calls of its earlier membership release late; a departed member's counter is freed with the
/// last selection holding it. Counts are local to the calling node (no coordination between
/// callers), as in the original; read them with [`Member::in_flight`](crate::Member::in_flight)
/// or the node's admin control.
#[derive(Debug, Default, Clone, Copy)]
pub struct LeastConnections {
    seed: Option<u64>,
}

impl LeastConnections {
    /// Least connections with random tie-breaks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reproducible tie-breaks from `seed` (for tests).
    pub fn seeded(seed: u64) -> Self {
        Self { seed: Some(seed) }
    }
}

/// The index of a least-loaded member: scanning from a random position, the first member with
/// the smallest count. One random draw per selection; when every member ties (an idle cluster)
/// each is equally likely, and in general no fixed member wins every tie.
pub(crate) fn least_loaded(members: &[MemberView], rng: &Rng) -> usize {
    let n = members.len();
    let start = rng.below(n);
    let mut best = start;
    let mut best_load = members[start].in_flight();
    let mut i = start;
    for _ in 1..n {
        if best_load == 0 {
            break;
        }
        // The next index round from `start`, without a division.
        i = if i + 1 == n { 0 } else { i + 1 };
        let load = members[i].in_flight();
        if load < best_load {
            best = i;
            best_load = load;
        }
    }
    best
}

super::by_in_flight::in_flight_algorithm!(LeastConnections, "least_connections", FewestInFlight);

/// [`LeastConnections`]' rule.
struct FewestInFlight;

impl InFlightRule for FewestInFlight {
    #[inline]
    fn pick(members: &[MemberView], rng: &Rng) -> usize {
        least_loaded(members, rng)
    }

    fn explain(members: &[MemberView], _chosen: usize) -> Explanation {
        Explanation {
            rule: "fewest calls in flight; ties at random".into(),
            scores: members
                .iter()
                .map(|m| (m.node().to_string(), m.in_flight() as f64))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
