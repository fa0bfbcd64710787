//! Outlier ejection's metrics and log lines: the balancer's listener of its selector's
//! [`EjectionEvent`]s.

use std::sync::Arc;

use metrics::{Gauge, SharedString};

use crate::routing::EjectionEvent;
use crate::telemetry::{MEMBERS_EJECTED, MEMBERS_SUSPECTED, MEMBER_EJECTED, MEMBER_SUSPECTED};

use super::selection_metrics::TARGET;

/// One balancer's ejection metrics: the gauges registered once, the counters (labelled by
/// node) at each event (rare).
pub(crate) struct EjectionMetrics {
    balancer: Arc<str>,
    ejected: Gauge,
    suspected: Gauge,
}

impl EjectionMetrics {
    pub(crate) fn new(balancer: &str) -> Self {
        let balancer: Arc<str> = Arc::from(balancer);
        let label = || SharedString::from_shared(Arc::clone(&balancer));
        Self {
            ejected: metrics::gauge!(MEMBERS_EJECTED, "load_balancer" => label()),
            suspected: metrics::gauge!(MEMBERS_SUSPECTED, "load_balancer" => label()),
            balancer,
        }
    }

    /// Records `event`: counters and an INFO line for an ejection or a suspicion, the gauges
    /// for the counts.
    pub(crate) fn record(&self, event: &EjectionEvent<'_>) {
        if !crate::telemetry::ENABLED {
            return;
        }
        let balancer = || SharedString::from_shared(Arc::clone(&self.balancer));
        match *event {
            EjectionEvent::Ejected {
                node,
                reason,
                for_ns,
            } => {
                metrics::counter!(
                    MEMBER_EJECTED,
                    "load_balancer" => balancer(),
                    "node" => node.to_string(),
                    "reason" => reason.as_str(),
                )
                .increment(1);
                tracing::info!(
                    target: TARGET,
                    load_balancer = &*self.balancer,
                    node,
                    reason = reason.as_str(),
                    for_ms = for_ns / 1_000_000,
                    "member ejected"
                );
            }
            EjectionEvent::Suspected { node } => {
                metrics::counter!(
                    MEMBER_SUSPECTED,
                    "load_balancer" => balancer(),
                    "node" => node.to_string(),
                )
                .increment(1);
                tracing::info!(
                    target: TARGET,
                    load_balancer = &*self.balancer,
                    node,
                    "member suspected of being silent"
                );
            }
            EjectionEvent::Counts(stats) => {
                self.ejected.set(stats.ejected as f64);
                self.suspected.set(stats.suspected as f64);
            }
        }
    }
}
