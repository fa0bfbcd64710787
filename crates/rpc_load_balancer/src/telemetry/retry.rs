//! Retry budgets' metrics and log lines (issue 22): calls of idempotent functions sent again
//! after a failure of the retryable kind, and the retries their balancer's budget refused.
//! Both come with failures (rare), so their handles are made at each event.

use super::{RETRY, RETRY_BUDGET_EXHAUSTED};
use crate::{Error, Unavailable};

/// The `reason` label of a retryable failure: its [`Unavailable::as_str`].
fn reason(error: &Error) -> &'static str {
    match error {
        Error::ServiceUnavailable { reason, .. } => reason.as_str(),
        _ => Unavailable::ConnectionLost.as_str(),
    }
}

/// A call routed by `load_balancer` that `node` failed with `error` is sent again to another
/// member: `retry.count` +1 and a DEBUG line.
pub(crate) fn retried(load_balancer: &str, node: &str, error: &Error) {
    if !super::ENABLED {
        return;
    }
    let reason = reason(error);
    metrics::counter!(
        RETRY,
        "load_balancer" => load_balancer.to_string(),
        "reason" => reason,
    )
    .increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::retry",
        load_balancer,
        node,
        reason,
        "retrying an idempotent call on another member"
    );
}

/// A call routed by `load_balancer` that failed with `error` is not sent again: its retry
/// budget is spent. `retry.budget_exhausted.count` +1 and a DEBUG line.
pub(crate) fn retry_refused(load_balancer: &str, error: &Error) {
    if !super::ENABLED {
        return;
    }
    let reason = reason(error);
    metrics::counter!(
        RETRY_BUDGET_EXHAUSTED,
        "load_balancer" => load_balancer.to_string(),
        "reason" => reason,
    )
    .increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::retry",
        load_balancer,
        reason,
        "not retried: the retry budget is spent"
    );
}
