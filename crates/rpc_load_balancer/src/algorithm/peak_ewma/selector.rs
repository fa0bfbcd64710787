//! [`PeakEwma`](super::PeakEwma)'s selector: the members' estimates, the cost of a member with
//! no history, and the two-choice pick.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::estimate::Estimate;
use crate::algorithm::power_of_two::two;
use crate::routing::{
    Change, Clock, Derived, Explanation, MemberView, Outcome, OutcomeKind, Request, Rng, Selector,
};
use crate::{Error, ErrorCode};

/// The estimates of the members of one list, by index (what the selector derives from a
/// list and its picks read).
type Estimates = Vec<Arc<Estimate>>;

/// Every member's estimate by node.
type ByNode = HashMap<Arc<str>, Arc<Estimate>, foldhash::fast::RandomState>;

/// How often, at most, the cost of a member with no history is recomputed (ms), besides at
/// each membership change and each member's first sample.
const UNKNOWN_EVERY_MS: u64 = 100;

/// The latency (ns) a member with no history costs while no member has one: every member
/// then costs the same per call in flight.
const NO_ESTIMATE_NS: f64 = 1.0;

/// A pick whose better sample costs more than this many times the median estimate looks at
/// more members ([`EXTRA_LOOKS`]).
const LOOK_AGAIN: f64 = 2.0;

/// How many more members a poor pick samples (with replacement).
const EXTRA_LOOKS: usize = 2;

/// The most calls in flight a member's silence is multiplied by. A member with `n` calls out
/// and no reply for `s` costs a latency of at least `s × min(n, 3)`: with its calls as fast as
/// its estimate, one should have come back within about estimate ÷ `n` (calls sent together
/// count the same: 3 sent at once 15 ms ago to a member estimated at 20 ms cost 45 ms each
/// until one returns). Uncapped, a member merely busy with many calls weighed as silent: in
/// the lab's `two-slow` at 85 % errors rose from 41 % to 52 %; capped at 3 they do not, and
/// `paused-member` at 50 % sends the paused member at most 3 calls per caller in each of 40
/// seeds (without the factor: 4 in 3 of them; bench/README.md).
const SILENCE_IN_FLIGHT_CAP: usize = 3;

/// Where a pick reads the estimates (see [`EwmaSelector::source`]).
enum Source<'a> {
    List(&'a Estimates),
    ByNode(arc_swap::Guard<Arc<ByNode>>),
}

impl Source<'_> {
    /// `members[index]`'s estimate (`None`: a node the selector has not been told of).
    /// Inlined into the pick, where it runs three times: called, it cost 24 instructions a
    /// time (bench/README.md).
    #[inline(always)]
    fn get(&self, members: &[MemberView], index: usize) -> Option<&Estimate> {
        match self {
            Source::List(list) => list.get(index).map(|e| &**e),
            Source::ByNode(by_node) => by_node_get(by_node, members, index),
        }
    }
}

/// [`Source::get`] over a list that is no published one (a re-selection: rare).
#[cold]
#[inline(never)]
fn by_node_get<'a>(
    by_node: &'a ByNode,
    members: &[MemberView],
    index: usize,
) -> Option<&'a Estimate> {
    by_node.get(members.get(index)?.id()).map(|e| &**e)
}

/// One balancer's Peak-EWMA selector.
pub(super) struct EwmaSelector {
    rng: Rng,
    clock: Clock,
    decay_ns: f64,
    penalty: Option<Duration>,
    by_node: ArcSwap<ByNode>,
    /// The latency (ns, `f64` bits) a member with no history costs: the median of the
    /// others' estimates.
    unknown: AtomicU64,
    /// When `unknown` was last recomputed (ms on the clock).
    unknown_at_ms: AtomicU64,
}

impl EwmaSelector {
    pub(super) fn new(rng: Rng, clock: Clock, decay: Duration, penalty: Option<Duration>) -> Self {
        Self {
            rng,
            clock,
            decay_ns: decay.as_nanos() as f64,
            penalty,
            by_node: ArcSwap::from_pointee(ByNode::default()),
            unknown: AtomicU64::new(NO_ESTIMATE_NS.to_bits()),
            unknown_at_ms: AtomicU64::new(0),
        }
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        u64::try_from(self.clock.now().as_nanos()).unwrap_or(u64::MAX)
    }

