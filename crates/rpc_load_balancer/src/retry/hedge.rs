//! Hedged calls (issue 22): a call of an idempotent function still unanswered after a delay is
//! sent a second time, to another member; the first reply wins and the other copy is
//! cancelled. A budget caps the extra copies.
//!
//! Sources: "The Tail at Scale" (Dean and Barroso, CACM 2013: a backup request after the
//! 95th-percentile latency cut a p99.9 from 1,800 ms to 74 ms for 2 % more requests), and
//! Finagle's backup requests (`BackupRequestFilter`: the backup goes out at a latency
//! percentile and a retry budget bounds the backups). Written from their descriptions.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::budget::{Budget, MAX_RETRY_WINDOW, MIN_RETRY_WINDOW};
use super::latency::LatencyEstimate;
use crate::{Error, RetryBudget};

/// When a hedged call sends its second copy ([`HedgePolicy::delay`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeDelay {
    /// A set time after the first copy was sent (greater than zero).
    Fixed(Duration),
    /// The `percentile` (percent, above 0 and below 100, e.g. `95.0`) of the latencies of the
    /// same function's calls through this balancer that may be hedged (a decaying histogram,
    /// recent calls weighing most), but never sooner than `min`. Until 100 of those calls
    /// have replied, no second copy is sent (a percentile of fewer says little about a
    /// tail).
    Percentile {
        /// The percentile, percent.
        percentile: f64,
        /// The shortest delay, whatever the percentile (may be zero).
        min: Duration,
    },
}

/// Hedged calls for a balancer ([`BalancerConfig::hedge`](crate::BalancerConfig::hedge); off
/// by default): a call of an **idempotent** function
/// ([`RemoteFunction::IDEMPOTENT`](crate::RemoteFunction::IDEMPOTENT), or
/// [`BalancedCall::idempotent`](crate::BalancedCall::idempotent)) that has no reply after
/// [`delay`](Self::delay) is sent once more, to a member it has not tried; the first reply
/// wins and the other copy is cancelled (on its member too: its handler is stopped). Calls of
/// functions that are not idempotent are never sent twice.
///
/// The extra copies are capped by a budget, as [`RetryBudget`] caps retries (a separate
/// account): over any `window`, at most `ratio` × the hedgeable calls made plus
/// `min_per_second` × the window in seconds. **No default:** the share and the floor are
/// yours to choose (Finagle's backups default to 1 % of calls; "The Tail at Scale" measured
/// 2 %). A call is hedged at most once, and both copies end at the call's deadline.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{BalancerConfig, HedgePolicy};
///
/// // A second copy after the function's recent p95, for at most 5 % more calls plus 1/s.
/// let p95 = HedgePolicy::at_percentile(95.0, 0.05, 1).min_delay(Duration::from_millis(2));
/// // Or after a set 50 ms.
/// let fixed = HedgePolicy::after(Duration::from_millis(50), 0.05, 1);
/// let config = BalancerConfig::new("reports").hedge(p95);
/// # let _ = (config, fixed);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HedgePolicy {
    /// When the second copy goes out. Checked at start ([`Error::InvalidConfig`] naming
    /// `hedge.delay` or `hedge.percentile`).
    pub delay: HedgeDelay,
    /// Extra copies allowed per hedgeable call, `0.0..=1.0` (a call is hedged at most once).
    /// Checked at start ([`Error::InvalidConfig`] naming `hedge.ratio`).
    pub ratio: f64,
    /// Extra copies allowed per second whatever the calls (the budget's reserve).
    pub min_per_second: u32,
    /// The window the budget counts over, whole seconds from 1 s to 60 s (default 10 s, as
    /// [`RetryBudget`]'s). Checked at start ([`Error::InvalidConfig`] naming `hedge.window`).
    pub window: Duration,
}

impl HedgePolicy {
    /// A second copy `delay` after the first, for at most `ratio` more calls plus
    /// `min_per_second`, over 10 s.
    pub fn after(delay: Duration, ratio: f64, min_per_second: u32) -> Self {
        Self {
            delay: HedgeDelay::Fixed(delay),
            ratio,
            min_per_second,
            window: Duration::from_secs(10),
        }
    }

    /// A second copy after the `percentile` (percent) of the function's recent latency on the
    /// balancer (no earlier than [`min_delay`](Self::min_delay), default 0), for at most
    /// `ratio` more calls plus `min_per_second`, over 10 s. Finagle's rule of thumb: the
    /// `(1 − ratio)` percentile sends about `ratio` extra copies.
    pub fn at_percentile(percentile: f64, ratio: f64, min_per_second: u32) -> Self {
        Self {
            delay: HedgeDelay::Percentile {
                percentile,
                min: Duration::ZERO,
            },
            ..Self::after(Duration::ZERO, ratio, min_per_second)
        }
    }

