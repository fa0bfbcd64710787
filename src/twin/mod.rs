//! `rpclb demo --scenario NAME`: the real-process twin of a lab scenario (`slow-member`,
//! `paused-member`, `failing-member`, `new-member`, `stragglers`). It starts the scenario's members as
//! `rpclb node` children on 127.0.0.1 serving the capacity-limited `work` function
//! ([`crate::work`]: sleep-based service times, utilization as the CPU reading), and for each
//! algorithm in turn starts the caller processes ([`caller`]: `rpclb demo-caller`, open loop
//! at the lab's load fraction of the cluster's capacity), plays the scenario's fault on the
//! processes ([`plan::TwinFault`]: a slow member from its start, SIGSTOP/SIGCONT for a pause,
//! the `work_fault` function for a failing member, a 5th node started mid-run, every
//! member's stragglers from its start), with `--hedge` hedges the callers' calls
//! ([`hedges`]), merges the
//! callers' latencies and picks into the lab's [`RunReport`] ([`merge`]) and prints the lab's
//! table (or `--json`). With `--compare` it runs the whole thing `--runs` times and the lab on
//! the same plan (seeds 1–10), and prints for each algorithm p99 ÷ Random's p99 on both sides.
//!
//! Every child is this process's own and is killed at the end (and when it is dropped); the
//! members and callers also exit when this process dies, even by SIGKILL (each runs with
//! `--exit-with-stdin` and this process holds its stdin).

pub mod caller;
pub mod compare;
pub mod fault_window;
pub mod hedges;
pub mod merge;
pub mod plan;
mod processes;
pub mod recorder;
pub mod retries;

use rpc_load_balancer::algorithm::BUILT_IN;
use rpclb_lab::{RunReport, Summary};
use serde_json::json;

use crate::cli::DemoArgs;
use crate::interrupt::Interrupt;
use crate::lab_cmd::ScenarioResults;
use crate::CmdResult;
use plan::{Knobs, Plan};
use processes::Twin;

/// The algorithm the twin does not run (with `--algorithm all`) and refuses by name.
const NO_TWIN: &str = "call_direct";

/// Summaries of `runs` per algorithm, in `algorithms`' order (medians over the runs).
fn summaries(algorithms: &[String], runs: &[RunReport]) -> Vec<Summary> {
    algorithms
        .iter()
        .filter_map(|a| {
            let of: Vec<RunReport> = runs.iter().filter(|r| &r.algorithm == a).cloned().collect();
            Summary::of(&of)
        })
        .collect()
}

/// One line per run that hedged: the hedges sent (the extra calls' share), won and refused
/// by the budget; empty without `--hedge`.
fn hedge_lines(runs: &[RunReport]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for run in runs {
        if let Some(h) = &run.hedges {
            let _ = writeln!(
                out,
                "hedges, {} run {}: {} sent ({:.2} % extra calls), {} won, {} refused by the budget",
                run.algorithm,
                run.seed,
                h.hedges,
                h.extra_share * 100.0,
                h.won,
                h.refused_by_budget
            );
        }
    }
    out
}

/// A usage error: said on stderr (and as the `--json` document); exit status 2.
fn usage(args: &DemoArgs, message: String) -> i32 {
    eprintln!("error: {message}");
    if args.shape.json {
        let usage = crate::client_cmd::CmdFailure::Usage(message);
        println!("{}", json!({"ok": false, "error": usage.to_json()}));
    }
    2
}

