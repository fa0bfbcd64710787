//! Traces across nodes with OpenTelemetry: a [`TracePropagator`] for `rpc_load_balancer` made
//! with `tracing-opentelemetry` and the W3C Trace Context propagator of `opentelemetry_sdk`,
//! and a small demo that the example (`examples/tracing_across_nodes.rs`) and the test run.
//!
//! Copy [`OtelPropagator`] into an application that exports its `tracing` spans with
//! `tracing-opentelemetry`: install it once per process with
//! [`set_trace_propagator`](rpc_load_balancer::telemetry::set_trace_propagator), before the node
//! starts, and a served call's `rpc_load_balancer.serve` span becomes a child of the caller's
//! `rpc_load_balancer.rpc` span — one trace across both nodes. (docs/how-to/tracing-across-nodes.md)

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter};
use rpc_load_balancer::telemetry::{TraceContext, TracePropagator};
use rpc_load_balancer::{Error, FunctionError, Node, NodeConfig, RemoteFunction};
use tokio::sync::mpsc;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

/// The propagator: W3C Trace Context, read from and written to a span's OpenTelemetry
/// context.
#[derive(Debug, Default)]
pub struct OtelPropagator(TraceContextPropagator);

impl TracePropagator for OtelPropagator {
    fn inject(&self, span: &Span) -> Option<TraceContext> {
        // The span's OpenTelemetry context (invalid, so nothing is written, when the span is
        // disabled or was not sampled).
        let mut carrier = HashMap::new();
        self.0.inject_context(&span.context(), &mut carrier);
        let traceparent = carrier.get("traceparent")?;
        TraceContext::new(traceparent, carrier.get("tracestate").map(String::as_str))
    }

    fn extract(&self, context: &TraceContext, span: &Span) {
        let mut carrier = HashMap::new();
        carrier.insert("traceparent".to_owned(), context.traceparent().to_owned());
        if let Some(state) = context.tracestate() {
            carrier.insert("tracestate".to_owned(), state.to_owned());
        }
        // The caller's span becomes the parent (`add_link` would keep two traces, linked).
        let _ = span.set_parent(self.0.extract(&carrier));
    }
}

/// Installs `exporter` (through a simple span processor: each span exported when it ends) as
/// the OpenTelemetry pipeline of this process's `tracing` spans — the library's at DEBUG, the
/// demo's at INFO — and [`OtelPropagator`] as the library's trace propagator. Returns the
/// provider: shut it down (or flush it) before the process ends.
///
/// Panics when a `tracing` subscriber or a trace propagator is installed already.
pub fn install(exporter: impl SpanExporter + 'static) -> SdkTracerProvider {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .build();
    let tracer = provider.tracer("rpclb_tracing_example");
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("rpc_load_balancer", tracing::Level::DEBUG)
        .with_target("rpclb_tracing_example", tracing::Level::INFO)
        .with_target("tracing_across_nodes", tracing::Level::INFO);
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(tracer))
        .with(filter);
    tracing::subscriber::set_global_default(subscriber).expect("no subscriber installed yet");
    rpc_load_balancer::telemetry::set_trace_propagator(OtelPropagator::default())
        .expect("no trace propagator installed yet");
    provider
}

/// `greet`: logs its argument inside a span of its own, then says it is done.
struct Greet(mpsc::UnboundedSender<()>);

impl RemoteFunction for Greet {
    const NAME: &'static str = "greet";
    type Args = String;
    type Reply = ();
    async fn call(&self, name: String) -> Result<(), FunctionError> {
        let span = tracing::info_span!("greet", %name);
        span.in_scope(|| tracing::info!("hello, {name}"));
        drop(span);
        let _ = self.0.send(());
        Ok(())
    }
}

/// The demo: a node sends itself a cast of `greet` inside a span `request`. A cast goes
/// through the wire format and the serving endpoint even to this node, so the trace shows
/// `request` → `rpc_load_balancer.rpc` (the caller's side) → `rpc_load_balancer.serve` (the
/// serving side, parented by the propagated context) → `greet`. (A call to this node would run
/// in place, its spans nested without propagation; with two nodes it is the same trace.)
///
/// Errors: the node does not start, or the cast is not served within 5 s
/// ([`Error::RequestTimeout`]).
pub async fn demo() -> Result<(), Error> {
    let node = Node::start(NodeConfig::new("traced", "127.0.0.1:0").cookie("example")).await?;
    let (served, mut done) = mpsc::unbounded_channel();
    node.register(Greet(served))?;
    let request = tracing::info_span!("request");
    let cast = node.cast::<Greet>(node.name(), "world".to_owned());
    tracing::Instrument::instrument(cast, request).await?;
    let waited = tokio::time::timeout(Duration::from_secs(5), done.recv()).await;
    node.shutdown().await;
    match waited {
        Ok(Some(())) => Ok(()),
        _ => Err(Error::RequestTimeout {
            node: "traced".into(),
            timeout: Duration::from_secs(5),
        }),
    }
}
