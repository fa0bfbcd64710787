//! The trace propagator on one node (issue 20 item 5): installed, it is asked for a context once
//! per call or cast that is encoded — with the call's `rpc_load_balancer.rpc` span — and never
//! for one run in this process; the serving side hands exactly that context, with its
//! `rpc_load_balancer.serve` span, to `extract`, and the function runs inside that span.
//! Across processes: tests/cluster/trace.rs.
//!
//! One `Node` and one propagator per process: nextest runs each test alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::telemetry::{set_trace_propagator, TraceContext, TracePropagator};
use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, FunctionError, Node, NodeConfig, RemoteFunction,
};
use tokio::sync::mpsc;
use tokio::time::timeout;
use tracing::Span;

/// What the recording propagator saw.
#[derive(Default)]
struct Seen {
    /// The name of the span each `inject` got, and the context it made.
    injected: Vec<(Option<&'static str>, TraceContext)>,
    /// The name of the span each `extract` got, and the context it was given.
    extracted: Vec<(Option<&'static str>, TraceContext)>,
}

/// Makes a new trace id per call (1, 2, …), records every inject and extract.
#[derive(Clone, Default)]
struct Recording {
    seen: Arc<Mutex<Seen>>,
    next: Arc<AtomicU64>,
}

impl TracePropagator for Recording {
    fn inject(&self, span: &Span) -> Option<TraceContext> {
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let parent = format!("00-{n:032x}-{:016x}-01", n + 1000);
        let context = TraceContext::new(&parent, Some("rpclb=test")).unwrap();
        let name = span.metadata().map(|m| m.name());
        let mut seen = self.seen.lock().unwrap();
        seen.injected.push((name, context.clone()));
        Some(context)
    }
    fn extract(&self, context: &TraceContext, span: &Span) {
        let name = span.metadata().map(|m| m.name());
        let mut seen = self.seen.lock().unwrap();
        seen.extracted.push((name, context.clone()));
    }
}

/// Reports the name of the span it runs in (the serving span when served from the wire).
struct SpanName(mpsc::UnboundedSender<Option<&'static str>>);
impl RemoteFunction for SpanName {
    const NAME: &'static str = "span_name";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        let _ = self.0.send(Span::current().metadata().map(|m| m.name()));
        Ok(())
    }
}

/// Bound on each wait (a debug build on 2 shared cores serves in milliseconds).
const WAIT: Duration = Duration::from_secs(5);

/// The span name the next run of `span_name` reported.
async fn next_run(
    runs: &mut mpsc::UnboundedReceiver<Option<&'static str>>,
) -> Option<&'static str> {
    let next = timeout(WAIT, runs.recv()).await;
    next.expect("the function ran").expect("the node is up")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_runs_once_per_encoded_call_and_extract_gets_exactly_its_context() {
    // Spans enabled, so the propagator sees which span it is given.
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target("rpc_load_balancer", tracing::Level::DEBUG);
    use tracing_subscriber::layer::SubscriberExt;
    let subscriber = tracing_subscriber::registry().with(filter);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let recording = Recording::default();
    set_trace_propagator(recording.clone()).unwrap();
    // Once per process.
    assert!(matches!(
        set_trace_propagator(Recording::default()),
        Err(Error::InvalidConfig {
            option: "trace_propagator",
            ..
        })
    ));

    let node = Node::start(NodeConfig::new("traced", "127.0.0.1:0").cookie("traced"))
        .await
        .unwrap();
    let (ran, mut ran_in) = mpsc::unbounded_channel();
    node.register(SpanName(ran)).unwrap();
    let seen = || {
        let seen = recording.seen.lock().unwrap();
        (seen.injected.len(), seen.extracted.len())
    };
    const SERVE: Option<&str> = Some("rpc_load_balancer.serve");
    const RPC: Option<&str> = Some("rpc_load_balancer.rpc");

    // A call to this node runs here (on a task of its own, outside any span): nothing is
    // encoded, the propagator is not asked.
    node.call::<SpanName>(node.name(), ()).await.unwrap();
    assert_eq!((next_run(&mut ran_in).await, seen()), (None, (0, 0)));

    // A direct cast goes through the endpoint: one inject, one extract of that context, and
    // the function runs in the serving span (extract is called before it runs).
    node.cast::<SpanName>(node.name(), ()).await.unwrap();
    assert_eq!((next_run(&mut ran_in).await, seen()), (SERVE, (1, 1)));

    // A balanced cast to the local member (served by the endpoint, counted): the same.
    let balancer = Balancer::start(BalancerConfig::new("traced"))
        .await
        .unwrap();
    balancer.wait_for_members(1, WAIT).await.unwrap();
    balancer.cast::<SpanName>(()).await.unwrap();
    assert_eq!((next_run(&mut ran_in).await, seen()), (SERVE, (2, 2)));
    // A balanced call to the local member runs here: not asked.
    balancer.call::<SpanName>(()).await.unwrap();
    assert_eq!((next_run(&mut ran_in).await, seen()), (None, (2, 2)));

    let seen = recording.seen.lock().unwrap();
    for (span, _) in &seen.injected {
        assert_eq!(*span, RPC, "inject is given the call's span");
    }
    for ((_, injected), (span, extracted)) in seen.injected.iter().zip(&seen.extracted) {
        assert_eq!(injected, extracted, "extract got another context");
        assert_eq!(*span, SERVE, "extract is given the serving span");
    }
    assert_ne!(seen.injected[0].1.trace_id(), seen.injected[1].1.trace_id());
    assert_eq!(seen.extracted[0].1.tracestate(), Some("rpclb=test"));
}