    /// The shortest delay of a [`HedgeDelay::Percentile`] (a [`HedgeDelay::Fixed`] is
    /// unchanged).
    pub fn min_delay(mut self, min: Duration) -> Self {
        if let HedgeDelay::Percentile { min: shortest, .. } = &mut self.delay {
            *shortest = min;
        }
        self
    }

    /// The budget's window (whole seconds, 1 s to 60 s).
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Checks the values.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `hedge.delay` (a zero fixed delay),
    /// `hedge.percentile` (not above 0 and below 100: the 0th percentile, the
    /// fastest reply, would send nearly every call twice), `hedge.ratio` (not within `0.0..=1.0`) or
    /// `hedge.window` (not whole seconds within 1 s to 60 s).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let invalid = |option, reason| Err(Error::InvalidConfig { option, reason });
        match self.delay {
            HedgeDelay::Fixed(delay) if delay.is_zero() => {
                return invalid(
                    "hedge.delay",
                    "must be greater than 0 (0 would send every call twice)".into(),
                )
            }
            HedgeDelay::Percentile { percentile, .. }
                if !(percentile > 0.0 && percentile < 100.0) =>
            {
                return invalid(
                    "hedge.percentile",
                    format!(
                        "{percentile} is not above 0 and below 100 (percent; {})",
                        if percentile >= 100.0 {
                            "100 would wait for the slowest reply seen and hedge almost nothing"
                        } else if percentile <= 0.0 {
                            "0 would send nearly every call twice"
                        } else {
                            "not a number"
                        }
                    ),
                )
            }
            _ => {}
        }
        if !(0.0..=1.0).contains(&self.ratio) {
            return invalid(
                "hedge.ratio",
                format!("{} is not within 0.0..=1.0", self.ratio),
            );
        }
        if !(MIN_RETRY_WINDOW..=MAX_RETRY_WINDOW).contains(&self.window)
            || self.window.subsec_nanos() != 0
        {
            return invalid(
                "hedge.window",
                format!("{:?} is not whole seconds within 1 s to 60 s", self.window),
            );
        }
        Ok(())
    }
}

/// A balancer's hedging state: its policy, its budget's account and the latency estimate of
/// each function hedged through it (made on a function's first hedgeable call; as many as
/// the functions registered with types, a bounded set).
#[derive(Debug)]
pub(crate) struct Hedging {
    pub(crate) policy: HedgePolicy,
    pub(crate) budget: Budget,
    estimates: RwLock<HashMap<&'static str, Arc<LatencyEstimate>>>,
}

impl Hedging {
    /// The state of `policy` (checked: [`HedgePolicy::validate`]).
    pub(crate) fn new(policy: HedgePolicy) -> Self {
        let budget = RetryBudget {
            ratio: policy.ratio,
            min_per_second: policy.min_per_second,
            window: policy.window,
            max_per_call: 1,
        };
        Self {
            policy,
            budget: Budget::new(&budget),
            estimates: RwLock::default(),
        }
    }

    /// The latency estimate of `function`'s calls (`None` for a fixed delay: nothing to
    /// estimate).
    pub(crate) fn estimate(&self, function: &'static str) -> Option<Arc<LatencyEstimate>> {
        let HedgeDelay::Percentile { .. } = self.policy.delay else {
            return None;
        };
        let read = self
            .estimates
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(estimate) = read.get(function) {
            return Some(Arc::clone(estimate));
        }
        drop(read);
        let mut write = self
            .estimates
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(Arc::clone(write.entry(function).or_default()))
    }

