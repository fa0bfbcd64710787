//! Traces across nodes, printed to stdout: run with
//! `cargo run -p rpclb_tracing_example --example tracing_across_nodes`.
//!
//! Installs OpenTelemetry's stdout exporter and the example's trace propagator, then a node
//! sends itself a cast: the spans printed — `request`, `rpc_load_balancer.rpc` (the caller's
//! side), `rpc_load_balancer.serve` (the serving side) and `greet` — share one trace id, and
//! each names its parent. See docs/how-to/tracing-across-nodes.md.

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let provider = rpclb_tracing_example::install(opentelemetry_stdout::SpanExporter::default());
    rpclb_tracing_example::demo().await?;
    provider.shutdown()?;
    Ok(())
}
