//! Pushback's metrics and log lines: refusals a serving node sends when a call is over one of
//! its concurrency caps, and the refusals a balancer's calls meet on the caller. Both are
//! rare (a node at its cap), so their handles are made at each event.

use super::{PUSHBACK, PUSHBACK_SENT};

/// A call of `function` refused on this node by its `cap` (`node` or `function`) of `limit`
/// calls: `pushback.sent.count` +1 and a DEBUG line.
pub(crate) fn pushback_sent(function: &str, cap: &'static str, limit: usize) {
    if !super::ENABLED {
        return;
    }
    metrics::counter!(PUSHBACK_SENT, "function" => function.to_string(), "cap" => cap).increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::pushback",
        function,
        cap,
        limit,
        "call refused: at the concurrency cap"
    );
}

/// A call routed by `load_balancer` (empty: a direct call) refused by `node` at its cap:
/// `pushback.count` +1 and a DEBUG line.
pub(crate) fn pushback_seen(load_balancer: &str, node: &str) {
    if !super::ENABLED {
        return;
    }
    metrics::counter!(
        PUSHBACK,
        "load_balancer" => load_balancer.to_string(),
        "node" => node.to_string(),
    )
    .increment(1);
    tracing::debug!(
        target: "rpc_load_balancer::pushback",
        load_balancer,
        node,
        "call refused by an overloaded member"
    );
}
