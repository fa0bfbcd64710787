//! LoadWeighted: members in turn, each as often as its weight, where a member's weight is
//! learned from the load its replies report (gRPC's weighted round robin, gRFC A58).

mod schedule;
mod selector;
mod track;

use std::time::Duration;

use crate::routing::{Algorithm, BuildContext, Needs, Selector};
use crate::Error;

use selector::LoadWeightedSelector;

/// Picks members in turn, each as often as its **weight**, where a member's weight is what
/// it serves per unit of load it reports: weight = qps / (utilization + eps / qps ×
/// [`error_utilization_penalty`](Self::error_utilization_penalty)), from the
/// [`LoadReport`](crate::LoadReport) its replies carry (`qps`: calls its node finished in the
/// last second; `eps`: of which failed; utilization: the report's application
/// `utilization` when set and above 0, else its `cpu` ÷ 100). A member with twice the
/// capacity serves twice the calls at the same utilization, so it gets twice the calls.
/// Source: gRPC's client-side weighted round robin (gRFC A58,
/// <https://github.com/grpc/proposal/blob/master/A58-client-side-weighted-round-robin-lb-policy.md>),
/// fed by per-call load reports as ORCA's are (gRFC A51,
/// <https://github.com/grpc/proposal/blob/master/A51-custom-backend-metrics.md>).
///
/// **Unknown is not low.** A member's weight is *usable* only when
///
/// - a report with qps > 0 and utilization > 0 arrived (an *empty* report — an idle node, or
///   one without a CPU sample or application utilization — is ignored: the weight it had
///   stays, and so does its age);
/// - its first such report is at least [`blackout_period`](Self::blackout_period) old
///   (default 10 s): the first seconds of a node's reports describe a node just starting,
///   not its capacity;
/// - its latest such report is younger than
///   [`weight_expiration_period`](Self::weight_expiration_period) (default 3 min); an
///   expired weight is dropped and the blackout starts again with the next report.
///
/// **Over an [actor group](crate::group)**, whose replies carry no report, the group asks
/// each member's node for its load every `weight_update_period`: an actor's report is its
/// node's CPU and utilization with this caller's own calls to that node's actors per second,
/// shared among them (so a node loaded by others serves this caller fewer calls per unit of
/// load, and its actors weigh less; see `docs/how-to/actor-groups.md`).
///
/// A member without a usable weight — new, never called, on this node (its calls run here,
/// without a reply), in its blackout, expired — is **unknown** and weighs the mean of the
/// usable weights, so it gets an average share until its own reports say more; a member
/// whose reports say it is slow is **low**: its weight is small, down to the clamp below.
/// [`explain`](crate::routing::Selector::explain) tells them apart (each member's standing
/// in the rule, its weight in use as its score). With fewer than two usable weights there is
/// nothing to compare: every member weighs the same (plain round robin).
///
/// **Smoothed** (this library's addition): a new report's weight counts half, the member's
/// weight before it the other half. A report's qps covers its node's last whole second and its
/// CPU the sampler's last interval, at another phase, so when a member's share just changed,
/// one report's weight is off by about that change; taken whole, it makes the next change,
/// and shares swing every period instead of settling (the lab's `uneven-capacity` in a closed
/// loop: 15–30 % off in 4 of 10 seeds; with the halving, within 0.5 %). A weight reaches 97 %
/// of a new level within five periods.
///
/// **Weights are recomputed** at most once per
/// [`weight_update_period`](Self::weight_update_period) (default 1 s), by the pick that finds
/// the period over (one pick wins a compare-and-swap; the others go on with the weights
/// there are), and at each membership change; the latest report of each member is read
/// from its view ([`MemberView::report`](crate::routing::MemberView::report)), so a
/// blackout counts from the first non-empty report seen at a recomputation (at most one
/// period after the first that arrived). Weights in use are clamped to [0.01, 10] × the
/// mean, so one member can neither starve nor take all the calls on a bad report.
///
/// **Slow start**: with [`SlowStart`](crate::SlowStart), a member in its window weighs its
/// weight in use × its [factor](crate::routing::MemberView::slow_start_factor) in the
/// schedule (a new member: the mean × its factor). While a member is in its window, a pick
/// also rescales the weights by the factors at most every 100 ms (in place, without
/// reading the reports; the recomputation from the reports keeps its own period), so a
/// ramping member's weight follows its ramp. Slow start then skips no pick.
///
/// **Picks** follow a stride schedule (gRPC's static stride scheduler): weights scaled so
/// the largest is 65,535, one atomic sequence for the balancer; the sequence's value `s`
/// names member `s mod n` in round `s / n`, which takes it when its weight's stride reaches
/// a threshold in that round (offset per member, so the heavy members' picks interleave),
/// else the next value is tried. The heaviest member takes every round, so a pick tries at
/// most `n` values; each member gets its weight's share of every long enough run of picks.
/// A pick reads the balancer's coarse clock once and one scaled weight per value tried: no
/// lock, no allocation (the recomputation, once a period, writes atomics in place). It
/// counts no calls in flight and learns nothing from outcomes: the balancer keeps each
/// member's latest report in its view for every algorithm.
///
/// Options (validated when the balancer starts: [`Error::InvalidConfig`] naming the option):
///
/// | option | default | meaning |
/// |---|---|---|
/// | `blackout_period` | 10 s | a weight is used this long after the member's first non-empty report (0: at once) |
/// | `weight_expiration_period` | 3 min | a weight without a non-empty report for this long is dropped (> 0) |
/// | `weight_update_period` | 1 s | weights are recomputed at most this often (≥ 1 ms) |
/// | `error_utilization_penalty` | 1.0 | how much an error per call adds to the utilization (finite, ≥ 0) |
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::routing::OutcomeKind;
/// use rpc_load_balancer::testkit::SelectorKit;
/// use rpc_load_balancer::{LoadReport, LoadWeighted};
///
/// let mut kit = SelectorKit::seeded(&LoadWeighted::new(), 1)?;
/// kit.join(["a@h", "b@h"]);
/// // a serves 300 calls a second at 30 % CPU, b 100 at 30 %: a has 3 times b's capacity.
/// for (node, qps) in [("a@h", 300), ("b@h", 100)] {
///     let mut report = LoadReport::default();
///     report.qps = qps;
///     report.cpu = Some(30.0);
///     kit.set_report(node, &report, Duration::ZERO);
/// }
/// // Reports are used after the blackout (10 s), at the next recomputation.
/// kit.clock().advance(Duration::from_secs(11));
/// kit.join(["a@h"]); // a membership change recomputes too; so does a pick after 1 s
/// let counts = kit.counts(400, None)?;
/// assert_eq!((counts["a@h"], counts["b@h"]), (300, 100));
/// # Ok::<(), rpc_load_balancer::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LoadWeighted {
    options: Options,
    seed: Option<u64>,
}

