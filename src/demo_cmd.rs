//! `rpclb demo`: a real cluster on this machine in one command. Starts `rpclb node` children
//! on 127.0.0.1 (each a member of balancer `demo`), joins them as a client node, routes
//! calls through the balancer with each algorithm, prints a table per algorithm, and stops the
//! children.

use std::time::Duration;

use rpc_load_balancer::algorithm::{self, BUILT_IN};
use rpc_load_balancer::{Balancer, BalancerConfig};
use serde_json::json;

use crate::cli::DemoArgs;
use crate::harness::Cluster;
use crate::load::{self, Amount, DemoCall};
use crate::CmdResult;

/// The balancer the demo's nodes serve.
pub const DEMO_BALANCER: &str = "demo";

/// Installs a Prometheus recorder (no listener) with the library's buckets.
fn install_recorder() -> CmdResult<metrics_exporter_prometheus::PrometheusHandle> {
    let mut builder = metrics_exporter_prometheus::PrometheusBuilder::new();
    for series in rpc_load_balancer::telemetry::describe() {
        if let Some(buckets) = series.buckets {
            let matcher = metrics_exporter_prometheus::Matcher::Full(series.name.to_string());
            builder = builder.set_buckets_for_metric(matcher, buckets)?;
        }
    }
    let handle = builder.install_recorder()?;
    rpc_load_balancer::telemetry::register_descriptions();
    Ok(handle)
}

/// Runs the demo; exit status 0 when every call succeeded.
pub async fn run(args: DemoArgs) -> CmdResult<i32> {
    let algorithms: Vec<&str> = if args.algorithm == "all" {
        BUILT_IN.to_vec()
    } else {
        algorithm::by_name(&args.algorithm)?;
        vec![args.algorithm.as_str()]
    };
    let bin = std::env::current_exe()?;
    let count = args.nodes as usize;
    if !args.shape.json {
        eprintln!("starting {count} nodes on 127.0.0.1 ...");
    }
    // The recorder goes first: balancers register their handles with it as they start.
    let recorder = if args.metrics {
        Some(install_recorder()?)
    } else {
        None
    };
    let cluster = Cluster::start(&bin, count, &["--balancer", DEMO_BALANCER]).await?;
    let node = cluster.join("rpclb-demo", Duration::from_secs(10)).await?;
    // CallDirect runs calls on this node: it serves the demo functions too.
    crate::functions::register_all(&node, Duration::ZERO)?;
    let timeout = Duration::from_millis(args.shape.timeout_ms);
    let mut reports = Vec::new();
    let mut failed = false;
    for name in algorithms {
        // A client-only balancer: this process selects and calls, the children serve.
        let config = BalancerConfig::new(DEMO_BALANCER)
            .algorithm_arc(algorithm::by_name(name)?)
            .node_match_list(Vec::<String>::new());
        let balancer = Balancer::start(config).await?;
        load::wait_for_members(&balancer, count, Duration::from_secs(10)).await?;
        let report = load::run(
            &balancer,
            &DemoCall::Whoami,
            Amount::Calls(args.calls),
            args.shape.concurrency,
            timeout,
            !args.shape.json,
        )
        .await;
        balancer.stop().await;
        failed |= report.error_count() > 0;
        if !args.shape.json {
            println!("{}", report.to_table());
        }
        reports.push(report);
    }
    let metrics = recorder.map(|handle| {
        handle.run_upkeep();
        handle.render()
    });
    if args.shape.json {
        let mut value = json!({
            "nodes": cluster.names(),
            "calls": args.calls,
            "concurrency": args.shape.concurrency,
            "algorithms": reports.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
        });
        if let Some(metrics) = &metrics {
            value["metrics"] = json!(metrics);
        }
        println!("{value}");
    } else if let Some(metrics) = &metrics {
        println!("metrics recorded by this process (Prometheus text):\n{metrics}");
    }
    node.shutdown().await;
    cluster.shutdown().await;
    Ok(if failed { 1 } else { 0 })
}
