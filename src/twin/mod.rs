//! `rpclb demo --scenario NAME`: the real-process twin of a lab scenario (`slow-member`,
//! `paused-member`, `failing-member`, `new-member`). It starts the scenario's members as
//! `rpclb node` children on 127.0.0.1 serving the capacity-limited `work` function
//! ([`crate::work`]: sleep-based service times, utilization as the CPU reading), and for each
//! algorithm in turn starts the caller processes ([`caller`]: `rpclb demo-caller`, open loop
//! at the lab's load fraction of the cluster's capacity), plays the scenario's fault on the
//! processes ([`plan::TwinFault`]: a slow member from its start, SIGSTOP/SIGCONT for a pause,
//! the `work_fault` function for a failing member, a 5th node started mid-run), merges the
//! callers' latencies and picks into the lab's [`RunReport`] ([`merge`]) and prints the lab's
//! table (or `--json`). With `--compare` it runs the whole thing `--runs` times and the lab on
//! the same plan (seeds 1–10), and prints for each algorithm p99 ÷ Random's p99 on both sides.
//!
//! Every child is this process's own and is killed at the end (and when it is dropped).

pub mod caller;
pub mod compare;
pub mod merge;
pub mod plan;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::algorithm::BUILT_IN;
use rpc_load_balancer::{Node, NodeConfig};
use rpclb_lab::{RunReport, Summary};
use serde_json::json;
use tokio::time::Instant;

use crate::cli::DemoArgs;
use crate::harness::{random_cookie, NodeProcess, NodeSpec};
use crate::interrupt::Interrupt;
use crate::lab_cmd::ScenarioResults;
use crate::work::{WorkFault, WorkFaultFn};
use crate::CmdResult;
use plan::{Knobs, Plan, TwinFault};

/// The time the callers get to start, join and see the members before the run's start.
const CALLER_LEAD: Duration = Duration::from_millis(3_000);

/// The algorithm the twin does not run (with `--algorithm all`) and refuses by name.
const NO_TWIN: &str = "call_direct";

/// The twin's running processes: its members, and this process's node (for `work_fault`).
struct Twin {
    bin: PathBuf,
    cookie: String,
    members: Vec<NodeProcess>,
    /// Every member's full name by lab index (the one joining later included).
    names: Vec<String>,
    seed_addr: String,
    node: Node,
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `rpclb node` arguments of member `index` of `plan` (its fault's flags included).
fn member_args(plan: &Plan, index: usize) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--balancer".into(),
        crate::demo_cmd::DEMO_BALANCER.into(),
        "--cpu-from-work".into(),
        "--cpu-sample-interval-ms".into(),
        "200".into(),
        "--work-capacity".into(),
        plan.scenario.capacity.to_string(),
        "--work-median-ms".into(),
        plan.median_ms().to_string(),
        "--work-sigma".into(),
        plan.sigma().to_string(),
        "--work-seed".into(),
        (index as u64 + 1).to_string(),
    ];
    match plan.fault {
        TwinFault::Slow { member, factor } if member == index => {
            args.extend(["--work-slow-factor".into(), factor.to_string()]);
        }
        TwinFault::Join {
            member,
            factor,
            length,
            ..
        } if member == index => {
            args.extend([
                "--work-slow-factor".into(),
                factor.to_string(),
                "--work-slow-for-ms".into(),
                length.as_millis().to_string(),
            ]);
        }
        _ => {}
    }
    args
}

