//! [`RetryBudgetKit`]: a balancer's retry budget driven by hand, on a clock the caller gives.

use std::time::Duration;

use crate::retry::Budget;
use crate::{Error, RetryBudget};

/// A [`RetryBudget`]'s account as a balancer keeps it — a deposit per call of an idempotent
/// function, a withdrawal per retry, over a sliding window — on a clock the caller moves
/// (time from 0, e.g. a simulation's), for tests and simulations (the lab's retries).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::testkit::RetryBudgetKit;
/// use rpc_load_balancer::RetryBudget;
///
/// // 10 % of calls, no reserve.
/// let kit = RetryBudgetKit::new(RetryBudget::new(0.1, 0, Duration::from_secs(10)))?;
/// let now = Duration::ZERO;
/// assert!(!kit.withdraw(now), "nothing deposited");
/// for _ in 0..10 {
///     kit.deposit(now);
/// }
/// assert!(kit.withdraw(now), "10 calls allow one retry");
/// assert!(!kit.withdraw(now));
/// // Ten seconds later the calls have left the window.
/// assert_eq!(kit.balance(Duration::from_secs(20)), 0);
/// # Ok::<(), rpc_load_balancer::Error>(())
/// ```
#[derive(Debug)]
pub struct RetryBudgetKit {
    budget: Budget,
    max_per_call: u32,
}

impl RetryBudgetKit {
    /// The account of `budget`, empty at time 0.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `retry_budget.ratio` or `retry_budget.window`,
    /// as a balancer's start refuses them.
    pub fn new(budget: RetryBudget) -> Result<Self, Error> {
        budget.validate()?;
        Ok(Self {
            budget: Budget::new(&budget),
            max_per_call: budget.max_per_call,
        })
    }

    /// A call of an idempotent function made at `now` (from time 0): deposits its share.
    /// Time going back counts as standing still.
    pub fn deposit(&self, now: Duration) {
        self.budget.deposit(ns(now));
    }

    /// A retry wanted at `now`: `true` (one withdrawn) if the budget allows it.
    pub fn withdraw(&self, now: Duration) -> bool {
        self.budget.withdraw(ns(now))
    }

    /// The whole retries the budget would allow at `now`.
    pub fn balance(&self, now: Duration) -> u64 {
        self.budget.balance(ns(now)).max(0) as u64
    }

    /// The most retries of one call ([`RetryBudget::max_per_call`]).
    pub fn max_per_call(&self) -> u32 {
        self.max_per_call
    }
}

fn ns(time: Duration) -> u64 {
    u64::try_from(time.as_nanos()).unwrap_or(u64::MAX)
}
