//! Retry budgets (issue 22): how many calls of idempotent functions a balancer may send again
//! after a failure of the retryable kind, as a share of its calls plus a floor per second over
//! a sliding window.
//!
//! Sources: Finagle's `RetryBudget` (`com.twitter.finagle.service.RetryBudget`, a token
//! bucket over a time window: a deposit per request, a withdrawal per retry, and a reserve of
//! `minRetriesPerSec × ttl`) and tower's `retry::budget::TpsBudget` (the same with a window
//! of slots that expire one by one). This is written from their descriptions, not their code:
//! balances are kept in milli-tokens in a ring of [`SLOTS`] slots, one short lock per deposit
//! or withdrawal.

use std::sync::Mutex;
use std::time::Duration;

use crate::Error;

/// How many slots a budget's window is cut into: a deposit or withdrawal expires between
/// 9/10 of the window and the whole window after it was made.
pub(crate) const SLOTS: usize = 10;

/// A token in milli-tokens: one retry withdraws this much, one call deposits
/// `ratio × MILLI` (so a ratio is exact to 1/1000).
const MILLI: i64 = 1_000;

/// The largest [`RetryBudget::ratio`]: 1000 retries per call (Finagle's and tower's bound).
pub const MAX_RETRY_RATIO: f64 = 1_000.0;
/// The shortest [`RetryBudget::window`]: 1 s (Finagle's bound).
pub const MIN_RETRY_WINDOW: Duration = Duration::from_secs(1);
/// The longest [`RetryBudget::window`]: 60 s (Finagle's bound).
pub const MAX_RETRY_WINDOW: Duration = Duration::from_secs(60);

/// How many calls of **idempotent** functions a balancer may send again after a failure of the
/// retryable kind — the connection was lost, the member was unreachable, or it refused the
/// call at a concurrency cap (pushback); docs/how-to/retries.md lists the exact errors — set
/// with [`BalancerConfig::retry_budget`](crate::BalancerConfig::retry_budget).
///
/// Over any `window`, the balancer's retries stay within `ratio` × the calls of idempotent
/// functions made through it in that window, plus `min_per_second` × the window in seconds
/// (so a balancer with few calls may still retry a few). A call is retried at most
/// `max_per_call` times, each time on a member it has not tried yet, and never past its own
/// deadline. Calls of functions that are not idempotent are never sent twice, whatever the
/// budget says ([`RemoteFunction::IDEMPOTENT`](crate::RemoteFunction::IDEMPOTENT)).
///
/// **On by default** ([`RetryBudget::default`]: 20 % of calls plus 10 per second over 10 s,
/// at most 3 retries per call), as Finagle's client budget is: a function declared
/// idempotent says it may run twice, and its callers expect a lost connection to be retried;
/// the budget bounds the extra load a failing cluster gets to a fifth of the calls. Functions
/// are not idempotent unless they say so, so the default changes nothing for them.
/// [`RetryBudget::none`] turns retries off.
///
/// Sources: Finagle's `RetryBudget(ttl, minRetriesPerSec, percentCanRetry)` and tower's
/// `retry::budget::TpsBudget::new(ttl, min_per_sec, retry_percent)` (the same three numbers,
/// the same meaning and bounds).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{BalancerConfig, RetryBudget};
///
/// let budget = RetryBudget::default();
/// assert_eq!((budget.ratio, budget.min_per_second), (0.2, 10));
/// assert_eq!(budget.window, Duration::from_secs(10));
/// let config = BalancerConfig::new("reports")
///     .retry_budget(RetryBudget::new(0.1, 5, Duration::from_secs(30)));
/// let off = BalancerConfig::new("ledger").retry_budget(RetryBudget::none());
/// # let _ = (config, off);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudget {
    /// Retries allowed per call made (of an idempotent function), `0.0..=1000.0`: 0.2 lets
    /// one call in five be retried. Checked at start ([`Error::InvalidConfig`] naming
    /// `retry_budget.ratio`).
    pub ratio: f64,
    /// Retries allowed per second whatever the calls (the reserve: `min_per_second` × the
    /// window in whole seconds, always available).
    pub min_per_second: u32,
    /// The window deposits and retries count over, whole seconds from 1 s to 60 s
    /// (sub-second parts are dropped). Checked at start ([`Error::InvalidConfig`] naming
    /// `retry_budget.window`).
    pub window: Duration,
    /// Most retries of one call (0: none). Each goes to a member the call has not tried.
    pub max_per_call: u32,
}

