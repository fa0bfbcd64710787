//! Retry while there is nobody to send to (the original's `retry?`, `retry_count`,
//! `retry_sleep`): a routed call or cast that finds its balancer's pool empty waits and tries
//! again, instead of failing at once while members are still joining.
//!
//! Only "nothing to send to" is retried ([`Error::NoMembers`], [`Error::NoEligibleMembers`]):
//! a call that was sent is never sent again, whatever became of it (its side effects could
//! run twice). Waiting is asynchronous, jittered ±20 %, ends early when the members change,
//! and is bounded by the call's own timeout: a call never outlives its deadline.
//!
//! Calls of idempotent functions are also sent again after a failure of the retryable kind
//! ([`budget_retryable`]), as their balancer's [`RetryBudget`] allows, and may be hedged: sent
//! a second time to another member while the first copy is slow, as their balancer's
//! [`HedgePolicy`] allows (issue 22).

use std::time::Duration;

use rand::Rng as _;

use crate::{Error, Unavailable};

mod budget;
mod hedge;
mod latency;

pub(crate) use budget::Budget;
pub use budget::{RetryBudget, MAX_RETRY_RATIO, MAX_RETRY_WINDOW, MIN_RETRY_WINDOW};
pub(crate) use hedge::Hedging;
pub use hedge::{HedgeDelay, HedgePolicy};
pub(crate) use latency::LatencyEstimate;

/// The shortest wait between attempts (1 ms), whatever [`Retry::sleep`] says: a retry with
/// no pause would re-select in a busy loop until the call's timeout.
pub const MIN_RETRY_WAIT: Duration = Duration::from_millis(1);

/// How often an attempt may be repeated after the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryCount {
    /// At most this many more attempts (0 = one attempt only).
    Times(u32),
    /// Until the call's timeout.
    Unlimited,
}

/// Retrying while a balancer has no member to send to. Defaults (the original's): 5 retries
/// (6 attempts), 5,000 ms apart, each wait jittered uniformly by ±20 %.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{Retry, RetryCount};
///
/// let patient = Retry::new(RetryCount::Unlimited, Duration::from_millis(200));
/// assert_eq!(Retry::default().count, RetryCount::Times(5));
/// assert_eq!(Retry::never().count, RetryCount::Times(0));
/// # let _ = patient;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// How many more attempts after the first.
    pub count: RetryCount,
    /// Wait between attempts before jitter (±20 %), ms precision. A wait is never shorter
    /// than [`MIN_RETRY_WAIT`] (1 ms), so a zero `sleep` does not spin.
    pub sleep: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            count: RetryCount::Times(5),
            sleep: Duration::from_millis(5_000),
        }
    }
}

impl Retry {
    /// `count` more attempts, `sleep` apart (±20 %).
    pub fn new(count: RetryCount, sleep: Duration) -> Self {
        Self { count, sleep }
    }

    /// One attempt only: an empty pool fails at once (the original's `retry?: false`).
    pub fn never() -> Self {
        Self {
            count: RetryCount::Times(0),
            sleep: Duration::ZERO,
        }
    }

    /// Whether attempt number `attempt` (0 = the first) may be followed by another.
    pub(crate) fn allows_after(&self, attempt: u32) -> bool {
        match self.count {
            RetryCount::Times(n) => attempt < n,
            RetryCount::Unlimited => true,
        }
    }

    /// The next wait: `sleep` jittered uniformly within ±20 %, at least [`MIN_RETRY_WAIT`].
    pub(crate) fn jittered(&self) -> Duration {
        if self.sleep.is_zero() {
            return MIN_RETRY_WAIT;
        }
        crate::deadline::scaled(self.sleep, rand::rng().random_range(0.8..=1.2)).max(MIN_RETRY_WAIT)
    }
}

/// Whether `error` means "nobody to send to", the only outcome that is retried.
pub(crate) fn retryable(error: &Error) -> bool {
    matches!(
        error,
        Error::NoMembers { .. } | Error::NoEligibleMembers { .. }
    )
}

/// Whether a call of an idempotent function that failed with `error` may be sent again, to
/// another member, as its balancer's [`RetryBudget`] allows: the connection was lost while
/// it was in flight ([`Unavailable::ConnectionLost`]), the member could not be reached
/// ([`Unavailable::Disconnected`], [`Unavailable::UnknownNode`],
/// [`Unavailable::NoEndpoint`]), or it refused the call at a concurrency cap
/// ([`Unavailable::Overloaded`], pushback), all as [`Error::ServiceUnavailable`]. Nothing
/// else: a timeout has no time left, and a reply (even an error) says the function ran.
pub(crate) fn budget_retryable(error: &Error) -> bool {
    matches!(
        error,
        Error::ServiceUnavailable {
            reason: Unavailable::ConnectionLost
                | Unavailable::Disconnected
                | Unavailable::UnknownNode
                | Unavailable::NoEndpoint
                | Unavailable::Overloaded,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_jitter() {
        let twice = Retry::new(RetryCount::Times(2), Duration::from_millis(100));
        assert!(twice.allows_after(0) && twice.allows_after(1) && !twice.allows_after(2));
        assert!(!Retry::never().allows_after(0));
        assert!(Retry::new(RetryCount::Unlimited, Duration::ZERO).allows_after(u32::MAX));
        for _ in 0..200 {
            let wait = twice.jittered();
            assert!(
                (Duration::from_millis(80)..=Duration::from_millis(120)).contains(&wait),
                "{wait:?}"
            );
        }
        // No spinning: a zero or tiny sleep still waits 1 ms.
        assert_eq!(Retry::never().jittered(), MIN_RETRY_WAIT);
        let tiny = Retry::new(RetryCount::Unlimited, Duration::from_micros(3));
        assert_eq!(tiny.jittered(), MIN_RETRY_WAIT);
    }
}