impl Twin {
    /// Starts the members present at the start (`m1` first, the others dialling it) and
    /// joins them from this process.
    async fn start(bin: &Path, plan: &Plan) -> CmdResult<Twin> {
        let cookie = random_cookie();
        let spec = |i: usize| {
            member_args(plan, i)
                .into_iter()
                .fold(NodeSpec::new(format!("m{i}"), &cookie), NodeSpec::arg)
        };
        // m1 is the seed every node dials: m0, the faulty member, may pause.
        let seed = spec(1).start(bin).await?;
        let seed_addr = seed.addr().to_string();
        let mut members = vec![seed];
        for i in (0..plan.members).filter(|&i| i != 1) {
            members.push(spec(i).peer(&seed_addr).start(bin).await?);
        }
        members.sort_by_key(|m| m.node().to_string());
        let mut names: Vec<String> = members.iter().map(|m| m.node().to_string()).collect();
        for i in plan.members..plan.all_members() {
            names.push(format!("m{i}@127.0.0.1"));
        }
        let node =
            Node::start(NodeConfig::new("rpclb-demo", "127.0.0.1:0").cookie(&cookie)).await?;
        node.connect(&seed_addr).await?;
        node.wait_for_peers(plan.members, Duration::from_secs(10))
            .await?;
        Ok(Twin {
            bin: bin.to_path_buf(),
            cookie,
            members,
            names,
            seed_addr,
            node,
        })
    }

