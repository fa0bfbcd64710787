//! [`SlowStart`]: a balancer option that ramps a member that just joined (or rejoined) up to
//! its full share of the calls over a window, instead of sending it a full share at once —
//! while its caches are cold, its JIT has not warmed, its connection pools are empty (Envoy's
//! [slow start mode](https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/slow_start)
//! for its round robin and least request balancers, which multiplies a member's weight by
//! the factor below). Its selector wraps the algorithm's ([`SlowStart::wrap`]).
//!
//! A member that joined `t` ago, with `t` below [`window`](SlowStart::window), has the
//! factor max([`min_percent`](SlowStart::min_percent) / 100, (t / window)^(1 /
//! [`aggression`](SlowStart::aggression))) — Envoy's formula — and 1 from the window's end
//! ([`SlowStart::factor`]). Slow start's selector keeps each member's factor in the member's
//! view, [`MemberView::slow_start_factor`](super::MemberView::slow_start_factor): written when
//! the member joins (before its list is published), refreshed before a pick at most every
//! window ÷ 100 (at most every 100 ms, at least every 1 ms) while a member is in its window,
//! and 1 again from the first pick after the last window's end. What the factor does depends
//! on the algorithm ([`Selector::applies_slow_start`] says whether it applies the factor
//! itself):
//!
//! | algorithm | what the factor does |
//! |---|---|
//! | [`RoundRobin`](crate::RoundRobin), [`Random`](crate::Random) | **skip**: a pick of a member in its window is kept with probability factor, else redrawn from the algorithm (at most twice; the last draw is kept), so a new member gets about factor × its fair share |
//! | [`PowerOfTwo`](crate::PowerOfTwo) | **cost ÷ factor**: a member costs its calls in flight ÷ factor; a tie between the two sampled goes to each with probability proportional to its factor |
//! | [`LeastConnections`](crate::LeastConnections) | **cost ÷ factor**: calls in flight ÷ factor; the scan starts at a member drawn with probability proportional to its factor (ties go to the first after it) |
//! | [`PeakEwma`](crate::PeakEwma) | **cost ÷ factor**: latency estimate × (in flight + 1) ÷ factor; ties by factor |
//! | [`WeightedRoundRobin`](crate::WeightedRoundRobin) | **weight × factor**: while a member of the list is in its window, picks follow a stride schedule over weight × factor, rescaled at most every 100 ms; the cycle again once every factor is 1 |
//! | [`LoadWeighted`](crate::LoadWeighted) | **weight × factor**: its weight in use × factor in the stride schedule, rescaled at most every 100 ms while a member ramps (besides the recomputation from the reports, once per `weight_update_period`) |
//! | [`LeastCpu`](crate::LeastCpu) | **cost ÷ factor**: its projected CPU value (at least 5 %) ÷ factor; its CPU following its calls, it settles where its reading ÷ factor meets the others' readings, about factor × their load |
//! | [`HashRing`](crate::HashRing), [`CallDirect`](crate::CallDirect) | not allowed: building either with slow start fails with [`Error::InvalidConfig`] naming `slow_start` (a key's owner must not depend on a coin; CallDirect never selects) |
//! | a custom algorithm | **skip**, unless its selector applies the factor itself and says so ([`Selector::applies_slow_start`]) |
//!
//! A selector that applies the factor is never skipped as well: the factor counts once.
//! Idle members (nothing in flight), one of them at factor 0.25, so get picks 1 : 4 with
//! [`LeastConnections`](crate::LeastConnections), in a tie of two with
//! [`PowerOfTwo`](crate::PowerOfTwo), and by weight with the weighted algorithms; a cost
//! algorithm with calls in flight balances the costs, so a ramping member holds about
//! factor × the calls in flight of another as fast. [`PeakEwma`](crate::PeakEwma) at idle
//! gives a ramping member no call against members as fast (its cost is theirs ÷ factor), and
//! calls against slower or busier ones.
//!
//! - **Who ramps.** The balancer's starting members do not: factor 1 — those of the
//!   selector's first non-empty member list and those that join within 2 s of it (a tenth of
//!   the window, if shorter), since a balancer discovers its members one by one as its
//!   node's sessions come up (the real-process twin showed fresh callers ramping every
//!   member but the first). A member that joins later does, and so does one that left and
//!   came back (its window starts again).
//! - Replica selection ([`Selector::pick_many`]) is not ramped.
//!
//! When no member is in its window, a pick costs one relaxed atomic load more than the
//! algorithm's own, and an algorithm that applies the factor reads each member's it looks at
//! (one more relaxed load on the cache line of the member's in-flight count, and a
//! comparison with 1).

mod selector;

use std::sync::Arc;
use std::time::Duration;

use super::{Algorithm, BuildContext, Needs, Selector};
use crate::Error;

pub(crate) use selector::Ramping;

