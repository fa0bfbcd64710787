//! The hedging figures of a twin caller (`rpclb demo --scenario NAME --hedge SPEC`): how many
//! second copies its balancer sent, how many of them won, and how many calls due one its hedge
//! budget refused. The library counts these as metrics only (`rpc_load_balancer.hedge.count`,
//! `.hedge.won.count`, `.hedge.budget_exhausted.count`, docs/reference/metrics.md), so the
//! caller process installs [`HedgeRecorder`], a `metrics` recorder that keeps those three
//! counters (every other series is a no-op), and reads them at the start of its measured
//! window and after its last call ([`HedgeCounters::since`]).
//!
//! A hedge is counted when it is sent, so the window's figures are the hedges sent from the
//! window's start until the caller stops waiting for its calls: a hedge of a call issued in
//! the last moments of the warm-up (at most the hedge delay before the window) counts in the
//! window. Without the `telemetry` feature the library counts nothing and the caller reports
//! no figures (`None`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use rpc_load_balancer::telemetry::{HEDGE, HEDGE_BUDGET_EXHAUSTED, HEDGE_WON};
use serde::{Deserialize, Serialize};

/// What a caller's hedging did over its measured window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HedgeTally {
    /// Second copies sent.
    pub sent: u64,
    /// Of those, copies whose reply came first (the call's reply).
    pub won: u64,
    /// Calls due a second copy that the hedge budget refused.
    pub refused_by_budget: u64,
}

/// The three hedge counters of this process (shared with [`HedgeRecorder`]).
#[derive(Debug, Clone, Default)]
pub struct HedgeCounters {
    sent: Arc<AtomicU64>,
    won: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
}

impl HedgeCounters {
    /// The counters now.
    pub fn read(&self) -> HedgeTally {
        HedgeTally {
            sent: self.sent.load(Ordering::Relaxed),
            won: self.won.load(Ordering::Relaxed),
            refused_by_budget: self.refused.load(Ordering::Relaxed),
        }
    }

    /// What was counted since `start` (an earlier [`read`](Self::read)).
    pub fn since(&self, start: HedgeTally) -> HedgeTally {
        let now = self.read();
        HedgeTally {
            sent: now.sent.saturating_sub(start.sent),
            won: now.won.saturating_sub(start.won),
            refused_by_budget: now
                .refused_by_budget
                .saturating_sub(start.refused_by_budget),
        }
    }

    /// Installs a [`HedgeRecorder`] of new counters as this process's `metrics` recorder
    /// and returns them; `None` when the library counts nothing (built without the
    /// `telemetry` feature) or a recorder is already installed.
    pub fn install() -> Option<HedgeCounters> {
        if !cfg!(feature = "telemetry") {
            return None;
        }
        let counters = HedgeCounters::default();
        metrics::set_global_recorder(HedgeRecorder(counters.clone()))
            .ok()
            .map(|()| counters)
    }
}

/// A `metrics` recorder that keeps the library's three hedge counters (whatever their
/// labels: a twin caller has one balancer) and drops every other series.
#[derive(Debug)]
pub struct HedgeRecorder(pub HedgeCounters);

impl Recorder for HedgeRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let counters = &self.0;
        match key.name() {
            HEDGE => Counter::from_arc(Arc::clone(&counters.sent)),
            HEDGE_WON => Counter::from_arc(Arc::clone(&counters.won)),
            HEDGE_BUDGET_EXHAUSTED => Counter::from_arc(Arc::clone(&counters.refused)),
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

#[cfg(test)]
mod tests;
