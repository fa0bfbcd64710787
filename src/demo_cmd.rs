//! `rpclb demo`: a real cluster on this machine in one command. Starts `rpclb node` children
//! on 127.0.0.1 (each a member of balancer `demo`, sampling its process's CPU every 200 ms),
//! joins them as a client node, routes calls through the balancer with each algorithm, prints
//! a table per algorithm, and stops the children. With `--burn N`, node N spins one thread per
//! core, and LeastCpu (polling every 200 ms, readings trusted for 1 s) steers calls away
//! from it.

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::algorithm::{self, BUILT_IN};
use rpc_load_balancer::cpu::CpuSampler;
use rpc_load_balancer::{Balancer, BalancerConfig, LeastCpu, NodeConfig, SelectionAlgorithm};
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

/// How every demo node samples its CPU (`rpclb node` flags): this process's CPU, 5 times a
/// second, so LeastCpu sees a burning node within a fraction of a second.
const DEMO_SAMPLER: [&str; 4] = [
    "--cpu-sampler",
    "process",
    "--cpu-sample-interval-ms",
    "200",
];

/// The demo nodes' `cpu_sample_interval` (as in [`DEMO_SAMPLER`]).
const DEMO_SAMPLE_INTERVAL: Duration = Duration::from_millis(200);

/// The demo's LeastCpu: polls every 200 ms from the start, trusts readings up to 1 s old.
fn demo_least_cpu() -> LeastCpu {
    LeastCpu::new()
        .poll_interval(Duration::from_millis(200))
        .poll_startup_jitter(Duration::ZERO)
        .cpu_cache_ttl(DEMO_CPU_TTL)
}

/// The demo LeastCpu's `cpu_cache_ttl`.
const DEMO_CPU_TTL: Duration = Duration::from_millis(1_000);

/// The algorithm called `name` as the demo runs it.
fn demo_algorithm(name: &str) -> Result<Arc<dyn SelectionAlgorithm>, rpc_load_balancer::Error> {
    if name == "least_cpu" {
        return Ok(Arc::new(demo_least_cpu()));
    }
    algorithm::by_name(name)
}

/// Waits (≤ `timeout`) until this process holds a reading younger than the demo's TTL for
/// every node of `nodes`; `false` if some are still missing then.
async fn wait_for_readings(nodes: &[String], timeout: Duration) -> bool {
    let fresh = || {
        let readings = rpc_load_balancer::cpu::readings();
        nodes.iter().all(|node| {
            readings
                .iter()
                .any(|(n, r)| n == node && r.age_ms <= DEMO_CPU_TTL.as_millis() as u64)
        })
    };
    tokio::time::timeout(timeout, async {
        while !fresh() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .is_ok()
}

/// The readings this process holds for `nodes`, as `{node: {"cpu","age_ms"}}`.
fn readings_of(nodes: &[String]) -> serde_json::Map<String, serde_json::Value> {
    rpc_load_balancer::cpu::readings()
        .into_iter()
        .filter(|(node, _)| nodes.contains(node))
        .map(|(node, r)| (node, json!({"cpu": r.cpu, "age_ms": r.age_ms})))
        .collect()
}

/// Runs the demo; exit status 0 when every call succeeded, 2 on a usage error.
pub async fn run(args: DemoArgs) -> CmdResult<i32> {
    let algorithms: Vec<&str> = if args.algorithm == "all" {
        BUILT_IN.to_vec()
    } else {
        algorithm::by_name(&args.algorithm)?;
        vec![args.algorithm.as_str()]
    };
    if let Some(burn) = args.burn {
        if burn > args.nodes {
            let message = format!(
                "--burn {burn} names no node: there are {} (1 = the first)",
                args.nodes
            );
            eprintln!("error: {message}");
            if args.shape.json {
                let usage = crate::client_cmd::CmdFailure::Usage(message);
                println!(
                    "{}",
                    serde_json::json!({"ok": false, "error": usage.to_json()})
                );
            }
            return Ok(2);
        }
    }
    let bin = std::env::current_exe()?;
    let count = args.nodes as usize;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !args.shape.json {
        eprintln!("starting {count} nodes on 127.0.0.1 ...");
    }
    // The recorder goes first: balancers register their handles with it as they start.
    let recorder = if args.metrics {
        Some(install_recorder()?)
    } else {
        None
    };
    let node_args: Vec<Vec<String>> = (1..=args.nodes)
        .map(|i| {
            let mut node = vec!["--balancer".to_string(), DEMO_BALANCER.to_string()];
            node.extend(DEMO_SAMPLER.iter().map(|a| a.to_string()));
            if args.burn == Some(i) {
                node.extend(["--burn-threads".to_string(), cores.to_string()]);
            }
            node
        })
        .collect();
    let node_args: Vec<Vec<&str>> = node_args
        .iter()
        .map(|a| a.iter().map(String::as_str).collect())
        .collect();
    let node_args: Vec<&[&str]> = node_args.iter().map(Vec::as_slice).collect();
    let cluster = Cluster::start_each(&bin, &node_args).await?;
    let burning = args
        .burn
        .and_then(|i| cluster.names().get(i as usize - 1).cloned());
    if let (Some(burning), false) = (&burning, args.shape.json) {
        eprintln!(
            "{burning} burns {cores} threads (--burn {})",
            args.burn.unwrap_or(1)
        );
    }
    // This node samples as its children do: LeastCpu's 1 s TTL must exceed its interval.
    let demo_node = NodeConfig::new("rpclb-demo", "127.0.0.1:0")
        .cpu_sampler(CpuSampler::Process)
        .cpu_sample_interval(DEMO_SAMPLE_INTERVAL);
    let node = cluster
        .join_with(demo_node, Duration::from_secs(10))
        .await?;
    // CallDirect runs calls on this node: it serves the demo functions too.
    crate::functions::register_all(&node, Duration::ZERO)?;
    let timeout = Duration::from_millis(args.shape.timeout_ms);
    let mut reports = Vec::new();
    let mut failed = false;
    for name in algorithms {
        // A client-only balancer: this process selects and calls, the children serve.
        let config = BalancerConfig::new(DEMO_BALANCER)
            .algorithm_arc(demo_algorithm(name)?)
            .node_match_list(Vec::<String>::new());
        let balancer = Balancer::start(config).await?;
        load::wait_for_members(&balancer, count, Duration::from_secs(10)).await?;
        let least_cpu = name == "least_cpu";
        if least_cpu && !wait_for_readings(&cluster.names(), Duration::from_secs(10)).await {
            eprintln!("warning: not every node's CPU reading arrived within 10 s; missing ones count as 50 %");
        }
        let report = load::run(
            &balancer,
            &DemoCall::Whoami,
            Amount::Calls(args.calls),
            args.shape.concurrency,
            timeout,
            !args.shape.json,
        )
        .await;
        let readings = least_cpu.then(|| readings_of(&cluster.names()));
        balancer.stop().await;
        failed |= report.error_count() > 0;
        if !args.shape.json {
            println!("{}", report.to_table());
            if let Some(readings) = &readings {
                let lines: Vec<String> = readings
                    .iter()
                    .map(|(node, r)| format!("  {node}: {} % ({} ms old)", r["cpu"], r["age_ms"]))
                    .collect();
                println!(
                    "CPU readings at the end (what least_cpu chose by):\n{}\n",
                    lines.join("\n")
                );
            }
        }
        let mut value = report.to_json();
        if let Some(readings) = readings {
            value["cpu_readings"] = json!(readings);
        }
        reports.push(value);
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
            "algorithms": reports,
        });
        if let Some(burning) = &burning {
            value["burning"] = json!(burning);
        }
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