impl Default for RetryBudget {
    /// 20 % of calls plus 10 per second, over 10 s, at most 3 retries a call (Finagle's
    /// defaults for the first three).
    fn default() -> Self {
        Self {
            ratio: 0.2,
            min_per_second: 10,
            window: Duration::from_secs(10),
            max_per_call: 3,
        }
    }
}

impl RetryBudget {
    /// `ratio` retries per call plus `min_per_second`, over `window`, at most 3 retries a call.
    pub fn new(ratio: f64, min_per_second: u32, window: Duration) -> Self {
        Self {
            ratio,
            min_per_second,
            window,
            ..Self::default()
        }
    }

    /// No retries at all: idempotent calls fail as other calls do.
    pub fn none() -> Self {
        Self {
            ratio: 0.0,
            min_per_second: 0,
            window: MIN_RETRY_WINDOW,
            max_per_call: 0,
        }
    }

    /// At most `retries` retries of one call (default 3).
    pub fn max_per_call(mut self, retries: u32) -> Self {
        self.max_per_call = retries;
        self
    }

    /// Whether it is off ([`RetryBudget::none`], or any budget with `max_per_call` 0): no call
    /// deposits, none is retried, nothing is counted. (A budget with `ratio` 0 and
    /// `min_per_second` 0 but retries per call is on and always spent: every retryable
    /// failure of an idempotent call counts as refused by the budget.)
    pub(crate) fn is_none(&self) -> bool {
        self.max_per_call == 0
    }

    /// Checks the values.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `retry_budget.ratio` (not within
    /// `0.0..=1000.0`) or `retry_budget.window` (not within 1 s to 60 s, or not whole
    /// seconds).
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if !(0.0..=MAX_RETRY_RATIO).contains(&self.ratio) {
            return Err(Error::InvalidConfig {
                option: "retry_budget.ratio",
                reason: format!("{} is not within 0.0..=1000.0", self.ratio),
            });
        }
        if !(MIN_RETRY_WINDOW..=MAX_RETRY_WINDOW).contains(&self.window) {
            return Err(Error::InvalidConfig {
                option: "retry_budget.window",
                reason: format!("{:?} is not within 1 s to 60 s", self.window),
            });
        }
        if self.window.subsec_nanos() != 0 {
            return Err(Error::InvalidConfig {
                option: "retry_budget.window",
                reason: format!("{:?} is not a whole number of seconds", self.window),
            });
        }
        Ok(())
    }
}

/// A [`RetryBudget`]'s account: deposits and withdrawals in a ring of [`SLOTS`] slots over the
/// window, on a clock of nanoseconds given by the caller (so that the lab's simulated time
/// and tests drive it as the balancer's real clock does).
#[derive(Debug)]
pub(crate) struct Budget {
    /// Milli-tokens a call deposits.
    deposit: i64,
    /// Milli-tokens always available over a window: `min_per_second × window × 1000`.
    reserve: i64,
    /// Each slot's width, ns.
    slot_ns: u64,
    /// Most retries of one call.
    pub(crate) max_per_call: u32,
    /// Whether it is off ([`RetryBudget::is_none`]): then nothing is counted.
    off: bool,
    slots: Mutex<Slots>,
}

#[derive(Debug)]
struct Slots {
    /// The net milli-tokens of each slot (deposits less withdrawals).
    net: [i64; SLOTS],
    /// The number of the current slot (time / slot width); its index is `current % SLOTS`.
    current: u64,
}

impl Slots {
    /// Moves the ring to slot number `slot`, emptying the slots that expired.
    fn advance(&mut self, slot: u64) {
        if slot <= self.current {
            return;
        }
        let gap = slot - self.current;
        if gap >= SLOTS as u64 {
            self.net = [0; SLOTS];
        } else {
            for n in self.current + 1..=slot {
                self.net[(n % SLOTS as u64) as usize] = 0;
            }
        }
        self.current = slot;
    }
}

