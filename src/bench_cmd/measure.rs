//! One bench run on a node joined to the children: set up the targets, run every payload
//! size by the plan, and print the report (JSON or tables).

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{Node, NodeConfig};

use super::plan::{bench_size, Plan, SizeResult};
use super::targets::{find_targets, start_balancers, Targets};
use super::READY_TIMEOUT;
use crate::cli::{BenchArgs, RuntimeSettings};
use crate::harness::Cluster;
use crate::load;
use crate::CmdResult;

/// Joins the cluster, measures every payload size, prints the report; `Ok(true)` when no
/// call failed.
pub(super) async fn measure(
    cluster: &Cluster,
    args: &BenchArgs,
    runtime: RuntimeSettings,
) -> CmdResult<bool> {
    let names = cluster.names();
    let [_, first, second] = names.as_slice() else {
        return Err(format!("expected 3 nodes, have {}", names.len()).into());
    };
    let target_names: [Arc<str>; 2] = [Arc::from(first.as_str()), Arc::from(second.as_str())];
    let node = cluster
        .join_with(
            NodeConfig::new("rpclb-bench", "127.0.0.1:0").client(true),
            READY_TIMEOUT,
        )
        .await?;
    let outcome = measure_on(&node, cluster, args, runtime, target_names).await;
    node.shutdown().await;
    outcome
}

/// A finished run, as its report (`json` or `table`) shows it.
pub(super) struct Report<'a> {
    /// The children.
    pub(super) cluster: &'a Cluster,
    /// The bench node.
    pub(super) node: &'a Node,
    /// The two targets' full names.
    pub(super) names: &'a [Arc<str>; 2],
    /// The flags.
    pub(super) args: &'a BenchArgs,
    /// This process's runtime.
    pub(super) runtime: RuntimeSettings,
    /// The settings the flags gave.
    pub(super) plan: &'a Plan,
    /// Per payload size, in `plan.sizes` order.
    pub(super) results: &'a [SizeResult],
    /// Calls that failed, warm-ups included.
    pub(super) errors: u64,
}

/// [`measure`] on the joined `node`.
async fn measure_on(
    node: &Node,
    cluster: &Cluster,
    args: &BenchArgs,
    runtime: RuntimeSettings,
    names: [Arc<str>; 2],
) -> CmdResult<bool> {
    // `local` runs BytesEcho here: register before joining a balancer.
    crate::functions::register_all(node, Duration::ZERO)?;
    let (balanced, local) = start_balancers(&names).await?;
    let raw = find_targets(node, &names).await?;
    let targets = Arc::new(Targets {
        node: node.clone(),
        names: names.clone(),
        raw,
        balanced,
        local,
        timeout: Duration::from_millis(args.shape.timeout_ms),
    });
    let plan = Plan::of(args);
    if !args.shape.json {
        eprintln!(
            "measuring from {} against {} and {} ...",
            node.name(),
            names[0],
            names[1]
        );
    }
    let bar = load::progress_bar(plan.steps(), false, "bench");
    let mut results = Vec::new();
    for &bytes in &plan.sizes {
        results.push(bench_size(&targets, &plan, bytes, &bar).await);
    }
    bar.finish_and_clear();
    targets.balanced.stop().await;
    targets.local.stop().await;
    let errors: u64 = results
        .iter()
        .map(|r| r.sequential.errors() + r.throughput.errors())
        .sum();
    let report = Report {
        cluster,
        node,
        names: &names,
        args,
        runtime,
        plan: &plan,
        results: &results,
        errors,
    };
    if args.shape.json {
        println!("{}", report.to_json());
    } else {
        report.print_tables();
    }
    Ok(errors == 0)
}
