//! The example's propagator puts both sides of a cast in one trace: the serving node's
//! `rpc_load_balancer.serve` span is a child of the caller's `rpc_load_balancer.rpc` span, and
//! the function's span of the serving one (spans captured by OpenTelemetry's in-memory
//! exporter).

use opentelemetry_sdk::trace::InMemorySpanExporter;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_sides_of_a_cast_share_one_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = rpclb_tracing_example::install(exporter.clone());
    rpclb_tracing_example::demo().await.unwrap();
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let find = |name: &str| {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no span {name} in {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let (request, rpc) = (find("request"), find("rpc_load_balancer.rpc"));
    let (serve, greet) = (find("rpc_load_balancer.serve"), find("greet"));
    let trace = request.span_context.trace_id();
    for span in [rpc, serve, greet] {
        assert_eq!(
            span.span_context.trace_id(),
            trace,
            "{} in another trace",
            span.name
        );
    }
    assert_eq!(rpc.parent_span_id, request.span_context.span_id());
    assert_eq!(serve.parent_span_id, rpc.span_context.span_id());
    assert_eq!(greet.parent_span_id, serve.span_context.span_id());
    provider.shutdown().unwrap();
}
