//! The `[retries]` option of a scenario (issue 22): callers' calls are idempotent and sent
//! again to another member after a failure of the retryable kind, as the library's
//! [`RetryBudget`] allows.

use std::time::Duration;

use rpc_load_balancer::testkit::RetryBudgetKit;
use rpc_load_balancer::RetryBudget;
use serde::{Deserialize, Serialize};

/// Retries: every call is of an idempotent function, and each caller (a node with its own
/// balancer) keeps a [`RetryBudget`] as the library does. A call whose member fails it with
/// a `fail` event's failure — of the retryable kind when `fail_retryable` (connection lost,
/// unreachable or pushback: the call did not run; as fast as the error reply) — goes to
/// another member it has not tried, within its first deadline, while the caller's budget
/// allows (at most `max_per_call` times). Timeouts, and calls failed by the heartbeat, are
/// not retried. The defaults are [`RetryBudget::default`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retries {
    /// Retries per call, 0–1000 (default 0.2).
    #[serde(default = "ratio")]
    pub ratio: f64,
    /// Retries per second whatever the calls (default 10).
    #[serde(default = "min_per_second")]
    pub min_per_second: u32,
    /// The budget's window, whole seconds from 1 to 60 (default 10).
    #[serde(default = "window_s")]
    pub window_s: u64,
    /// Most retries of one call (default 3).
    #[serde(default = "max_per_call")]
    pub max_per_call: u32,
    /// Whether `fail` events' failures are of the retryable kind (default `true`); `false`:
    /// an error reply of the function, which is never retried.
    #[serde(default = "fail_retryable")]
    pub fail_retryable: bool,
}

fn ratio() -> f64 {
    RetryBudget::default().ratio
}
fn min_per_second() -> u32 {
    RetryBudget::default().min_per_second
}
fn window_s() -> u64 {
    RetryBudget::default().window.as_secs()
}
fn max_per_call() -> u32 {
    RetryBudget::default().max_per_call
}
fn fail_retryable() -> bool {
    true
}

impl Default for Retries {
    /// The library's default budget; `fail` failures of the retryable kind.
    fn default() -> Self {
        Self {
            ratio: ratio(),
            min_per_second: min_per_second(),
            window_s: window_s(),
            max_per_call: max_per_call(),
            fail_retryable: fail_retryable(),
        }
    }
}

impl Retries {
    /// The library's budget of these values.
    pub fn budget(&self) -> RetryBudget {
        RetryBudget::new(
            self.ratio,
            self.min_per_second,
            Duration::from_secs(self.window_s),
        )
        .max_per_call(self.max_per_call)
    }

    /// A caller's account of the budget.
    ///
    /// Errors: the field that is out of range (`retries.ratio`, `retries.window_s`) and why.
    pub(crate) fn kit(&self) -> Result<RetryBudgetKit, (String, String)> {
        RetryBudgetKit::new(self.budget()).map_err(|error| match error {
            rpc_load_balancer::Error::InvalidConfig { option, reason } => {
                let field = match option {
                    "retry_budget.window" => "retries.window_s".to_string(),
                    other => other.replace("retry_budget", "retries"),
                };
                (field, reason)
            }
            other => ("retries".to_string(), other.to_string()),
        })
    }
}
