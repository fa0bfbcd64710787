//! Export the library's metrics to Prometheus.
//!
//! ```text
//! cargo run --example prometheus -- [--listen 127.0.0.1:9898] [--calls 2000] [--serve-secs 60]
//! curl -s http://127.0.0.1:9898/metrics | grep rpc_load_balancer
//! ```
//!
//! It installs metrics-exporter-prometheus with an HTTP listener, configures the histogram
//! buckets from `telemetry::describe()` (buckets belong to the exporter in the `metrics` crate),
//! registers the series descriptions, then starts a node with a balancer — after the recorder,
//! so per-member handles register with it — makes some calls and serves the scrape endpoint.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use rpc_load_balancer::telemetry::{describe, register_descriptions};
use rpc_load_balancer::{
    Balancer, BalancerConfig, FunctionError, Node, NodeConfig, RemoteFunction, RoundRobin,
};
use tracing_subscriber::EnvFilter;

struct Echo;
impl RemoteFunction for Echo {
    const NAME: &'static str = "echo";
    type Args = String;
    type Reply = String;
    async fn call(&self, text: String) -> Result<String, FunctionError> {
        Ok(text)
    }
}

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's warnings (an unreachable peer, a refused connection) on stderr.
    // RUST_LOG sets the level: RUST_LOG=error quiets them, RUST_LOG=debug shows more.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new("warn,ractor_cluster=error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let listen: SocketAddr = arg("--listen", "127.0.0.1:9898".parse()?);
    let calls: u32 = arg("--calls", 2000);
    let serve = Duration::from_secs(arg("--serve-secs", 60));

    // 1. The exporter, with the library's histogram buckets.
    let mut builder = PrometheusBuilder::new().with_http_listener(listen);
    for series in describe() {
        if let Some(buckets) = series.buckets {
            builder =
                builder.set_buckets_for_metric(Matcher::Full(series.name.to_string()), buckets)?;
        }
    }
    builder.install()?;
    register_descriptions();

    // 2. A node and a balancer (after the recorder), and some traffic.
    let node =
        Node::start(NodeConfig::new("prometheus-example", "127.0.0.1:0").cookie("example")).await?;
    node.register(Echo)?;
    let balancer =
        Balancer::start(BalancerConfig::new("example").algorithm(RoundRobin::new())).await?;
    for i in 0..calls {
        balancer.call::<Echo>(format!("call {i}")).await?;
    }

    // 3. Serve the scrape endpoint for a while.
    println!("ready: curl -s http://{listen}/metrics | grep rpc_load_balancer");
    tokio::time::sleep(serve).await;
    balancer.stop().await;
    node.shutdown().await;
    Ok(())
}