/// [`LoadWeighted`]'s options, as its selectors use them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Options {
    blackout_ms: u64,
    expiration_ms: u64,
    update_ms: u64,
    penalty: f64,
}

impl Default for LoadWeighted {
    fn default() -> Self {
        Self {
            options: Options {
                blackout_ms: duration_ms(Self::DEFAULT_BLACKOUT_PERIOD),
                expiration_ms: duration_ms(Self::DEFAULT_WEIGHT_EXPIRATION_PERIOD),
                update_ms: duration_ms(Self::DEFAULT_WEIGHT_UPDATE_PERIOD),
                penalty: Self::DEFAULT_ERROR_UTILIZATION_PENALTY,
            },
            seed: None,
        }
    }
}

/// `duration` in whole ms, saturating.
fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl LoadWeighted {
    /// The default blackout: 10 s (gRFC A58's).
    pub const DEFAULT_BLACKOUT_PERIOD: Duration = Duration::from_secs(10);
    /// The default expiry of a weight: 3 min (gRFC A58's).
    pub const DEFAULT_WEIGHT_EXPIRATION_PERIOD: Duration = Duration::from_secs(180);
    /// The default period of recomputation: 1 s (gRFC A58's).
    pub const DEFAULT_WEIGHT_UPDATE_PERIOD: Duration = Duration::from_secs(1);
    /// The default error penalty: 1.0 (gRFC A58's).
    pub const DEFAULT_ERROR_UTILIZATION_PENALTY: f64 = 1.0;

    /// Load-weighted round robin with gRFC A58's defaults, starting at a random position.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same, its starting position drawn from `seed` (for tests; a balancer's
    /// [`BuildContext::seed`] overrides it).
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed: Some(seed),
            ..Self::default()
        }
    }

    /// How long after a member's first non-empty report its weight is used (default
    /// [`DEFAULT_BLACKOUT_PERIOD`](Self::DEFAULT_BLACKOUT_PERIOD), 10 s; zero uses it at
    /// once). Whole ms.
    pub fn blackout_period(mut self, period: Duration) -> Self {
        self.options.blackout_ms = duration_ms(period);
        self
    }

    /// How long a weight lasts without a new non-empty report (default
    /// [`DEFAULT_WEIGHT_EXPIRATION_PERIOD`](Self::DEFAULT_WEIGHT_EXPIRATION_PERIOD), 3 min;
    /// at least 1 ms: checked when a balancer starts, the error names
    /// `weight_expiration_period`). Whole ms.
    pub fn weight_expiration_period(mut self, period: Duration) -> Self {
        self.options.expiration_ms = duration_ms(period);
        self
    }

    /// How often, at most, weights are recomputed from the members' latest reports (default
    /// [`DEFAULT_WEIGHT_UPDATE_PERIOD`](Self::DEFAULT_WEIGHT_UPDATE_PERIOD), 1 s; at least
    /// 1 ms: checked when a balancer starts, the error names `weight_update_period`). Whole
    /// ms.
    pub fn weight_update_period(mut self, period: Duration) -> Self {
        self.options.update_ms = duration_ms(period);
        self
    }

    /// How much utilization one error per call adds: weight = qps / (utilization + eps /
    /// qps × `penalty`) (default 1.0; finite and ≥ 0: checked when a balancer starts, the
    /// error names `error_utilization_penalty`; 0 ignores errors).
    pub fn error_utilization_penalty(mut self, penalty: f64) -> Self {
        self.options.penalty = penalty;
        self
    }

    /// Checks the options.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `weight_expiration_period`,
    /// `weight_update_period` or `error_utilization_penalty`.
    fn validate(&self) -> Result<(), Error> {
        let o = &self.options;
        for (option, ms) in [
            ("weight_expiration_period", o.expiration_ms),
            ("weight_update_period", o.update_ms),
        ] {
            if ms == 0 {
                return Err(Error::InvalidConfig {
                    option,
                    reason: "must be at least 1 ms".into(),
                });
            }
        }
        if !(o.penalty.is_finite() && o.penalty >= 0.0) {
            return Err(Error::InvalidConfig {
                option: "error_utilization_penalty",
                reason: format!("must be finite and at least 0, not {}", o.penalty),
            });
        }
        Ok(())
    }
}

impl Algorithm for LoadWeighted {
    fn name(&self) -> &'static str {
        "load_weighted"
    }

    /// Errors: [`Error::InvalidConfig`] naming `weight_expiration_period`,
    /// `weight_update_period` or `error_utilization_penalty` when it is out of range.
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        self.validate()?;
        // A random `u32` start, as RoundRobin's, so a fleet of callers does not begin alike.
        let start = context.rng(self.seed).next_u64() as u32;
        Ok(Box::new(LoadWeightedSelector::new(
            self.options,
            context.clock.clone(),
            u64::from(start),
            context.balancer,
        )))
    }

    /// Reports every `weight_update_period`: an actor group, whose replies carry none, asks
    /// its members' nodes for their load that often (see [`Needs::reports`]).
    fn needs(&self) -> Needs {
        Needs::NONE.reports(Duration::from_millis(self.options.update_ms))
    }
}

#[cfg(test)]
mod tests;