    /// Runs `algorithm` once (the `run`-th time) and merges its callers' reports.
    async fn run_once(&mut self, plan: &Plan, algorithm: &str, run: u64) -> CmdResult<RunReport> {
        let start_unix = unix_ms() + CALLER_LEAD.as_millis() as u64;
        let start = Instant::now() + CALLER_LEAD;
        let callers = plan.scenario.callers;
        let timeout_ms = plan.scenario.timeout_ms.round() as u64;
        let mut children = Vec::with_capacity(callers);
        for k in 0..callers {
            let mut command = tokio::process::Command::new(&self.bin);
            command
                .args([
                    "demo-caller",
                    "--peer",
                    &self.seed_addr,
                    "--cookie",
                    &self.cookie,
                ])
                .args(["--name", &format!("caller{k}"), "--algorithm", algorithm])
                .args(["--members", &plan.members.to_string()])
                .args(["--rate", &(plan.rate_per_s / callers as f64).to_string()])
                .args(["--start-at-unix-ms", &start_unix.to_string()])
                .args(["--warmup-ms", &plan.warmup.as_millis().to_string()])
                .args(["--measure-ms", &plan.measure.as_millis().to_string()])
                .args(["--timeout-ms", &timeout_ms.to_string()])
                .args(["--seed", &(run * 1_000 + k as u64).to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            if std::env::var_os("RUST_LOG").is_none() {
                command.env("RUST_LOG", crate::DEFAULT_LOG_FILTER);
            }
            children.push(command.spawn()?);
        }
        // Each caller prints one line at its end: waiting for them in turn blocks none.
        let outputs = async {
            let mut outputs = Vec::with_capacity(children.len());
            for child in children {
                outputs.push(child.wait_with_output().await);
            }
            outputs
        };
        let limit = CALLER_LEAD
            + plan.warmup
            + plan.measure
            + Duration::from_millis(timeout_ms)
            + Duration::from_secs(30);
        let played = tokio::time::timeout(limit, async {
            tokio::join!(outputs, self.play_fault(plan, start))
        })
        .await;
        self.clear_fault(plan).await;
        let (outputs, joiner) = played
            .map_err(|_| format!("the callers did not finish within {} s", limit.as_secs()))?;
        if let Some(mut joiner) = joiner {
            joiner.kill().await;
        }
        let mut reports = Vec::with_capacity(callers);
        for output in outputs {
            let output = output?;
            let text = String::from_utf8_lossy(&output.stdout);
            let line = text.lines().last().unwrap_or_default();
            if !output.status.success() {
                return Err(format!("a caller failed ({})", output.status).into());
            }
            reports.push(serde_json::from_str::<caller::CallerReport>(line)?);
        }
        if let Some(late) = reports.iter().map(|r| r.late_ms).max().filter(|&l| l > 100) {
            eprintln!(
                "warning: a caller started {late} ms late: its window is off the fault's schedule"
            );
        }
        Ok(merge::run_report(
            plan,
            algorithm,
            run,
            &self.names,
            &reports,
        ))
    }

    /// Plays the fault at its time; the member that joined, if any.
    async fn play_fault(&self, plan: &Plan, start: Instant) -> Option<NodeProcess> {
        match plan.fault {
            TwinFault::Slow { .. } => None,
            TwinFault::Pause { member, at, length } => {
                tokio::time::sleep_until(start + at).await;
                let process = self.members.get(member)?;
                process.signal(libc::SIGSTOP);
                tokio::time::sleep(length).await;
                process.signal(libc::SIGCONT);
                None
            }
            TwinFault::Fail {
                member,
                at,
                fraction,
            } => {
                tokio::time::sleep_until(start + at).await;
                self.set_fault(
                    member,
                    WorkFault {
                        slow_factor: 1.0,
                        fail_fraction: fraction,
                    },
                )
                .await;
                None
            }
            TwinFault::Join { member, at, .. } => {
                tokio::time::sleep_until(start + at).await;
                let spec = member_args(plan, member)
                    .into_iter()
                    .fold(
                        NodeSpec::new(format!("m{member}"), &self.cookie),
                        NodeSpec::arg,
                    )
                    .peer(&self.seed_addr);
                match spec.start(&self.bin).await {
                    Ok(process) => Some(process),
                    Err(error) => {
                        eprintln!("warning: the new member did not start: {error}");
                        None
                    }
                }
            }
        }
    }

    /// Sets `fault` on member `member` (a warning if it cannot).
    async fn set_fault(&self, member: usize, fault: WorkFault) {
        let Some(name) = self.names.get(member) else {
            return;
        };
        let call = self.node.call::<WorkFaultFn>(name.clone(), fault);
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("warning: work_fault on {name}: {error}"),
            Err(_) => eprintln!("warning: work_fault on {name}: no answer within 5 s"),
        }
    }

    /// Undoes the fault after a run: a failing member heals; a paused one is resumed and
    /// awaited (≤ 15 s) until this node sees it again.
    async fn clear_fault(&self, plan: &Plan) {
        match plan.fault {
            TwinFault::Fail { member, .. } => {
                self.set_fault(
                    member,
                    WorkFault {
                        slow_factor: 1.0,
                        fail_fraction: 0.0,
                    },
                )
                .await;
            }
            TwinFault::Pause { member, .. } => {
                let (Some(process), Some(name)) =
                    (self.members.get(member), self.names.get(member))
                else {
                    return;
                };
                process.signal(libc::SIGCONT);
                let back = tokio::time::timeout(Duration::from_secs(15), async {
                    while !self.node.nodes().iter().any(|n| n == name) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                })
                .await;
                if back.is_err() {
                    eprintln!("warning: {name} did not come back within 15 s of its pause");
                }
            }
            TwinFault::Slow { .. } | TwinFault::Join { .. } => {}
        }
    }

    /// Stops this node and kills every member.
    async fn shutdown(self) {
        self.node.shutdown().await;
        // All at once, so no survivor spends its last moments redialling the others.
        for member in &self.members {
            member.signal(libc::SIGKILL);
        }
        for mut member in self.members {
            member.kill().await;
        }
    }
}

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
    };
    let plan = match Plan::new(scenario, knobs) {
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
        () = interrupt.wait() => return Ok(crate::demo_cmd::INTERRUPTED),
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
        println!(
            "real processes on 127.0.0.1 ({} nodes; rows are medians over the runs):",
            names.len()
        );
        print!("{}", crate::lab_cmd::table(&results));
        if let Some(agreement) = &agreement {
            print!("{}", compare::agreement_table(agreement, runs));
        }
    }
    Ok(if interrupted {
        eprintln!("interrupted: the nodes and callers are stopped");
        crate::demo_cmd::INTERRUPTED
    } else {
        0
    })
}