    /// `member`'s cost at `now_ns`: its estimate (or the no-history cost) × (in flight + 1),
    /// ÷ its slow-start factor.
    #[inline]
    fn cost(&self, estimate: Option<&Estimate>, member: &MemberView, now_ns: u64) -> f64 {
        let in_flight = member.in_flight();
        let latency = estimate
            .and_then(|e| e.load(now_ns, self.decay_ns))
            .unwrap_or_else(|| f64::from_bits(self.unknown.load(Ordering::Relaxed)));
        // A member silent with calls in flight is at least that slow now (a pause, a dead
        // connection), its silence counted once per call out ([`SILENCE_IN_FLIGHT_CAP`]).
        let silent = estimate.map_or(0, |e| e.silent_ns(in_flight, now_ns)) as f64
            * in_flight.min(SILENCE_IN_FLIGHT_CAP) as f64;
        let cost = latency.max(silent) * (in_flight as f64 + 1.0);
        // A member in its slow-start window looks costlier (1 otherwise: no division).
        let factor = member.slow_start_factor();
        if factor < 1.0 {
            cost / factor
        } else {
            cost
        }
    }

    /// Whether a tie between members `a` and `b` goes to `a`: by `coin` when neither is in
    /// its slow-start window, else with probability proportional to `a`'s factor.
    #[inline]
    fn tie_to_a(&self, a: &MemberView, b: &MemberView, coin: bool) -> bool {
        let (factor_a, factor_b) = (a.slow_start_factor(), b.slow_start_factor());
        if factor_a == factor_b {
            coin
        } else {
            self.rng.chance(factor_a / (factor_a + factor_b))
        }
    }

    /// Where a pick finds the members' estimates: the list derived from a published member
    /// list (by index), or for a list that is no published one (a re-selection) the map by
    /// node.
    #[inline]
    fn source<'a>(&self, members: &[MemberView], request: &Request<'a>) -> Source<'a> {
        match request.derived_as::<Estimates>() {
            Some(list) if list.len() == members.len() => Source::List(list),
            _ => Source::ByNode(self.by_node.load()),
        }
    }

    /// A second look for a pick whose better sample is poor (it costs over [`LOOK_AGAIN`] ×
    /// the median estimate, e.g. both samples were slow members): [`EXTRA_LOOKS`] more
    /// members sampled, the cheapest of all kept.
    #[cold]
    #[inline(never)]
    fn look_again(
        &self,
        members: &[MemberView],
        source: &Source<'_>,
        (mut best, mut best_cost): (usize, f64),
        now: u64,
    ) -> usize {
        for _ in 0..EXTRA_LOOKS {
            let c = self.rng.below(members.len());
            let cost = self.cost(source.get(members, c), &members[c], now);
            if cost < best_cost {
                (best, best_cost) = (c, cost);
            }
        }
        best
    }

    /// Recomputes the no-history cost: the median of the estimates there are.
    fn refresh_unknown(&self, by_node: &ByNode, now_ns: u64) {
        let mut known: Vec<f64> = by_node
            .values()
            .filter_map(|e| e.load(now_ns, self.decay_ns))
            .collect();
        let median = if known.is_empty() {
            NO_ESTIMATE_NS
        } else {
            // The lower median: with as many slow members as fast ones, a fast one's.
            let middle = (known.len() - 1) / 2;
            let (_, median, _) = known.select_nth_unstable_by(middle, f64::total_cmp);
            median.max(NO_ESTIMATE_NS)
        };
        self.unknown.store(median.to_bits(), Ordering::Relaxed);
        self.unknown_at_ms
            .store(now_ns / 1_000_000, Ordering::Relaxed);
    }

    /// The sample an outcome teaches, in ns; `None` for one that teaches nothing.
    fn sample_ns(&self, outcome: &Outcome<'_>) -> Option<f64> {
        let latency = outcome.latency;
        let sample = match outcome.kind {
            OutcomeKind::Ok | OutcomeKind::Error(ErrorCode::BadRequest) => latency,
            OutcomeKind::Cancelled => return None,
            OutcomeKind::Timeout | OutcomeKind::Error(_) => {
                match self.penalty.or(outcome.timeout) {
                    Some(penalty) => latency.max(penalty),
                    None => latency,
                }
            }
        };
        Some(sample.as_nanos() as f64)
    }
}

