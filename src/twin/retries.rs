//! The retry figures of a twin caller (`rpclb demo --scenario NAME --retries`): how many
//! calls its balancer sent again after a failure of the retryable kind, and how many such
//! failures its retry budget let through. The library counts these as metrics only
//! (`rpc_load_balancer.retry.count`, `.retry.budget_exhausted.count`,
//! docs/reference/metrics.md), so the caller process keeps those two counters in its recorder
//! (`recorder.rs`) and reads them at the start of its measured window and after its last call
//! ([`RetryCounters::since`]).
//!
//! A retry is counted when it is sent, so the window's figures are the retries sent from the
//! window's start until the caller stops waiting for its calls: a retry of a call issued in
//! the last moments of the warm-up counts in the window (the lab counts the retries of the
//! window's calls). Without the `telemetry` feature the library counts nothing and the caller
//! reports no figures (`None`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rpclb_lab::RunReport;
use serde::{Deserialize, Serialize};

/// What a caller's retries did over its measured window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryTally {
    /// Calls sent again to another member (extra calls).
    pub sent: u64,
    /// Failures of the retryable kind not sent again because the budget was spent.
    pub refused_by_budget: u64,
}

/// The two retry counters of this process (shared with its
/// [`CallerRecorder`](super::recorder::CallerRecorder)).
#[derive(Debug, Clone, Default)]
pub struct RetryCounters {
    pub(super) sent: Arc<AtomicU64>,
    pub(super) refused: Arc<AtomicU64>,
}

impl RetryCounters {
    /// The counters now.
    pub fn read(&self) -> RetryTally {
        RetryTally {
            sent: self.sent.load(Ordering::Relaxed),
            refused_by_budget: self.refused.load(Ordering::Relaxed),
        }
    }

    /// What was counted since `start` (an earlier [`read`](Self::read)).
    pub fn since(&self, start: RetryTally) -> RetryTally {
        let now = self.read();
        RetryTally {
            sent: now.sent.saturating_sub(start.sent),
            refused_by_budget: now
                .refused_by_budget
                .saturating_sub(start.refused_by_budget),
        }
    }
}

/// One line per run that retried (`rpclb demo --retries`, text output): the retries sent,
/// their share of the calls (the extra calls) and those the budget refused; empty without.
pub fn lines(runs: &[RunReport]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for run in runs {
        if let Some(r) = &run.retries {
            let _ = writeln!(
                out,
                "retries, {} run {}: {} sent ({:.2} % extra calls), {} refused by the budget; {} errors of {} calls",
                run.algorithm,
                run.seed,
                r.retries,
                r.extra_share * 100.0,
                r.refused_by_budget,
                run.errors,
                run.calls
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
