//! The bench's plan — payload sizes, calls and seconds per round, the case order of each
//! round — and running both phases of one payload size by it.

use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;

use super::phase::Phase;
use super::table::size_label;
use super::targets::{run_case, Targets};
use super::Case;
use crate::cli::BenchArgs;
use crate::load::Amount;

/// The bench's payload of `size` bytes: a pattern, so a reply with bytes in the wrong place
/// is caught.
fn payload(size: usize) -> Arc<[u8]> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

/// The bench's settings, derived from the flags.
pub(super) struct Plan {
    pub(super) sizes: Vec<usize>,
    pub(super) warmup: u64,
    pub(super) calls_per_round: u64,
    pub(super) rounds: u32,
    pub(super) concurrency: u32,
    pub(super) window: Duration,
    pub(super) warmup_window: Duration,
}

impl Plan {
    pub(super) fn of(args: &BenchArgs) -> Self {
        Self {
            sizes: args.sizes.clone(),
            warmup: args.warmup,
            calls_per_round: args.calls.div_ceil(u64::from(args.rounds)),
            rounds: args.rounds,
            concurrency: args.shape.concurrency,
            window: Duration::from_secs_f64(args.secs / f64::from(args.rounds)),
            warmup_window: Duration::from_secs_f64(args.warmup_secs),
        }
    }

    /// Steps of the progress bar: one per case run.
    pub(super) fn steps(&self) -> u64 {
        let warmups = u64::from(self.warmup > 0) + u64::from(!self.warmup_window.is_zero());
        let per_size = Case::ALL.len() as u64 * (2 * u64::from(self.rounds) + warmups);
        per_size * self.sizes.len() as u64
    }
}

/// One payload size's results.
pub(super) struct SizeResult {
    pub(super) bytes: usize,
    pub(super) sequential: Phase,
    pub(super) throughput: Phase,
}

/// The cases of round `round` (from 1), each with its index in [`Case::ALL`]: every case once,
/// the order rotated by one each round (raw, direct, balanced, local; then direct, balanced,
/// local, raw; …), so that no case always runs first or right after another.
pub(super) fn round_order(round: u32) -> impl Iterator<Item = (usize, Case)> {
    let n = Case::ALL.len();
    let shift = round.saturating_sub(1) as usize % n;
    (0..n).map(move |k| {
        let i = (k + shift) % n;
        (i, Case::ALL[i])
    })
}

/// Runs both phases for one payload size.
pub(super) async fn bench_size(
    targets: &Arc<Targets>,
    plan: &Plan,
    bytes: usize,
    bar: &ProgressBar,
) -> SizeResult {
    let payload = payload(bytes);
    let label = size_label(bytes);
    let mut sequential = Phase::new();
    if plan.warmup > 0 {
        for (i, case) in Case::ALL.into_iter().enumerate() {
            bar.set_message(format!("{label} sequential warm-up: {}", case.name()));
            let amount = Amount::Calls(plan.warmup);
            sequential.warmup[i] = Some(run_case(targets, case, &payload, 1, amount, true).await);
            bar.inc(1);
        }
    }
    for round in 1..=plan.rounds {
        for (i, case) in round_order(round) {
            bar.set_message(format!(
                "{label} sequential round {round}/{}: {}",
                plan.rounds,
                case.name()
            ));
            let amount = Amount::Calls(plan.calls_per_round);
            let report = run_case(targets, case, &payload, 1, amount, false).await;
            sequential.add_round(i, report);
            bar.inc(1);
        }
    }
    let mut throughput = Phase::new();
    if !plan.warmup_window.is_zero() {
        for (i, case) in Case::ALL.into_iter().enumerate() {
            bar.set_message(format!("{label} throughput warm-up: {}", case.name()));
            let amount = Amount::Duration(plan.warmup_window);
            let report = run_case(targets, case, &payload, plan.concurrency, amount, false).await;
            throughput.warmup[i] = Some(report);
            bar.inc(1);
        }
    }
    for round in 1..=plan.rounds {
        for (i, case) in round_order(round) {
            bar.set_message(format!(
                "{label} throughput round {round}/{}: {}",
                plan.rounds,
                case.name()
            ));
            let amount = Amount::Duration(plan.window);
            let report = run_case(targets, case, &payload, plan.concurrency, amount, false).await;
            throughput.add_round(i, report);
            bar.inc(1);
        }
    }
    SizeResult {
        bytes,
        sequential,
        throughput,
    }
}
