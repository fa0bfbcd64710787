//! Counting how often balanced calls waited on an empty pool, for tests: a `tracing` layer
//! that counts, per balancer, the library's DEBUG event "nobody to send to; waiting to select
//! again" (target `rpc_load_balancer::balancer::call`, one per wait). A call's attempts are
//! its waits + 1. These are logs, not metrics: the count works with or without the library's
//! `telemetry` feature.
//!
//! ```no_run
//! # async fn demo() {
//! let waits = rpclb::retry_waits::RetryWaits::install();
//! // ... a call through balancer "work" that found nobody twice, then a member ...
//! assert_eq!(waits.take("work"), 2); // 3 attempts
//! # }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// The module whose events are counted (the balanced call path).
const TARGET: &str = "rpc_load_balancer::balancer::call";

/// Waits on an empty pool seen so far, per balancer name. Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct RetryWaits {
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl RetryWaits {
    /// Installs a global `tracing` subscriber that only counts these waits, and returns the
    /// counts.
    ///
    /// Panics if a global subscriber is already set (one per test process).
    pub fn install() -> Self {
        let waits = Self::default();
        let filter = Targets::new().with_target(TARGET, tracing::Level::DEBUG);
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(waits.clone().with_filter(filter)),
        )
        .expect("no global tracing subscriber set yet");
        waits
    }

    /// Waits of calls and casts through `balancer` so far.
    pub fn count(&self, balancer: &str) -> usize {
        self.lock().get(balancer).copied().unwrap_or(0)
    }

    /// Waits of calls and casts through `balancer` so far; the count restarts at 0.
    pub fn take(&self, balancer: &str) -> usize {
        self.lock().remove(balancer).unwrap_or(0)
    }

    /// Waits (polling every 5 ms, at most `timeout`) until `balancer` has waited at least
    /// `count` times; whether it did.
    pub async fn wait_for(&self, balancer: &str, count: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.count(balancer) < count {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `balancer` field of an event.
#[derive(Default)]
struct BalancerField(Option<String>);

impl Visit for BalancerField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "balancer" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "balancer" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: Subscriber> Layer<S> for RetryWaits {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        if event.metadata().target() != TARGET {
            return;
        }
        let mut balancer = BalancerField::default();
        event.record(&mut balancer);
        if let Some(name) = balancer.0 {
            *self.lock().entry(name).or_default() += 1;
        }
    }
}