impl Budget {
    /// The account of `config` (checked: [`RetryBudget::validate`]), empty at time 0.
    pub(crate) fn new(config: &RetryBudget) -> Self {
        let seconds = config.window.as_secs().max(1);
        Self {
            deposit: rounded(config.ratio * MILLI as f64),
            reserve: i64::from(config.min_per_second)
                .saturating_mul(seconds as i64)
                .saturating_mul(MILLI),
            slot_ns: seconds * 1_000_000_000 / SLOTS as u64,
            max_per_call: config.max_per_call,
            off: config.is_none(),
            slots: Mutex::new(Slots {
                net: [0; SLOTS],
                current: 0,
            }),
        }
    }

    /// Whether it never allows a retry.
    pub(crate) fn is_off(&self) -> bool {
        self.off
    }

    /// A call made at `now_ns`: deposits its share.
    pub(crate) fn deposit(&self, now_ns: u64) {
        if self.off || self.deposit == 0 {
            return;
        }
        let mut slots = self.lock();
        slots.advance(now_ns / self.slot_ns);
        let current = (slots.current % SLOTS as u64) as usize;
        slots.net[current] = slots.net[current].saturating_add(self.deposit);
    }

    /// A retry wanted at `now_ns`: withdraws one token and returns `true` if the balance
    /// allows it, else `false` (and withdraws nothing).
    pub(crate) fn withdraw(&self, now_ns: u64) -> bool {
        if self.off {
            return false;
        }
        let mut slots = self.lock();
        slots.advance(now_ns / self.slot_ns);
        let balance = self.reserve + slots.net.iter().sum::<i64>();
        if balance < MILLI {
            return false;
        }
        let current = (slots.current % SLOTS as u64) as usize;
        slots.net[current] -= MILLI;
        true
    }

    /// Gives back, at `now_ns`, a token withdrawn for a retry or hedge that then could not be
    /// sent (no member could take it).
    pub(crate) fn refund(&self, now_ns: u64) {
        if self.off {
            return;
        }
        let mut slots = self.lock();
        slots.advance(now_ns / self.slot_ns);
        let current = (slots.current % SLOTS as u64) as usize;
        slots.net[current] = slots.net[current].saturating_add(MILLI);
    }