/// Runs `rpclb demo --scenario NAME`; exit status 0, 2 on a usage error,
/// [`crate::demo_cmd::INTERRUPTED`] on Ctrl-C or SIGTERM (the report covers the runs that
/// ended; every child is killed).
pub async fn run(args: DemoArgs, scenario: &str) -> CmdResult<i32> {
    let knobs = Knobs {
        warmup_s: args.warmup_s,
        measure_s: args.duration_s,
        service_ms: args.service_ms,
        capacity: args.capacity,
        callers: args.callers as usize,
        load: args.load,
        hedge: args.hedge,
    };
    let plan = match Plan::new(scenario, knobs)
        .and_then(|plan| plan.with_failures(args.fail_kind, args.retries))
    {
        Ok(plan) => plan,
        Err(message) => return Ok(usage(&args, message)),
    };
    let algorithms: Vec<String> = if !args.algorithms.is_empty() {
        args.algorithms.clone()
    } else if args.algorithm == "all" {
        BUILT_IN
            .iter()
            .filter(|a| **a != NO_TWIN)
            .map(|a| a.to_string())
            .collect()
    } else {
        vec![args.algorithm.clone()]
    };
    if algorithms.iter().any(|a| a == NO_TWIN) {
        return Ok(usage(
            &args,
            format!("{NO_TWIN} has no twin: it runs each call on the calling node, and the twin's callers are not members (the lab co-locates each caller with a member)"),
        ));
    }
    if let Some(twice) = algorithms
        .iter()
        .enumerate()
        .find_map(|(i, a)| algorithms[..i].contains(a).then_some(a))
    {
        return Ok(usage(
            &args,
            format!(
                "{twice} is named twice in --algorithms (its runs would be merged into one row)"
            ),
        ));
    }
    if args.compare && !algorithms.iter().any(|a| a == "random") {
        return Ok(usage(
            &args,
            "--compare needs random among the algorithms (the ratios are to its p99)".into(),
        ));
    }
    let runs = if args.compare { args.runs } else { 1 };
    let interrupt = Interrupt::listen()?;
    let bin = std::env::current_exe()?;
    if !args.shape.json {
        eprintln!(
            "{scenario}: {} members (`rpclb node`, work: median {} ms, capacity {}) and {} caller processes at {:.0} calls/s ({} % of capacity); {} s warm-up + {} s measured per algorithm",
            plan.members, plan.median_ms(), plan.scenario.capacity, plan.scenario.callers,
            plan.rate_per_s, args.load * 100.0, args.warmup_s, args.duration_s
        );
    }
    let twin = tokio::select! {
        twin = Twin::start(&bin, &plan) => twin?,
        () = interrupt.wait() => {
            if !args.shape.json {
                println!("interrupted, nothing measured: the members were still starting");
            }
            eprintln!("interrupted: the nodes are stopped");
            return Ok(crate::demo_cmd::INTERRUPTED);
        }
    };
    let mut twin = twin;
    let mut reports = Vec::new();
    let mut failure = None;
    'runs: for run in 1..=u64::from(runs) {
        for algorithm in &algorithms {
            if !args.shape.json {
                eprintln!("run {run}/{runs}: {algorithm} ...");
            }
            tokio::select! {
                report = twin.run_once(&plan, algorithm, run) => match report {
                    Ok(report) => reports.push(report),
                    Err(error) => {
                        failure = Some(error);
                        break 'runs;
                    }
                },
                () = interrupt.wait() => break 'runs,
            }
        }
    }
    let names = twin.names.clone();
    twin.clear_fault(&plan).await;
    twin.shutdown().await;
    if let Some(error) = failure {
        return Err(error);
    }
    let interrupted = interrupt.raised();
    let summaries = summaries(&algorithms, &reports);
    let agreement = if args.compare && !interrupted {
        let lab = compare::lab_summaries(&plan, &algorithms).await?;
        Some(compare::agreement(&lab, &summaries))
    } else {
        None
    };
    let results = ScenarioResults {
        scenario: plan.scenario.clone(),
        summaries,
        runs: reports,
        notes: Vec::new(),
    };
    if args.shape.json {
        let mut value = serde_json::to_value(&results)?;
        value["nodes"] = json!(names);
        value["rate_per_s"] = json!(plan.rate_per_s);
        value["interrupted"] = json!(interrupted);
        if let Some(agreement) = &agreement {
            value["agreement"] = json!(agreement);
        }
        println!("{value}");
    } else {
        if results.runs.is_empty() {
            println!("interrupted, nothing measured: no algorithm's run ended");
        } else {
            println!(
                "real processes on 127.0.0.1 ({} nodes; rows are medians over the runs{}):",
                names.len(),
                if interrupted {
                    "; interrupted: the algorithms after the last row did not run"
                } else {
                    ""
                }
            );
            print!("{}", crate::lab_cmd::table(&results));
            print!("{}", hedge_lines(&results.runs));
        }
        if let Some(agreement) = &agreement {
            print!("{}", compare::agreement_table(agreement, runs));
        }
        print!("{}", retries::lines(&results.runs));
    }
    Ok(if interrupted {
        eprintln!("interrupted: the nodes and callers are stopped");
        crate::demo_cmd::INTERRUPTED
    } else {
        0
    })
}