/// Slow start's options: a member that joined (or rejoined) `t` ago, `t` < `window`, has the
/// factor max(`min_percent` / 100, (t / window)^(1 / `aggression`)) (Envoy's slow start mode,
/// [`factor`](Self::factor)); the balancer's starting members (its first non-empty member
/// list, and members that join within 2 s of it or a tenth of the window) do not ramp. [`PowerOfTwo`](crate::PowerOfTwo), [`LeastConnections`](crate::LeastConnections)
/// and [`PeakEwma`](crate::PeakEwma) divide the member's cost by its factor (ties go by
/// factor); [`WeightedRoundRobin`](crate::WeightedRoundRobin) and
/// [`LoadWeighted`](crate::LoadWeighted) multiply its weight by it (rescaled at most every
/// 100 ms); [`LeastCpu`](crate::LeastCpu) divides its projected CPU value (at least
/// 5 %) by it; for [`RoundRobin`](crate::RoundRobin),
/// [`Random`](crate::Random) and custom algorithms that do not
/// [apply it](crate::routing::Selector::applies_slow_start), a pick of the member is kept
/// with that probability, else the algorithm picks again (at most twice). Not for
/// [`HashRing`](crate::HashRing) nor [`CallDirect`](crate::CallDirect) (their start fails).
/// Replica selection is not ramped. The [module docs](crate::routing) name the seam; the
/// factor each member has now is its view's
/// [`slow_start_factor`](crate::routing::MemberView::slow_start_factor).
/// [`Default`]: Envoy's defaults — a 30 s window, aggression 1 (a linear ramp), at least 10 %.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{BalancerConfig, RoundRobin, SlowStart};
///
/// let config = BalancerConfig::new("jobs")
///     .algorithm(RoundRobin::new())
///     .slow_start(SlowStart::new().window(Duration::from_secs(60)));
/// # let _ = config;
/// let slow_start = SlowStart::new();
/// assert_eq!(slow_start.factor(Duration::ZERO), 0.1);
/// assert_eq!(slow_start.factor(Duration::from_secs(15)), 0.5);
/// assert_eq!(slow_start.factor(Duration::from_secs(30)), 1.0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SlowStart {
    pub(crate) window: Duration,
    pub(crate) aggression: f64,
    pub(crate) min_percent: f64,
}

impl Default for SlowStart {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(30),
            aggression: 1.0,
            min_percent: 10.0,
        }
    }
}

impl SlowStart {
    /// The defaults: a 30 s window, aggression 1, at least 10 %.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a member ramps after it joins (Envoy's `slow_start_window`; default 30 s;
    /// > 0).
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How the ramp bends (Envoy's `aggression`; default 1, a straight line; finite, > 0):
    /// above 1 the factor rises fast early and slowly late, below 1 slowly early.
    pub fn aggression(mut self, aggression: f64) -> Self {
        self.aggression = aggression;
        self
    }

    /// The least factor, in % (Envoy's `min_weight_percent`; default 10; above 0, at most
    /// 100).
    pub fn min_percent(mut self, percent: f64) -> Self {
        self.min_percent = percent;
        self
    }

    /// The factor of a member that joined `age` ago: max(min_percent / 100, (age /
    /// window)^(1 / aggression)) within the window, 1 from its end.
    pub fn factor(&self, age: Duration) -> f64 {
        if age >= self.window {
            return 1.0;
        }
        let time = age.as_secs_f64() / self.window.as_secs_f64();
        let ramp = time.powf(1.0 / self.aggression);
        ramp.max(self.min_percent / 100.0).min(1.0)
    }

    /// Checks the options, as a balancer does when it starts.
    ///
    /// Errors: [`Error::InvalidConfig`] naming the option (`window`, `aggression`,
    /// `min_percent`).
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |option, reason: &str| {
            Err(Error::InvalidConfig {
                option,
                reason: reason.to_string(),
            })
        };
        if self.window.is_zero() {
            return invalid("window", "must be above 0 ms");
        }
        if !self.aggression.is_finite() || self.aggression <= 0.0 {
            return invalid("aggression", "must be finite and above 0");
        }
        if !(self.min_percent > 0.0 && self.min_percent <= 100.0) {
            return invalid("min_percent", "must be above 0 and at most 100");
        }
        Ok(())
    }

    /// Checks the options, and that `algorithm` can ramp its members: not
    /// [`HashRing`](crate::HashRing) nor [`CallDirect`](crate::CallDirect) (under any
    /// other wrapper).
    ///
    /// Errors: as [`validate`](Self::validate); [`Error::InvalidConfig`] naming `slow_start`
    /// for those two.
    pub(crate) fn check(&self, algorithm: &dyn Algorithm) -> Result<(), Error> {
        self.validate()?;
        let base = algorithm.name().split('+').next().unwrap_or_default();
        if algorithm.is_local() || matches!(base, "hash_ring" | "hash_ring_bounded" | "call_direct")
        {
            return Err(Error::InvalidConfig {
                option: "slow_start",
                reason: format!(
                    "not for {}: a key's owner or the local node must not depend on when a member joined",
                    algorithm.name()
                ),
            });
        }
        Ok(())
    }

    /// `algorithm` with slow start on top: its selectors ramp new members up. Its
    /// [`name`](Algorithm::name) is the algorithm's with `+slow_start`, e.g.
    /// `round_robin+slow_start`. (A balancer's
    /// [`slow_start`](crate::BalancerConfig::slow_start) does this itself.) Building it over
    /// [`HashRing`](crate::HashRing) or [`CallDirect`](crate::CallDirect) fails.
    pub fn wrap(self, algorithm: Arc<dyn Algorithm>) -> Arc<dyn Algorithm> {
        let name = super::names::intern(&format!("{}+slow_start", algorithm.name()));
        Arc::new(WithSlowStart {
            inner: algorithm,
            options: self,
            name,
        })
    }
}

/// An algorithm whose selectors ramp new members up.
struct WithSlowStart {
    inner: Arc<dyn Algorithm>,
    options: SlowStart,
    name: &'static str,
}

impl Algorithm for WithSlowStart {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        self.options.check(&*self.inner)?;
        let inner = self.inner.build(context)?;
        Ok(Box::new(Ramping::new(inner, self.options.clone(), context)))
    }

    fn needs(&self) -> Needs {
        self.inner.needs()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}
