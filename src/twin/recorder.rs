//! The one `metrics` recorder of a twin caller (`rpclb demo-caller` with `--hedge` or
//! `--retries`): the library counts hedges and retries as metrics only, and a process can
//! install a single recorder, so this one keeps the five counters the twin reports — the
//! hedges ([`HedgeCounters`]: sent, won, refused by the budget) and the retries
//! ([`RetryCounters`]: sent, refused by the budget) — and drops every other series (whatever
//! their labels: a twin caller has one balancer).

use std::sync::{Arc, OnceLock};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use rpc_load_balancer::telemetry::{
    HEDGE, HEDGE_BUDGET_EXHAUSTED, HEDGE_WON, RETRY, RETRY_BUDGET_EXHAUSTED,
};

use super::hedges::HedgeCounters;
use super::retries::RetryCounters;

/// The counters a twin caller reads (shared with [`CallerRecorder`]).
#[derive(Debug, Clone, Default)]
pub struct CallerCounters {
    /// The hedges.
    pub hedges: HedgeCounters,
    /// The retries.
    pub retries: RetryCounters,
}

/// The process's counters, once installed.
static INSTALLED: OnceLock<CallerCounters> = OnceLock::new();

impl CallerCounters {
    /// Installs a [`CallerRecorder`] of new counters as this process's `metrics` recorder
    /// (once: later calls return the same counters); `None` when the library counts nothing
    /// (built without the `telemetry` feature) or another recorder is installed.
    pub fn install() -> Option<&'static CallerCounters> {
        if !cfg!(feature = "telemetry") {
            return None;
        }
        if let Some(counters) = INSTALLED.get() {
            return Some(counters);
        }
        let counters = CallerCounters::default();
        metrics::set_global_recorder(CallerRecorder(counters.clone())).ok()?;
        Some(INSTALLED.get_or_init(|| counters))
    }
}

/// A `metrics` recorder that keeps the library's hedge and retry counters and drops every
/// other series.
#[derive(Debug)]
pub struct CallerRecorder(pub CallerCounters);

impl Recorder for CallerRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let (hedges, retries) = (&self.0.hedges, &self.0.retries);
        let counter = match key.name() {
            HEDGE => &hedges.sent,
            HEDGE_WON => &hedges.won,
            HEDGE_BUDGET_EXHAUSTED => &hedges.refused,
            RETRY => &retries.sent,
            RETRY_BUDGET_EXHAUSTED => &retries.refused,
            _ => return Counter::noop(),
        };
        Counter::from_arc(Arc::clone(counter))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}
