//! LeastConnections: the member with the fewest calls in flight from this node.

use crate::routing::{
    Algorithm, BuildContext, Explanation, MemberView, Needs, Request, Rng, Selector,
};
use crate::Error;

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
    for step in 1..n {
        if best_load == 0 {
            break;
        }
        let i = (start + step) % n;
        let load = members[i].in_flight();
        if load < best_load {
            best = i;
            best_load = load;
        }
    }
    best
}

impl Algorithm for LeastConnections {
    fn name(&self) -> &'static str {
        "least_connections"
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(LeastConnectionsSelector {
            rng: context.rng(self.seed),
        }))
    }

    fn needs(&self) -> Needs {
        Needs::NONE.in_flight()
    }
}

/// One balancer's [`LeastConnections`].
#[derive(Debug)]
struct LeastConnectionsSelector {
    rng: Rng,
}

impl Selector for LeastConnectionsSelector {
    #[inline]
    fn pick(&self, members: &[MemberView], _request: &Request<'_>) -> Result<usize, Error> {
        Ok(least_loaded(members, &self.rng))
    }

    fn explain(
        &self,
        members: &[MemberView],
        _chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
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
