//! The twin's processes: its members (`rpclb node` children serving `work`), the caller
//! processes of each run (`rpclb demo-caller`), and the scenario's fault played on them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::{Node, NodeConfig};
use rpclb_lab::RunReport;
use tokio::time::Instant;

use super::caller;
use super::fault_window::FaultWindow;
use super::merge;
use super::plan::{Plan, TwinFault};
use crate::harness::{random_cookie, NodeProcess, NodeSpec};
use crate::work::{FailKind, WorkFault, WorkFaultFn};
use crate::CmdResult;

/// The time the callers get to start, join and see the members before the run's start.
const CALLER_LEAD: Duration = Duration::from_millis(3_000);

/// The twin's running processes: its members, and this process's node (for `work_fault`).
pub(super) struct Twin {
    bin: PathBuf,
    cookie: String,
    members: Vec<NodeProcess>,
    /// Every member's full name by lab index (the one joining later included).
    pub(super) names: Vec<String>,
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
        crate::demo_cmd::DEMO_SAMPLE_INTERVAL
            .as_millis()
            .to_string(),
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
        TwinFault::Stragglers { fraction, factor } => {
            args.extend([
                "--work-straggler-fraction".into(),
                fraction.to_string(),
                "--work-straggler-factor".into(),
                factor.to_string(),
            ]);
        }
        _ => {}
    }
    args
}

impl Twin {
    /// Starts the members present at the start (`m1` first, the others dialling it) and
    /// joins them from this process.
    pub(super) async fn start(bin: &Path, plan: &Plan) -> CmdResult<Twin> {
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
    pub(super) async fn run_once(
        &mut self,
        plan: &Plan,
        algorithm: &str,
        run: u64,
    ) -> CmdResult<RunReport> {
        let start_unix = unix_ms() + CALLER_LEAD.as_millis() as u64;
        let start = Instant::now() + CALLER_LEAD;
        let callers = plan.scenario.callers;
        let timeout_ms = plan.scenario.timeout_ms.round() as u64;
        let window = FaultWindow::of(plan, &self.names);
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
                .args(["--seed", &(run * 1_000 + k as u64).to_string()]);
            if let Some(hedge) = &plan.scenario.hedging {
                command.args(["--hedge", &super::plan::hedge_spec(hedge)]);
            }
            if let Some(window) = &window {
                command
                    .args(["--fault-member", &window.member])
                    .args(["--fault-from-us", &window.from_us.to_string()])
                    .args(["--fault-to-us", &window.to_us.to_string()]);
            }
            if plan.fail_kind != FailKind::Application {
                command.args(["--fail-kind", plan.fail_kind.as_str()]);
            }
            if plan.retries() {
                command.arg("--retries");
            }
            command
                .arg("--exit-with-stdin")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            if std::env::var_os("RUST_LOG").is_none() {
                command.env("RUST_LOG", crate::DEFAULT_LOG_FILTER);
            }
            children.push(command.spawn()?);
        }
        // Each caller exits when its stdin closes: held until they are done, and closed by
        // the kernel if this process dies (even by SIGKILL), so no caller outlives it.
        let _stdins: Vec<_> = children.iter_mut().map(|c| c.stdin.take()).collect();
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
            TwinFault::Slow { .. } | TwinFault::Stragglers { .. } => None,
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
                        fail_kind: plan.fail_kind,
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
    pub(super) async fn clear_fault(&self, plan: &Plan) {
        match plan.fault {
            TwinFault::Fail { member, .. } => {
                self.set_fault(
                    member,
                    WorkFault {
                        slow_factor: 1.0,
                        fail_fraction: 0.0,
                        fail_kind: FailKind::Application,
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
            TwinFault::Slow { .. } | TwinFault::Join { .. } | TwinFault::Stragglers { .. } => {}
        }
    }

    /// Stops this node and kills every member.
    pub(super) async fn shutdown(self) {
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