    /// How long after the first copy the second goes out, given `estimate` (the function's
    /// from [`Self::estimate`]); `None`: not hedged (too few samples yet).
    pub(crate) fn delay(&self, estimate: Option<&LatencyEstimate>) -> Option<Duration> {
        match (self.policy.delay, estimate) {
            (HedgeDelay::Fixed(delay), _) => Some(delay),
            (HedgeDelay::Percentile { percentile, min }, Some(estimate)) => {
                estimate.percentile(percentile).map(|at| at.max(min))
            }
            (HedgeDelay::Percentile { .. }, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_option() {
        let ms = Duration::from_millis;
        assert!(HedgePolicy::after(ms(10), 0.05, 1).validate().is_ok());
        assert!(HedgePolicy::at_percentile(95.0, 0.0, 0).validate().is_ok());
        assert!(HedgePolicy::at_percentile(0.1, 1.0, 0).validate().is_ok());
        for (policy, option) in [
            (HedgePolicy::after(Duration::ZERO, 0.05, 1), "hedge.delay"),
            (
                HedgePolicy::at_percentile(100.0, 0.05, 1),
                "hedge.percentile",
            ),
            (
                HedgePolicy::at_percentile(-1.0, 0.05, 1),
                "hedge.percentile",
            ),
            (HedgePolicy::at_percentile(0.0, 0.05, 1), "hedge.percentile"),
            (
                HedgePolicy::at_percentile(f64::NAN, 0.05, 1),
                "hedge.percentile",
            ),
            (HedgePolicy::after(ms(10), 1.5, 1), "hedge.ratio"),
            (HedgePolicy::after(ms(10), -0.1, 1), "hedge.ratio"),
            (HedgePolicy::after(ms(10), f64::NAN, 1), "hedge.ratio"),
            (
                HedgePolicy::after(ms(10), 0.05, 1).window(ms(1_500)),
                "hedge.window",
            ),
            (
                HedgePolicy::after(ms(10), 0.05, 1).window(ms(999)),
                "hedge.window",
            ),
            (
                HedgePolicy::after(ms(10), 0.05, 1).window(Duration::from_secs(61)),
                "hedge.window",
            ),
        ] {
            match policy.validate() {
                Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option),
                other => panic!("{policy:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_percentile_out_of_range_is_explained_by_its_own_end() {
        let reason = |p: f64| match HedgePolicy::at_percentile(p, 0.05, 1).validate() {
            Err(Error::InvalidConfig { reason, .. }) => reason,
            other => panic!("{p}: {other:?}"),
        };
        assert!(
            reason(100.0).contains("100 would wait"),
            "{}",
            reason(100.0)
        );
        assert!(!reason(100.0).contains("every call twice"));
        assert!(reason(0.0).contains("every call twice"), "{}", reason(0.0));
        assert!(reason(f64::NAN).contains("not a number"));
    }

    #[test]
    fn a_fixed_delay_needs_no_estimate() {
        let hedging = Hedging::new(HedgePolicy::after(Duration::from_millis(7), 0.05, 1));
        assert!(hedging.estimate("f").is_none());
        assert_eq!(hedging.delay(None), Some(Duration::from_millis(7)));
    }

    #[test]
    fn the_percentile_delay_waits_for_samples_and_keeps_its_floor() {
        let policy = HedgePolicy::at_percentile(90.0, 0.05, 1).min_delay(Duration::from_millis(5));
        let hedging = Hedging::new(policy);
        let estimate = hedging.estimate("f").unwrap();
        // The same estimate for the same function, another for another.
        assert!(Arc::ptr_eq(&estimate, &hedging.estimate("f").unwrap()));
        assert!(!Arc::ptr_eq(&estimate, &hedging.estimate("g").unwrap()));
        for _ in 0..super::super::latency::MIN_SAMPLES - 1 {
            estimate.record(Duration::from_millis(20));
        }
        assert_eq!(hedging.delay(Some(&estimate)), None, "too few samples");
        estimate.record(Duration::from_millis(20));
        let delay = hedging.delay(Some(&estimate)).unwrap();
        assert!(
            delay > Duration::from_millis(20) && delay <= Duration::from_millis(25),
            "{delay:?}"
        );
        // Faster than the floor: the floor.
        let fast = Hedging::new(policy);
        let estimate = fast.estimate("f").unwrap();
        for _ in 0..200 {
            estimate.record(Duration::from_micros(100));
        }
        assert_eq!(fast.delay(Some(&estimate)), Some(Duration::from_millis(5)));
    }

    #[test]
    fn the_budget_caps_hedges_at_its_ratio_and_floor() {
        // 5 % of calls, no floor: 20 calls allow one hedge.
        let hedging = Hedging::new(HedgePolicy::after(Duration::from_millis(1), 0.05, 0));
        assert!(!hedging.budget.withdraw(0), "nothing deposited");
        for _ in 0..20 {
            hedging.budget.deposit(0);
        }
        assert!(hedging.budget.withdraw(0));
        assert!(!hedging.budget.withdraw(0), "spent");
        // A budget of 0 and 0 never allows one.
        let zero = Hedging::new(HedgePolicy::after(Duration::from_millis(1), 0.0, 0));
        for _ in 0..1_000 {
            zero.budget.deposit(0);
        }
        assert!(!zero.budget.withdraw(0));
        // The floor alone: 2 per second over 10 s.
        let floor = Hedging::new(HedgePolicy::after(Duration::from_millis(1), 0.0, 2));
        for _ in 0..20 {
            assert!(floor.budget.withdraw(0));
        }
        assert!(!floor.budget.withdraw(0));
    }
}
