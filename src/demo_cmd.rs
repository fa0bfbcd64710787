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
use rpc_load_balancer::{Algorithm, Balancer, BalancerConfig, LeastCpu, NodeConfig};
use serde_json::json;

use crate::cli::DemoArgs;
use crate::harness::Cluster;
use crate::interrupt::Interrupt;
use crate::load::{self, Amount, DemoCall, LoadReport};
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

/// How every demo node samples its CPU (`rpclb node --cpu-sampler`, every
/// [`DEMO_SAMPLE_INTERVAL`]): this process's CPU, 5 times a second, so LeastCpu sees a burning
/// node within a fraction of a second.
const DEMO_SAMPLER: &str = "process";

/// The demo nodes' `cpu_sample_interval`.
pub(crate) const DEMO_SAMPLE_INTERVAL: Duration = Duration::from_millis(200);

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
pub(crate) fn demo_algorithm(name: &str) -> Result<Arc<dyn Algorithm>, rpc_load_balancer::Error> {
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

/// The demo's exit status when Ctrl-C (SIGINT) or SIGTERM cut it short.
pub const INTERRUPTED: i32 = 130;

/// Runs the demo; exit status 0 when every call succeeded, 1 when a call failed, 2 on a usage
/// error, [`INTERRUPTED`] (130) on Ctrl-C or SIGTERM: the report then covers what ran so far
/// (the cut run with the calls that had ended), and the nodes are stopped all the same.
pub async fn run(args: DemoArgs) -> CmdResult<i32> {
    if let Some(scenario) = args.scenario.clone() {
        return crate::twin::run(args, &scenario).await;
    }
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
    let interrupt = Interrupt::listen()?;
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
            let burning = args.burn == Some(i);
            let sampler = match &args.burn_sampler {
                Some(sampler) if burning => sampler.to_string(),
                _ => DEMO_SAMPLER.to_string(),
            };
            let mut node: Vec<String> = [
                "--balancer",
                DEMO_BALANCER,
                "--cpu-sampler",
                &sampler,
                "--cpu-sample-interval-ms",
                &DEMO_SAMPLE_INTERVAL.as_millis().to_string(),
            ]
            .map(String::from)
            .to_vec();
            if burning {
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
    // Interrupted while they start: the children started so far are killed when dropped.
    let cluster = tokio::select! {
        cluster = Cluster::start_each(&bin, &node_args) => cluster?,
        () = interrupt.wait() => return Ok(interrupted_early(&args, &[])),
    };
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
    let node = tokio::select! {
        node = cluster.join_with(demo_node, Duration::from_secs(10)) => node?,
        () = interrupt.wait() => {
            let names = cluster.names();
            cluster.shutdown().await;
            return Ok(interrupted_early(&args, &names));
        }
    };
    // CallDirect runs calls on this node: it serves the demo functions too.
    crate::functions::register_all(&node, Duration::ZERO)?;
    let timeout = Duration::from_millis(args.shape.timeout_ms);
    let names = cluster.names();
    let mut reports = Vec::new();
    let mut failed = false;
    for name in algorithms {
        // A client-only balancer: this process selects and calls, the children serve.
        let config = BalancerConfig::new(DEMO_BALANCER)
            .algorithm_arc(demo_algorithm(name)?)
            .node_match_list(Vec::<String>::new());
        let balancer = Balancer::start(config).await?;
        let least_cpu = name == "least_cpu";
        let prepared = tokio::select! {
            prepared = prepare(&balancer, count, least_cpu, &names) => Some(prepared),
            () = interrupt.wait() => None,
        };
        // Interrupted before its first call: reported as a run cut at 0 calls.
        let (mut report, cut) = match prepared {
            Some(prepared) => {
                prepared?;
                load::run_until(
                    &balancer,
                    &DemoCall::Whoami,
                    Amount::Calls(args.calls),
                    args.shape.concurrency,
                    timeout,
                    !args.shape.json,
                    interrupt.wait(),
                )
                .await
            }
            None => (
                LoadReport {
                    algorithm: balancer.algorithm_name().to_string(),
                    ..LoadReport::default()
                },
                true,
            ),
        };
        // Every child is listed, with 0 when it got no call (LeastCpu avoiding a burning
        // node, CallDirect serving every call here).
        report.list_nodes(&names);
        let readings = least_cpu.then(|| readings_of(&names));
        balancer.stop().await;
        failed |= report.error_count() > 0;
        if !args.shape.json {
            if cut {
                println!(
                    "{name}: interrupted after {} of {} calls",
                    report.calls, args.calls
                );
            }
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
        value["interrupted"] = json!(cut);
        if let Some(readings) = readings {
            value["cpu_readings"] = json!(readings);
        }
        reports.push(value);
        if cut {
            break;
        }
    }
    let metrics = recorder.map(|handle| {
        handle.run_upkeep();
        handle.render()
    });
    let interrupted = interrupt.raised();
    if args.shape.json {
        let mut value = json!({
            "nodes": names,
            "calls": args.calls,
            "concurrency": args.shape.concurrency,
            "algorithms": reports,
            "interrupted": interrupted,
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
    Ok(if interrupted {
        eprintln!("interrupted: the nodes are stopped");
        INTERRUPTED
    } else if failed {
        1
    } else {
        0
    })
}

/// Waits (≤ 10 s) for `count` members of `balancer`, and for LeastCpu for a fresh reading of
/// every node of `names` (a warning if some do not come).
///
/// Errors: [`rpc_load_balancer::Error::NoMembers`] when the members do not come.
async fn prepare(
    balancer: &Balancer,
    count: usize,
    least_cpu: bool,
    names: &[String],
) -> Result<(), rpc_load_balancer::Error> {
    load::wait_for_members(balancer, count, Duration::from_secs(10)).await?;
    if least_cpu && !wait_for_readings(names, Duration::from_secs(10)).await {
        eprintln!(
            "warning: not every node's CPU reading arrived within 10 s; missing ones count as 50 %"
        );
    }
    Ok(())
}

/// Reports an interruption before any run (the nodes `names` started, if any, are stopped):
/// with `--json` the document with no algorithm run; [`INTERRUPTED`].
fn interrupted_early(args: &DemoArgs, names: &[String]) -> i32 {
    if args.shape.json {
        let value = json!({
            "nodes": names,
            "calls": args.calls,
            "concurrency": args.shape.concurrency,
            "algorithms": [],
            "interrupted": true,
        });
        println!("{value}");
    }
    eprintln!("interrupted before the first run: the nodes are stopped");
    INTERRUPTED
}
