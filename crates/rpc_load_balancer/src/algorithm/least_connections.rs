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
///
/// With [`SlowStart`](crate::SlowStart), a member in its window costs its calls in flight ÷
/// its [factor](crate::routing::MemberView::slow_start_factor) (it looks busier), and the scan
/// starts at a member drawn with probability proportional to its factor (a ramping member
/// drawn is kept with probability its factor, else another is drawn, at most 4 draws): idle
/// members, one at factor 0.25, so get picks 1 : 4. Slow start
/// then skips no pick.
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

/// The most draws of the scan's start while members are in their slow-start window (the
/// last one is kept whatever its factor).
const START_DRAWS: usize = 4;

/// The index of a least-loaded member: scanning from a random position, the first member with
/// the smallest count. One random draw per selection; when every member ties (an idle cluster)
/// each is equally likely, and in general no fixed member wins every tie. When a member looked
/// at is in its slow-start window, [`least_cost`] decides instead.
pub(crate) fn least_loaded(members: &[MemberView], rng: &Rng) -> usize {
    let n = members.len();
    let start = rng.below(n);
    let mut best = start;
    let mut best_load = members[start].in_flight();
    // Whether a member looked at is in its slow-start window (its factor is on the cache
    // line of its count).
    let mut ramping = members[start].slow_start_factor() < 1.0;
    let mut i = start;
    for _ in 1..n {
        if best_load == 0 || ramping {
            break;
        }
        // The next index round from `start`, without a division.
        i = if i + 1 == n { 0 } else { i + 1 };
        let member = &members[i];
        ramping = member.slow_start_factor() < 1.0;
        let load = member.in_flight();
        if load < best_load {
            best = i;
            best_load = load;
        }
    }
    if ramping {
        return least_cost(members, rng, start);
    }
    best
}

/// [`least_loaded`] with members in their slow-start window: from `start`, kept with
/// probability its factor (else another start is drawn, at most [`START_DRAWS`] draws in
/// all), the first member of the least calls in flight ÷ factor. Without a ramping member
/// this is [`least_loaded`]'s pick.
#[cold]
#[inline(never)]
fn least_cost(members: &[MemberView], rng: &Rng, mut start: usize) -> usize {
    let n = members.len();
    for _ in 1..START_DRAWS {
        if rng.chance(members[start].slow_start_factor()) {
            break;
        }
        start = rng.below(n);
    }
    let cost = |m: &MemberView| m.in_flight() as f64 / m.slow_start_factor();
    let mut best = start;
    let mut best_cost = cost(&members[start]);
    let mut i = start;
    for _ in 1..n {
        if best_cost == 0.0 {
            break;
        }
        i = if i + 1 == n { 0 } else { i + 1 };
        let c = cost(&members[i]);
        if c < best_cost {
            best = i;
            best_cost = c;
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
        let ramping = members.iter().any(|m| m.slow_start_factor() < 1.0);
        Explanation {
            rule: if ramping {
                "fewest calls in flight ÷ slow-start factor; ties at random, by factor".into()
            } else {
                "fewest calls in flight; ties at random".into()
            },
            scores: members
                .iter()
                .map(|m| {
                    let cost = m.in_flight() as f64 / m.slow_start_factor();
                    (m.id().to_string(), cost)
                })
                .collect(),
        }
    }

    fn applies_slow_start() -> bool {
        true
    }
}

#[cfg(test)]
mod tests;