    /// Retries it would allow at `now_ns`, in whole tokens (the test kit's and tests' view).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn balance(&self, now_ns: u64) -> i64 {
        if self.off {
            return 0;
        }
        let mut slots = self.lock();
        slots.advance(now_ns / self.slot_ns);
        (self.reserve + slots.net.iter().sum::<i64>()).max(0) / MILLI
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        // (Nothing panics while it is held: a poisoned lock's data is whole.)
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `x` rounded to the nearest integer, as i64 (`x` is within 0..=1e6).
fn rounded(x: f64) -> i64 {
    (x + 0.5).floor() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_reserve_alone_allows_min_per_second_times_the_window() {
        // No calls: 10 per second over 10 s is 100 retries, then none.
        let budget = Budget::new(&RetryBudget::default());
        assert_eq!(budget.balance(0), 100);
        for i in 0..100 {
            assert!(budget.withdraw(i), "retry {i}");
        }
        assert!(!budget.withdraw(100), "the 101st within the window");
        assert_eq!(budget.balance(S), 0);
        // The withdrawals expire with their slot: after a whole window all are back.
        assert!(!budget.withdraw(9 * S));
        assert_eq!(budget.balance(10 * S), 100);
        assert!(budget.withdraw(10 * S));
    }

    #[test]
    fn a_refund_gives_back_a_token_that_could_not_be_spent() {
        let budget = Budget::new(&RetryBudget::new(0.0, 1, Duration::from_secs(1)));
        assert!(budget.withdraw(0));
        assert!(!budget.withdraw(0), "the reserve of 1 is spent");
        budget.refund(0);
        assert_eq!(budget.balance(0), 1);
        assert!(budget.withdraw(0), "the refunded token");
        let off = Budget::new(&RetryBudget::none());
        off.refund(0);
        assert!(!off.withdraw(0), "a budget that is off stays off");
    }

    #[test]
    fn each_call_deposits_its_ratio() {
        // No reserve: 20 % of calls, so 10 calls allow 2 retries.
        let budget = Budget::new(&RetryBudget::new(0.2, 0, Duration::from_secs(10)));
        assert!(!budget.withdraw(0), "nothing deposited yet");
        for _ in 0..10 {
            budget.deposit(0);
        }
        assert_eq!(budget.balance(0), 2);
        assert!(budget.withdraw(S));
        assert!(budget.withdraw(2 * S));
        assert!(!budget.withdraw(3 * S), "exhausted");
        // 4 more calls give 0.8 token: not a whole one; the 5th makes it one.
        for _ in 0..4 {
            budget.deposit(3 * S);
        }
        assert!(!budget.withdraw(3 * S));
        budget.deposit(3 * S);
        assert!(budget.withdraw(3 * S));
        // The first 10 calls' deposits expire after the window; their withdrawals (at 1 s
        // and 2 s) expire a little later: the balance goes negative, then back to 0.
        assert_eq!(budget.balance(10 * S), 0);
        assert_eq!(budget.balance(13 * S), 0);
        assert!(!budget.withdraw(14 * S));
    }

    #[test]
    fn the_window_slides_slot_by_slot() {
        let budget = Budget::new(&RetryBudget::new(1.0, 0, Duration::from_secs(10)));
        // One call per second for 10 s: one token per slot.
        for second in 0..10 {
            budget.deposit(second * S);
        }
        assert_eq!(budget.balance(9 * S), 10);
        // Each second after, the oldest slot expires.
        assert_eq!(budget.balance(10 * S), 9);
        assert_eq!(budget.balance(15 * S), 4);
        // A jump past the whole window empties every slot.
        assert_eq!(budget.balance(100 * S), 0);
        // Time standing still or going back changes nothing.
        budget.deposit(100 * S);
        assert_eq!(budget.balance(50 * S), 1);
    }

    #[test]
    fn ratio_and_reserve_add_up() {
        let budget = Budget::new(&RetryBudget::new(0.5, 1, Duration::from_secs(2)));
        for _ in 0..4 {
            budget.deposit(0);
        }
        // 4 × 0.5 + 1 × 2 s.
        assert_eq!(budget.balance(0), 4);
        for _ in 0..4 {
            assert!(budget.withdraw(0));
        }
        assert!(!budget.withdraw(0));
    }

    #[test]
    fn none_never_allows_a_retry_and_counts_nothing() {
        let budget = Budget::new(&RetryBudget::none());
        assert!(budget.is_off());
        budget.deposit(0);
        assert!(!budget.withdraw(0));
        assert_eq!(budget.balance(0), 0);
        let zero_per_call = RetryBudget::default().max_per_call(0);
        assert!(Budget::new(&zero_per_call).is_off());
        assert!(!Budget::new(&RetryBudget::default()).is_off());
    }

    #[test]
    fn validation_names_the_option() {
        assert!(RetryBudget::default().validate().is_ok());
        assert!(RetryBudget::none().validate().is_ok());
        assert!(RetryBudget::new(1000.0, 0, MAX_RETRY_WINDOW)
            .validate()
            .is_ok());
        for (budget, option) in [
            (
                RetryBudget::new(-0.1, 10, Duration::from_secs(10)),
                "retry_budget.ratio",
            ),
            (
                RetryBudget::new(1000.5, 10, Duration::from_secs(10)),
                "retry_budget.ratio",
            ),
            (
                RetryBudget::new(f64::NAN, 10, Duration::from_secs(10)),
                "retry_budget.ratio",
            ),
            (
                RetryBudget::new(0.2, 10, Duration::from_millis(999)),
                "retry_budget.window",
            ),
            (
                RetryBudget::new(0.2, 10, Duration::from_millis(1_500)),
                "retry_budget.window",
            ),
            (
                RetryBudget::new(0.2, 10, Duration::from_secs(61)),
                "retry_budget.window",
            ),
        ] {
            match budget.validate() {
                Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option),
                other => panic!("{budget:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let budget = Budget::new(&RetryBudget::new(1000.0, u32::MAX, MAX_RETRY_WINDOW));
        for _ in 0..1000 {
            budget.deposit(0);
        }
        assert!(budget.withdraw(0));
        assert!(budget.balance(u64::MAX) > 0);
    }
}