impl Selector for EwmaSelector {
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        let now = self.now_ns();
        let source = self.source(members, request);
        let best = if members.len() < 2 {
            0
        } else {
            let (a, b, coin) = two(&self.rng, members.len());
            let cost_a = self.cost(source.get(members, a), &members[a], now);
            let cost_b = self.cost(source.get(members, b), &members[b], now);
            let better = if cost_a < cost_b
                || (cost_a == cost_b && self.tie_to_a(&members[a], &members[b], coin))
            {
                (a, cost_a)
            } else {
                (b, cost_b)
            };
            let median = f64::from_bits(self.unknown.load(Ordering::Relaxed));
            if better.1 > LOOK_AGAIN * median && members.len() > 2 {
                self.look_again(members, &source, better, now)
            } else {
                better.0
            }
        };
        // The start of its busy time, if it had no call in flight.
        if let Some(estimate) = source.get(members, best) {
            estimate.picked(members[best].in_flight(), now);
        }
        Ok(best)
    }

    fn members_changed(&self, change: &Change<'_>) {
        let before = self.by_node.load();
        let next: ByNode = change
            .members
            .iter()
            .map(|m| {
                let estimate = before.get(m.id()).cloned().unwrap_or_default();
                (Arc::clone(m.id_arc()), estimate)
            })
            .collect();
        self.refresh_unknown(&next, self.now_ns());
        self.by_node.store(Arc::new(next));
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let by_node = self.by_node.load();
        let list: Estimates = change
            .members
            .iter()
            .map(|m| by_node.get(m.id()).cloned().unwrap_or_default())
            .collect();
        Some(Arc::new(list))
    }

    /// Costs are divided by the slow-start factor ([`Self::cost`]).
    fn applies_slow_start(&self) -> bool {
        true
    }

    fn learns(&self) -> bool {
        true
    }

    /// A selection that ended without a result teaches nothing ([`Self::sample_ns`]): the
    /// balancer need not build its outcome (a `select_node` guard's release).
    fn observes_cancelled(&self) -> bool {
        false
    }

    fn observe(&self, outcome: &Outcome<'_>) {
        let Some(sample) = self.sample_ns(outcome) else {
            return;
        };
        let by_node = self.by_node.load();
        let Some(estimate) = by_node.get(outcome.member.id()) else {
            return;
        };
        let now = self.now_ns();
        if outcome.kind != OutcomeKind::Timeout {
            estimate.replied(now);
        }
        let first = estimate.observe(sample, now, self.decay_ns);
        let last = self.unknown_at_ms.load(Ordering::Relaxed);
        if first || now / 1_000_000 >= last.saturating_add(UNKNOWN_EVERY_MS) {
            self.refresh_unknown(&by_node, now);
        }
    }

    fn explain(
        &self,
        members: &[MemberView],
        chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        let by_node = self.by_node.load();
        let now = self.now_ns();
        let ramping = members.iter().any(|m| m.slow_start_factor() < 1.0);
        Explanation {
            rule: format!(
                "lower cost (latency estimate ns × (in flight + 1){}) of two sampled at random (picked {})",
                if ramping { " ÷ slow-start factor" } else { "" },
                members.get(chosen).map_or("?", MemberView::id)
            ),
            scores: members
                .iter()
                .map(|m| {
                    let estimate = by_node.get(m.id()).map(|e| &**e);
                    (m.id().to_string(), self.cost(estimate, m, now))
                })
                .collect(),
        }
    }
}
