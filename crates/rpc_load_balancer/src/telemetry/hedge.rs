//! Hedged calls' metrics and log lines (issue 22): second copies sent, second copies the
//! balancer's hedge budget refused, and second copies whose reply won. Hedges are a few
//! percent of calls at most, so their handles are made at each event.

use super::{HEDGE, HEDGE_BUDGET_EXHAUSTED, HEDGE_WON};

/// A call routed by `load_balancer` still unanswered by its first member is sent a second
/// time, to `node`: `hedge.count` +1 and a DEBUG line.
pub(crate) fn hedged(load_balancer: &str, node: &str) {
    if !super::ENABLED {
        return;
    }
    metrics::counter!(HEDGE, "load_balancer" => load_balancer.to_string()).increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::hedge",
        load_balancer,
        node,
        "hedging a slow idempotent call on another member"
    );
}

/// A call routed by `load_balancer` was due a second copy but its hedge budget is spent:
/// `hedge.budget_exhausted.count` +1 and a DEBUG line.
pub(crate) fn hedge_refused(load_balancer: &str) {
    if !super::ENABLED {
        return;
    }
    metrics::counter!(HEDGE_BUDGET_EXHAUSTED, "load_balancer" => load_balancer.to_string())
        .increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::hedge",
        load_balancer,
        "not hedged: the hedge budget is spent"
    );
}

/// The second copy of a hedged call routed by `load_balancer`, served by `node`, replied
/// first: `hedge.won.count` +1.
pub(crate) fn hedge_won(load_balancer: &str, node: &str) {
    if !super::ENABLED {
        return;
    }
    metrics::counter!(HEDGE_WON, "load_balancer" => load_balancer.to_string()).increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::hedge",
        load_balancer,
        node,
        "the hedged copy replied first"
    );
}
