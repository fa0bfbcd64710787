//! The results of one phase (sequential or throughput) of one payload size, and the per-round
//! ratios of a case over raw.

use super::Case;
use crate::load::LoadReport;

/// `numerator / denominator`, `None` when the denominator is 0.
pub(super) fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

/// The figures of one round of one case that ratios are taken of.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoundFigures {
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) calls_per_sec: f64,
}

impl RoundFigures {
    pub(super) fn of(report: &LoadReport) -> Self {
        Self {
            p50: report.percentile_us(50.0) as f64,
            p99: report.percentile_us(99.0) as f64,
            calls_per_sec: report.calls_per_sec(),
        }
    }
}

/// One phase (sequential or throughput) of one payload size: every case's rounds.
pub(super) struct Phase {
    /// Per case (in [`Case::ALL`] order): the report over all rounds.
    pub(super) totals: Vec<LoadReport>,
    /// Per case: each round's figures.
    pub(super) rounds: Vec<Vec<RoundFigures>>,
    /// Per case: the warm-up's report (not part of the totals).
    pub(super) warmup: Vec<Option<LoadReport>>,
}

impl Phase {
    pub(super) fn new() -> Self {
        Self {
            totals: Case::ALL
                .iter()
                .map(|case| LoadReport {
                    algorithm: case.name().to_string(),
                    ..LoadReport::default()
                })
                .collect(),
            rounds: vec![Vec::new(); Case::ALL.len()],
            warmup: vec![None; Case::ALL.len()],
        }
    }

    pub(super) fn add_round(&mut self, index: usize, report: LoadReport) {
        self.rounds[index].push(RoundFigures::of(&report));
        self.totals[index].absorb(report);
    }

    pub(super) fn errors(&self) -> u64 {
        let warmup: u64 = self
            .warmup
            .iter()
            .flatten()
            .map(LoadReport::error_count)
            .sum();
        warmup + self.totals.iter().map(LoadReport::error_count).sum::<u64>()
    }

    /// Per-round ratios of `case` over raw for `figure`.
    pub(super) fn ratios(&self, case: Case, figure: fn(&RoundFigures) -> f64) -> Vec<Option<f64>> {
        let index = Case::ALL.iter().position(|c| *c == case).unwrap_or(0);
        self.rounds[index]
            .iter()
            .zip(&self.rounds[0])
            .map(|(numerator, raw)| ratio(figure(numerator), figure(raw)))
            .collect()
    }
}
