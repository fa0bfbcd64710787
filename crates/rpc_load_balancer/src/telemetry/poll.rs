//! LeastCpu Poller instrumentation: one handle per balancer for the cycle duration, and a
//! counter per failed remote reading by node and kind.

use std::time::Duration;

use metrics::Histogram;

use super::{LEAST_CPU_POLL_DURATION, LEAST_CPU_POLL_FAILURES};

/// One LeastCpu balancer's Poller metrics.
pub(crate) struct PollMetrics {
    balancer: String,
    duration: Histogram,
}

impl PollMetrics {
    pub(crate) fn new(balancer: &str) -> Self {
        Self {
            balancer: balancer.to_string(),
            duration: metrics::histogram!(LEAST_CPU_POLL_DURATION, "load_balancer" => balancer.to_string()),
        }
    }

    /// A poll cycle finished after `elapsed`.
    pub(crate) fn polled(&self, elapsed: Duration) {
        if !super::ENABLED {
            return;
        }
        self.duration.record(elapsed.as_secs_f64() * 1_000.0);
    }

    /// A remote reading failed (a poll cycle, not a hot path: the handle is looked up here).
    pub(crate) fn failed(&self, node: &str, kind: &'static str) {
        if !super::ENABLED {
            return;
        }
        metrics::counter!(
            LEAST_CPU_POLL_FAILURES,
            "load_balancer" => self.balancer.clone(),
            "node" => node.to_string(),
            "kind" => kind
        )
        .increment(1);
    }
}
