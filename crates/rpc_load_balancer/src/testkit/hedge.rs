//! [`HedgeKit`]: a balancer's hedging decisions driven by hand, on a clock the caller gives.

use std::sync::Arc;
use std::time::Duration;

use crate::retry::{Hedging, LatencyEstimate};
use crate::{Error, HedgePolicy};

/// A [`HedgePolicy`]'s decisions as a balancer makes them for one function — when a call's
/// second copy is due (the set delay, or the percentile of the latencies recorded so far, no
/// earlier than its floor, none before 100 samples) and whether the hedge budget allows it
/// (a deposit per hedgeable call, a withdrawal per hedge, over a sliding window) — on a clock
/// the caller moves (time from 0, e.g. a simulation's), for tests and simulations (the lab's
/// hedging).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::testkit::HedgeKit;
/// use rpc_load_balancer::HedgePolicy;
///
/// // After the p90, for 10 % of calls, no floor.
/// let kit = HedgeKit::new(HedgePolicy::at_percentile(90.0, 0.1, 0))?;
/// assert_eq!(kit.delay(), None, "no samples yet");
/// for i in 0..100 {
///     kit.record(Duration::from_millis(if i < 90 { 1 } else { 50 }));
/// }
/// assert!(kit.delay().unwrap() < Duration::from_millis(2));
/// let now = Duration::ZERO;
/// for _ in 0..10 {
///     kit.deposit(now);
/// }
/// assert!(kit.withdraw(now), "10 calls allow one hedge");
/// assert!(!kit.withdraw(now));
/// # Ok::<(), rpc_load_balancer::Error>(())
/// ```
#[derive(Debug)]
pub struct HedgeKit {
    hedging: Hedging,
    estimate: Option<Arc<LatencyEstimate>>,
}

impl HedgeKit {
    /// The decisions of `policy`, its budget empty at time 0.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `hedge.delay`, `hedge.percentile`,
    /// `hedge.ratio` or `hedge.window`, as a balancer's start refuses them.
    pub fn new(policy: HedgePolicy) -> Result<Self, Error> {
        policy.validate()?;
        let hedging = Hedging::new(policy);
        let estimate = hedging.estimate("testkit");
        Ok(Self { hedging, estimate })
    }

    /// How long after a call's first copy its second is due now; `None`: not hedged (a
    /// percentile with fewer than 100 samples).
    pub fn delay(&self) -> Option<Duration> {
        self.hedging.delay(self.estimate.as_deref())
    }

    /// A call's latency (its winning copy's reply, from the first copy's start), for the
    /// percentile (nothing for a set delay).
    pub fn record(&self, latency: Duration) {
        if let Some(estimate) = &self.estimate {
            estimate.record(latency);
        }
    }

    /// A hedgeable call made at `now` (from time 0): deposits its share. Time going back
    /// counts as standing still.
    pub fn deposit(&self, now: Duration) {
        self.hedging.budget.deposit(ns(now));
    }

    /// A hedge due at `now`: `true` (one withdrawn) if the budget allows it.
    pub fn withdraw(&self, now: Duration) -> bool {
        self.hedging.budget.withdraw(ns(now))
    }

    /// A hedge withdrawn at `now` that could not be sent (no member could take it): its token
    /// goes back, as the library's call does.
    pub fn refund(&self, now: Duration) {
        self.hedging.budget.refund(ns(now));
    }
}

fn ns(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}
