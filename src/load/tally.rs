//! The tally a run's callers count into, under one lock: bounded by nodes and error kinds,
//! not by calls.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{LoadReport, Outcome};
use crate::latency::Latencies;

/// The run's tally, shared by its callers (each records a call under the lock: memory stays
/// flat, nodes kept as `Arc<str>` so counting a success allocates nothing).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) calls: u64,
    pub(super) per_node: BTreeMap<Arc<str>, u64>,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) error_samples: BTreeMap<String, String>,
    pub(super) latency: Latencies,
}

impl Tally {
    pub(super) fn record(&mut self, latency: Duration, outcome: Outcome) {
        self.latency
            .record(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
        self.calls += 1;
        match outcome {
            Ok(node) => *self.per_node.entry(node).or_default() += 1,
            Err(failure) => {
                *self.errors.entry(failure.kind.clone()).or_default() += 1;
                self.error_samples
                    .entry(failure.kind)
                    .or_insert(failure.message);
            }
        }
    }

    pub(super) fn into_report(self) -> LoadReport {
        LoadReport {
            calls: self.calls,
            per_node: self
                .per_node
                .into_iter()
                .map(|(node, n)| (node.to_string(), n))
                .collect(),
            errors: self.errors,
            error_samples: self.error_samples,
            latency: self.latency,
            ..LoadReport::default()
        }
    }
}

/// Locks the shared tally (a panic elsewhere does not void what was counted).
pub(super) fn lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(PoisonError::into_inner)
}
