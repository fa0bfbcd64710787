//! PeakEwma: power of two choices over a latency estimate that jumps to slow replies at once
//! and forgets them slowly, times the calls in flight.

mod estimate;
mod selector;

use std::time::Duration;

use crate::routing::{Algorithm, BuildContext, Needs, Selector};
use crate::Error;

use selector::EwmaSelector;

/// Samples two **distinct** members at random and picks the one with the lower cost, where
/// cost = latency estimate × (this balancer's calls in flight to it + 1). Sources: Finagle's
/// `p2cPeakEwma` balancer, linkerd2-proxy's and tower's `load::PeakEwma` (Peak-EWMA on top of
/// Mitzenmacher's power of two choices, as [`PowerOfTwo`](crate::PowerOfTwo)).
///
/// The **estimate** is per member and learned from every routed call's
/// [outcome](crate::routing::Outcome) (latency from the pick to the reply, ns resolution):
///
/// - a reply slower than the estimate replaces it at once (the *peak*), so a member that
///   turns slow stops drawing calls after one slow reply;
/// - a faster one moves it by an exponentially weighted average over time: after `t` since the
///   last update the old estimate keeps weight `exp(−t / decay)` (default
///   [`DEFAULT_DECAY`](Self::DEFAULT_DECAY), 10 s), so one fast reply does not make a slow member
///   look fast;
/// - when it is read for a pick it is decayed the same way toward 0 for the time since its
///   last update (as Finagle and tower do): a member nobody calls any more because it was
///   slow is tried again after a while (about `decay × ln(its estimate ÷ the others')`);
/// - a member **silent** with calls of this balancer in flight — no reply since it became
///   busy, or since its last reply, whichever is later — costs at least that silence × its
///   calls in flight (3 at most) as its latency: with `n` calls out, one should have come
///   back within about its estimate ÷ `n`. A paused member, or one behind a dead
///   connection, stops drawing calls within a few of its own latencies instead of at the
///   first timeout;
/// - a **failure** (a timeout, or an error other than `BadRequest`: the member or its
///   connection failed) counts as a sample of max(its latency, the penalty); the penalty
///   defaults to the attempt's timeout ([`failure_penalty`](Self::failure_penalty) sets
///   one), so a member that fails fast does not attract calls; a `BadRequest` is the call's
///   own fault and counts as a reply; a cancelled selection (no reply) teaches nothing;
/// - a member with **no history** (new, or back after it left) costs the (lower) median of
///   the other members' estimates (recomputed at each membership change, at each member's first sample, and
///   at most every 100 ms besides):
///   calls here take ~100 µs, and a fixed default such as linkerd's 30 ms would starve a new
///   member until it decays. With no estimate at all, every member costs 1 ns × (in flight +
///   1): fewer in flight wins, as with [`PowerOfTwo`](crate::PowerOfTwo) (plus the second
///   look below).
///
/// **A second look** (this library's addition): when the better of the two sampled members
/// costs over twice the median estimate — both samples were slow members, or busy ones (a
/// member at the median latency with 2 or more calls in flight) — two more members are
/// sampled (with replacement) and the cheapest of all is picked. Plain two choices must pick one of
/// two slow members whenever it samples both (with 2 slow of 4 members, 1 pick in 6, enough to
/// overload them at half load: the lab's `two-slow` scenario); the second look leaves a slow
/// member about a quarter of that.
///
/// **Slow start**: with [`SlowStart`](crate::SlowStart), a member in its window costs its
/// cost ÷ its [factor](crate::routing::MemberView::slow_start_factor) — at factor 0.25, four
/// times its cost — and a tie goes to each of the two with probability proportional to its
/// factor. So a new member, whose cost is the median estimate's, does not draw more than its
/// share before it has shown how fast it is; with calls in flight, one at factor 0.25 and
/// the same latency settles at about a quarter of the calls in flight of the others. Slow
/// start then skips no pick.
///
/// Ties between the two sampled members go to a random one of them. A pick reads the
/// balancer's coarse clock once, two estimates and two in-flight counts (four of each with
/// the second look): no lock, no allocation. Each outcome costs a coarse clock read, one hash
/// lookup by node, a compare-and-swap and an atomic max; a member's first sample, and at most
/// one outcome per 100 ms besides, also recomputes the median (collecting the estimates into
/// a `Vec`). The balancer reads its precise clock at the pick and at the outcome (the
/// latency).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::routing::OutcomeKind;
/// use rpc_load_balancer::testkit::SelectorKit;
/// use rpc_load_balancer::PeakEwma;
///
/// let mut kit = SelectorKit::seeded(&PeakEwma::new(), 1)?;
/// kit.join(["a@h", "b@h"]);
/// // a answers in 5 ms, b in 100 µs.
/// for (node, latency) in [("a@h", 5_000), ("b@h", 100)] {
///     let pick = kit.pick_excluding(&[if node == "a@h" { "b@h" } else { "a@h" }], None)?;
///     kit.complete(pick, Duration::from_micros(latency), OutcomeKind::Ok);
/// }
/// assert_eq!(kit.counts(100, None)?.get("b@h"), Some(&100));
/// # Ok::<(), rpc_load_balancer::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PeakEwma {
    decay: Duration,
    failure_penalty: Option<Duration>,
    seed: Option<u64>,
}

impl Default for PeakEwma {
    fn default() -> Self {
        Self {
            decay: Self::DEFAULT_DECAY,
            failure_penalty: None,
            seed: None,
        }
    }
}

impl PeakEwma {
    /// The default decay: 10 s (Finagle's and linkerd's default).
    pub const DEFAULT_DECAY: Duration = Duration::from_secs(10);

    /// Peak-EWMA with the default decay, failures weighed as the attempt's timeout, and a
    /// thread-local generator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reproducible samples from `seed` (for tests).
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed: Some(seed),
            ..Self::default()
        }
    }

    /// The time constant of the estimate's decay (> 0; checked when a balancer starts: the
    /// error names `decay`): after `decay` without a new sample an estimate keeps 1/e of its
    /// weight.
    pub fn decay(mut self, decay: Duration) -> Self {
        self.decay = decay;
        self
    }

    /// The least latency a failed call counts as (> 0; checked when a balancer starts: the
    /// error names `failure_penalty`). Default: the attempt's timeout.
    pub fn failure_penalty(mut self, penalty: Duration) -> Self {
        self.failure_penalty = Some(penalty);
        self
    }
}

impl Algorithm for PeakEwma {
    fn name(&self) -> &'static str {
        "peak_ewma"
    }

    /// Errors: [`Error::InvalidConfig`] naming `decay` or `failure_penalty` when it is zero.
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        if self.decay.is_zero() {
            return Err(Error::InvalidConfig {
                option: "decay",
                reason: "must be above 0 ms".into(),
            });
        }
        if self.failure_penalty.is_some_and(|p| p.is_zero()) {
            return Err(Error::InvalidConfig {
                option: "failure_penalty",
                reason: "must be above 0 ms".into(),
            });
        }
        Ok(Box::new(EwmaSelector::new(
            context.rng(self.seed),
            context.clock.clone(),
            self.decay,
            self.failure_penalty,
        )))
    }

    fn needs(&self) -> Needs {
        Needs::NONE.in_flight()
    }
}

#[cfg(test)]
mod tests;
