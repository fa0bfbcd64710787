//! The hedging figures of a twin caller (`rpclb demo --scenario NAME --hedge SPEC`): how many
//! second copies its balancer sent, how many of them won, and how many calls due one its hedge
//! budget refused. The library counts these as metrics only (`rpc_load_balancer.hedge.count`,
//! `.hedge.won.count`, `.hedge.budget_exhausted.count`, docs/reference/metrics.md), so the
//! caller process keeps those three counters in its recorder (`recorder.rs`) and reads them
//! at the start of its measured window and after its last call ([`HedgeCounters::since`]).
//!
//! A hedge is counted when it is sent, so the window's figures are the hedges sent from the
//! window's start until the caller stops waiting for its calls: a hedge of a call issued in
//! the last moments of the warm-up (at most the hedge delay before the window) counts in the
//! window. Without the `telemetry` feature the library counts nothing and the caller reports
//! no figures (`None`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// The three hedge counters of this process (shared with its
/// [`CallerRecorder`](super::recorder::CallerRecorder)).
#[derive(Debug, Clone, Default)]
pub struct HedgeCounters {
    pub(super) sent: Arc<AtomicU64>,
    pub(super) won: Arc<AtomicU64>,
    pub(super) refused: Arc<AtomicU64>,
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
}

#[cfg(test)]
mod tests;
