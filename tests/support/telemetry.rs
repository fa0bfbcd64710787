//! What tests see of the library's telemetry: its counters through metrics-util's debugging
//! recorder, and its closed `rpc_load_balancer.rpc` spans through a capturing `tracing` layer.
//! Installed once per process (nextest runs each test in its own). Also: dropping a call the
//! ways a caller does, and what its telemetry must then say.

use std::collections::BTreeMap;
use std::future::{Future, IntoFuture};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rpc_load_balancer::telemetry::{CANCELLED, RPC_START, RPC_STOP};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// A span's or a series' fields: name → value.
pub type Fields = BTreeMap<String, String>;

#[derive(Default)]
struct FieldMap(Fields);

impl Visit for FieldMap {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

/// Closed `rpc_load_balancer.rpc` spans, with their fields.
#[derive(Default, Clone)]
struct Spans(Arc<Mutex<Vec<Fields>>>);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Spans {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if attrs.metadata().name() == "rpc_load_balancer.rpc" {
            let mut fields = FieldMap::default();
            attrs.record(&mut fields);
            if let Some(span) = ctx.span(id) {
                span.extensions_mut().insert(fields);
            }
        }
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(fields) = span.extensions_mut().get_mut::<FieldMap>() {
                values.record(fields);
            }
        }
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            if let Some(fields) = span.extensions_mut().remove::<FieldMap>() {
                self.0.lock().unwrap().push(fields.0);
            }
        }
    }
}

/// The recorder and the span layer, installed globally.
pub struct Telemetry {
    snapshotter: Snapshotter,
    spans: Spans,
}

impl Telemetry {
    /// Installs both (before any node or balancer starts: handles are registered then).
    pub fn install() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        let spans = Spans::default();
        let filter = tracing_subscriber::filter::Targets::new()
            .with_target("rpc_load_balancer", tracing::Level::DEBUG);
        tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(spans.clone().with_filter(filter)),
        )
        .unwrap();
        Self { snapshotter, spans }
    }

    /// Every counter since the last look (the debugging recorder's snapshots take the
    /// counts).
    pub fn counters(&self) -> Counters {
        Counters(
            self.snapshotter
                .snapshot()
                .into_vec()
                .into_iter()
                .filter_map(|(key, _, _, value)| match value {
                    DebugValue::Counter(count) => Some((
                        key.key().name().to_string(),
                        key.key()
                            .labels()
                            .map(|l| (l.key().to_string(), l.value().to_string()))
                            .collect(),
                        count,
                    )),
                    _ => None,
                })
                .collect(),
        )
    }

    /// Asserts that exactly one `kind` of `function` (`node` and `load_balancer` as given)
    /// started and stopped since the last look, stopped as `cancelled`, and that its span
    /// closed saying so.
    pub fn one_cancelled(&self, kind: &str, function: &str, node: &str, balancer: &str) {
        let pairs = [
            ("type", kind),
            ("function", function),
            ("node", node),
            ("load_balancer", balancer),
        ];
        let counts = self.counters();
        let cancelled = [&pairs[..], &[("status", CANCELLED)]].concat();
        let what = format!("{kind} of {function} on {node:?} by {balancer:?}: {counts:?}");
        assert_eq!(counts.sum(RPC_START, &pairs), 1, "start of {what}");
        assert_eq!(counts.sum(RPC_STOP, &pairs), 1, "stop of {what}");
        assert_eq!(counts.sum(RPC_STOP, &cancelled), 1, "cancelled {what}");
        let spans = self.take_spans(&pairs);
        assert_eq!(spans.len(), 1, "span of {what}: {spans:?}");
        assert_eq!(
            spans[0].get("status").map(String::as_str),
            Some(CANCELLED),
            "{spans:?}"
        );
    }

    /// The closed spans whose fields include `pairs`, taken (not seen again).
    pub fn take_spans(&self, pairs: &[(&str, &str)]) -> Vec<Fields> {
        let mut spans = self.spans.0.lock().unwrap();
        let (taken, kept) = spans.drain(..).partition(|s| has(s, pairs));
        *spans = kept;
        taken
    }
}

/// Counters read at once: name, labels, count.
#[derive(Debug)]
pub struct Counters(pub Vec<(String, Fields, u64)>);

impl Counters {
    /// The sum of the counters named `name` whose labels include `pairs`.
    pub fn sum(&self, name: &str, pairs: &[(&str, &str)]) -> u64 {
        self.0
            .iter()
            .filter(|(n, labels, _)| n == name && has(labels, pairs))
            .map(|(.., count)| count)
            .sum()
    }
}

/// Whether `fields` include every pair.
pub fn has(fields: &Fields, pairs: &[(&str, &str)]) -> bool {
    pairs
        .iter()
        .all(|(k, v)| fields.get(*k).map(String::as_str) == Some(*v))
}

/// How long a dropped call runs before its caller gives up on it.
pub const GIVE_UP: Duration = Duration::from_millis(300);

/// Polls `call` until [`GIVE_UP`] has passed, then drops it (an outer timeout).
pub async fn time_out<F: IntoFuture>(call: F) {
    let outcome = tokio::time::timeout(GIVE_UP, call.into_future()).await;
    assert!(outcome.is_err(), "the call ended before its caller gave up");
}

/// Runs `call` on its own task and aborts the task after [`GIVE_UP`].
pub async fn abort<F>(call: F)
where
    F: IntoFuture,
    F::IntoFuture: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let task = tokio::spawn(call.into_future());
    tokio::time::sleep(GIVE_UP).await;
    task.abort();
    let ended = task.await;
    assert!(
        ended.is_err_and(|e| e.is_cancelled()),
        "the call ended before it was aborted"
    );
}
