//! [`SlowStart`]: a balancer option that ramps a member that just joined (or rejoined) up to
//! its full share of the calls over a window, instead of sending it a full share at once —
//! while its caches are cold, its JIT has not warmed, its connection pools are empty (Envoy's
//! [slow start mode](https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/slow_start)
//! for its round robin and least request balancers). Its selector wraps the algorithm's
//! ([`SlowStart::wrap`]).
//!
//! A member that joined `t` ago, with `t` below [`window`](SlowStart::window), has the
//! factor max([`min_percent`](SlowStart::min_percent) / 100, (t / window)^(1 /
//! [`aggression`](SlowStart::aggression))) — Envoy's formula — and 1 from the window's end
//! ([`SlowStart::factor`]). The algorithm picks as usual; a pick of a member in its window is
//! kept with probability factor, else redrawn from the algorithm (at most twice; the last
//! draw is kept). With [`RoundRobin`](crate::RoundRobin) or [`Random`](crate::Random) a
//! new member so gets about factor × its fair share.
//!
//! - **Who ramps.** The members of the selector's first non-empty member list (the balancer
//!   starting: everyone "joins" at once) do not: factor 1. A member that joins later does,
//!   and so does one that left and came back (its window starts again).
//! - **Cost and weight algorithms** ([`PowerOfTwo`](crate::PowerOfTwo),
//!   [`LeastConnections`](crate::LeastConnections), [`PeakEwma`](crate::PeakEwma),
//!   [`WeightedRoundRobin`](crate::WeightedRoundRobin), [`LeastCpu`](crate::LeastCpu)) get
//!   the same skip for now; their costs are not divided nor their weights multiplied by the
//!   factor.
//! - **Not for** [`HashRing`](crate::HashRing) (a key's owner must not depend on a coin) nor
//!   [`CallDirect`](crate::CallDirect) (it never selects): building either with slow start
//!   fails with [`Error::InvalidConfig`] naming `slow_start`.
//! - Replica selection ([`Selector::pick_many`]) is not ramped.
//!
//! When no member is in its window, a pick costs one relaxed atomic load more than the
//! algorithm's own.

mod selector;

use std::sync::Arc;
use std::time::Duration;

use super::{Algorithm, BuildContext, Needs, Selector};
use crate::Error;

pub(crate) use selector::Ramping;

/// Slow start's options: a member that joined (or rejoined) `t` ago, `t` < `window`, has the
/// factor max(`min_percent` / 100, (t / window)^(1 / `aggression`)) (Envoy's slow start mode,
/// [`factor`](Self::factor)), and a pick of it is kept with that probability, else the
/// algorithm picks again (at most twice). The members of the selector's first non-empty
/// member list do not ramp. Cost and weight algorithms get the same skip for now (their
/// costs and weights are not scaled); not for [`HashRing`](crate::HashRing) nor
/// [`CallDirect`](crate::CallDirect) (their start fails). Replica selection is not ramped.
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
