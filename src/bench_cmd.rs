//! `rpclb bench`: end-to-end call performance, side by side with the raw ractor_cluster floor
//! (issue 9).
//!
//! Starts 3 `rpclb node` children on 127.0.0.1 — `n0` (the node the others dial; not a
//! target) and the two **targets** `n1` and `n2`, each running balancer [`BENCH_BALANCER`]
//! with RoundRobin, of which only the targets are members — and joins them as a 4th node that
//! measures four [cases](Case):
//!
//! * `raw` (a): a plain ractor_cluster RPC to the target's [raw floor
//!   actor](crate::raw_floor), which runs each call on a task like our endpoint does — the
//!   floor our layer adds to;
//! * `direct` (b): `Node::call::<BytesEcho>(target, payload)`;
//! * `balanced` (c): a call through a RoundRobin balancer on this node whose members are the
//!   two targets;
//! * `local` (d): a call through a balancer whose only member is this node (served in-process).
//!
//! For each payload size it runs a **sequential** phase (one caller; `--warmup` untimed calls
//! per case, then `--rounds` rounds in each of which every case makes `calls / rounds` timed
//! calls, the case order rotated by one each round so that no case always runs first) and a
//! **throughput** phase
//! (`--concurrency` callers, caller *i* on target *i* mod 2 for raw and direct; `--warmup-secs`
//! untimed, then the same rounds of `secs / rounds` seconds per case). The report gives each
//! case's figures over all its rounds and, per round, the ratios direct/raw and balanced/raw
//! (p50, p99, calls/s) with their min, median and max. Every call checks its reply's length
//! (warm-up calls: every byte); a wrong reply counts as an error of kind `wrong_reply`.
//!
//! Latencies go through [`load::drive`], so they are kept as `rpclb load` keeps them: in a
//! fixed-size histogram ([`crate::latency::Latencies`], 3 significant digits), not one by one.
//! A bench run is bounded, so a list would not have grown without end here, but one recorder
//! for both keeps memory flat for long `--secs` runs too; a percentile within 0.1 % moves a
//! ratio by at most about 0.002, the size of its 3-decimal rounding.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use ractor::ActorRef;
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig, Payload, RoundRobin};
use serde_json::{json, Map, Value};

use crate::cli::{BenchArgs, RuntimeFlavor, RuntimeSettings};
use crate::functions::BytesEcho;
use crate::harness::Cluster;
use crate::interrupt::Interrupt;
use crate::load::{self, Amount, Failure, LoadReport, Outcome};
use crate::raw_floor::{self, RawFloorMsg};
use crate::CmdResult;

/// The balancer every child runs and the two targets are members of (`balanced`).
pub const BENCH_BALANCER: &str = "bench";

/// The balancer only the bench node runs and is a member of (`local`).
pub const LOCAL_BALANCER: &str = "bench_local";

/// The `--node-match-regex` of the children's [`BENCH_BALANCER`]: only `n1` and `n2`, the
/// targets, are its members.
const TARGETS_REGEX: &str = "^n[12]@";

/// Bound for the mesh, the balancers' members and the raw floor actors to show up.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// A measured case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// (a) A raw ractor_cluster RPC to the target's raw floor actor.
    Raw,
    /// (b) `Node::call` to the target.
    Direct,
    /// (c) A RoundRobin balancer call over the two targets.
    Balanced,
    /// (d) A balancer call served by this node, its only member.
    Local,
}

impl Case {
    /// Every case, in the order each round runs them.
    pub const ALL: [Case; 4] = [Case::Raw, Case::Direct, Case::Balanced, Case::Local];

    /// The case's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Case::Raw => "raw",
            Case::Direct => "direct",
            Case::Balanced => "balanced",
            Case::Local => "local",
        }
    }

    /// The case's letter in issue 9.
    pub fn letter(self) -> char {
        match self {
            Case::Raw => 'a',
            Case::Direct => 'b',
            Case::Balanced => 'c',
            Case::Local => 'd',
        }
    }
}

/// The ratios reported, per round: `(name, numerator case)` over [`Case::Raw`].
const RATIOS: [(&str, Case); 2] = [
    ("direct_over_raw", Case::Direct),
    ("balanced_over_raw", Case::Balanced),
];

/// What the cases call.
/// A case's reply: the raw floor's bytes or the library's payload (compared as they are, so
/// no case pays a conversion).
enum Reply {
    Raw(Vec<u8>),
    Payload(Payload),
}

impl Reply {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Raw(bytes) => bytes,
            Self::Payload(payload) => payload,
        }
    }
}

struct Targets {
    node: Node,
    /// The two targets' full names.
    names: [Arc<str>; 2],
    /// Their raw floor actors.
    raw: [ActorRef<RawFloorMsg>; 2],
    /// RoundRobin over the two targets.
    balanced: Balancer,
    /// This node as its only member.
    local: Balancer,
    timeout: Duration,
}

impl Targets {
    /// Makes one call of `case` with a copy of `payload` to target `which` (0 or 1; the
    /// balancers choose their own) and checks the reply: its length, or with `check_all`
    /// every byte.
    async fn call(&self, case: Case, which: usize, payload: &[u8], check_all: bool) -> Outcome {
        let (reply, node) = match case {
            Case::Raw => {
                let reply =
                    raw_floor::call(&self.raw[which], payload.to_vec(), self.timeout).await?;
                (Reply::Raw(reply), Arc::clone(&self.names[which]))
            }
            Case::Direct => {
                let reply = self
                    .node
                    .call::<BytesEcho>(&*self.names[which], Payload::from_slice(payload))
                    .timeout(self.timeout)
                    .await?;
                (Reply::Payload(reply), Arc::clone(&self.names[which]))
            }
            Case::Balanced | Case::Local => {
                let balancer = if case == Case::Balanced {
                    &self.balanced
                } else {
                    &self.local
                };
                let (reply, node) = balancer
                    .call::<BytesEcho>(Payload::from_slice(payload))
                    .timeout(self.timeout)
                    .with_node()
                    .await?;
                (Reply::Payload(reply), node)
            }
        };
        let reply = reply.bytes();
        let right = if check_all {
            reply == payload
        } else {
            reply.len() == payload.len()
        };
        if right {
            Ok(node)
        } else {
            Err(Failure::new(
                "wrong_reply",
                format!(
                    "{} from {node}: {} bytes back for {} sent, or other bytes",
                    case.name(),
                    reply.len(),
                    payload.len()
                ),
            ))
        }
    }
}

/// Runs `case` once: `concurrency` callers until `amount`. A single caller alternates
/// between the targets call by call; with several, caller *i* calls target *i* mod 2.
async fn run_case(
    targets: &Arc<Targets>,
    case: Case,
    payload: &Arc<[u8]>,
    concurrency: u32,
    amount: Amount,
    check_all: bool,
) -> LoadReport {
    let (targets, payload) = (Arc::clone(targets), Arc::clone(payload));
    let mut report = load::drive(
        concurrency,
        amount,
        &ProgressBar::hidden(),
        move |caller, n| {
            let (targets, payload) = (Arc::clone(&targets), Arc::clone(&payload));
            let which = if concurrency == 1 {
                (n % 2) as usize
            } else {
                (caller % 2) as usize
            };
            async move { targets.call(case, which, &payload, check_all).await }
        },
    )
    .await;
    report.algorithm = case.name().to_string();
    report
}

/// The bench's payload of `size` bytes: a pattern, so a reply with bytes in the wrong place
/// is caught.
fn payload(size: usize) -> Arc<[u8]> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

/// `100 B`, `1 KiB`, `64 KiB`, `1.5 KiB`.
fn size_label(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b if b >= 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// `numerator / denominator`, `None` when the denominator is 0.
fn ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

/// `{"per_round":[..],"min","median","max"}` of per-round ratios (3 decimals; a round whose
/// raw figure was 0 is `null` and left out of min, median and max).
fn ratio_stats(per_round: &[Option<f64>]) -> Value {
    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut known: Vec<f64> = per_round.iter().flatten().copied().collect();
    known.sort_by(f64::total_cmp);
    let median = match known.len() {
        0 => None,
        n if n % 2 == 1 => Some(known[n / 2]),
        n => Some((known[n / 2 - 1] + known[n / 2]) / 2.0),
    };
    json!({
        "per_round": per_round.iter().map(|r| r.map(round3)).collect::<Vec<_>>(),
        "min": known.first().copied().map(round3),
        "median": median.map(round3),
        "max": known.last().copied().map(round3),
    })
}

/// The figures of one round of one case that ratios are taken of.
#[derive(Debug, Clone, Copy)]
struct RoundFigures {
    p50: f64,
    p99: f64,
    calls_per_sec: f64,
}

impl RoundFigures {
    fn of(report: &LoadReport) -> Self {
        Self {
            p50: report.percentile_us(50.0) as f64,
            p99: report.percentile_us(99.0) as f64,
            calls_per_sec: report.calls_per_sec(),
        }
    }
}

/// One phase (sequential or throughput) of one payload size: every case's rounds.
struct Phase {
    /// Per case (in [`Case::ALL`] order): the report over all rounds.
    totals: Vec<LoadReport>,
    /// Per case: each round's figures.
    rounds: Vec<Vec<RoundFigures>>,
    /// Per case: the warm-up's report (not part of the totals).
    warmup: Vec<Option<LoadReport>>,
}

impl Phase {
    fn new() -> Self {
        Self {
            totals: Case::ALL
                .iter()
                .map(|case| LoadReport {
                    algorithm: case.name().to_string(),
                    ..LoadReport::default()
                })
                .collect(),
            rounds: vec![Vec::new(); Case::ALL.len()],
            warmup: vec![None; Case::ALL.len()],
        }
    }

    fn add_round(&mut self, index: usize, report: LoadReport) {
        self.rounds[index].push(RoundFigures::of(&report));
        self.totals[index].absorb(report);
    }

    fn errors(&self) -> u64 {
        let warmup: u64 = self
            .warmup
            .iter()
            .flatten()
            .map(LoadReport::error_count)
            .sum();
        warmup + self.totals.iter().map(LoadReport::error_count).sum::<u64>()
    }

    /// Per-round ratios of `case` over raw for `figure`.
    fn ratios(&self, case: Case, figure: fn(&RoundFigures) -> f64) -> Vec<Option<f64>> {
        let index = Case::ALL.iter().position(|c| *c == case).unwrap_or(0);
        self.rounds[index]
            .iter()
            .zip(&self.rounds[0])
            .map(|(numerator, raw)| ratio(figure(numerator), figure(raw)))
            .collect()
    }

    /// `{"cases":{case: report},"ratios":{name:{"p50","p99","calls_per_sec"}},"warmup":{case:
    /// {"calls","errors"}}}`.
    fn to_json(&self) -> Value {
        let mut cases = Map::new();
        let mut warmup = Map::new();
        for (i, case) in Case::ALL.iter().enumerate() {
            cases.insert(case.name().to_string(), self.totals[i].summary_json());
            if let Some(report) = &self.warmup[i] {
                warmup.insert(
                    case.name().to_string(),
                    json!({"calls": report.calls, "errors": report.errors}),
                );
            }
        }
        let mut ratios = Map::new();
        for (name, case) in RATIOS {
            ratios.insert(
                name.to_string(),
                json!({
                    "p50": ratio_stats(&self.ratios(case, |f| f.p50)),
                    "p99": ratio_stats(&self.ratios(case, |f| f.p99)),
                    "calls_per_sec": ratio_stats(&self.ratios(case, |f| f.calls_per_sec)),
                }),
            );
        }
        json!({"cases": cases, "ratios": ratios, "warmup": warmup})
    }

    /// The phase as a text table: one line per case, then the ratios.
    fn to_table(&self, title: &str) -> String {
        let mut out = format!("{title}\n");
        let _ = writeln!(
            out,
            "  {:<12} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10} {:>7}",
            "case", "calls", "p50 µs", "p90 µs", "p99 µs", "max µs", "calls/s", "errors"
        );
        for (i, case) in Case::ALL.iter().enumerate() {
            let r = &self.totals[i];
            let label = format!("{} {}", case.letter(), case.name());
            let _ = writeln!(
                out,
                "  {label:<12} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10.0} {:>7}",
                r.calls,
                r.percentile_us(50.0),
                r.percentile_us(90.0),
                r.percentile_us(99.0),
                r.latency.max_us(),
                r.calls_per_sec(),
                r.error_count()
            );
            for (kind, message) in &r.error_samples {
                let _ = writeln!(out, "    {kind}: e.g. {message}");
            }
        }
        let show = |ratios: Vec<Option<f64>>| {
            let known: Vec<f64> = ratios.iter().flatten().copied().collect();
            let min = known.iter().copied().fold(f64::INFINITY, f64::min);
            let max = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let stats = ratio_stats(&ratios);
            match stats["median"].as_f64() {
                Some(median) => format!("{median:.2} ({min:.2}–{max:.2})"),
                None => "—".to_string(),
            }
        };
        for (name, case) in RATIOS {
            let _ = writeln!(
                out,
                "  {:<18} p50 {}, p99 {}, calls/s {}",
                name.replace("_over_", "/"),
                show(self.ratios(case, |f| f.p50)),
                show(self.ratios(case, |f| f.p99)),
                show(self.ratios(case, |f| f.calls_per_sec)),
            );
        }
        out.push_str("  (ratios: median of the per-round ratios, min–max in brackets)\n");
        out
    }
}

/// The bench's settings, derived from the flags.
struct Plan {
    sizes: Vec<usize>,
    warmup: u64,
    calls_per_round: u64,
    rounds: u32,
    concurrency: u32,
    window: Duration,
    warmup_window: Duration,
}

impl Plan {
    fn of(args: &BenchArgs) -> Self {
        Self {
            sizes: args.sizes.clone(),
            warmup: args.warmup,
            calls_per_round: args.calls.div_ceil(u64::from(args.rounds)),
            rounds: args.rounds,
            concurrency: args.shape.concurrency,
            window: Duration::from_secs_f64(args.secs / f64::from(args.rounds)),
            warmup_window: Duration::from_secs_f64(args.warmup_secs),
        }
    }

    /// Steps of the progress bar: one per case run.
    fn steps(&self) -> u64 {
        let warmups = u64::from(self.warmup > 0) + u64::from(!self.warmup_window.is_zero());
        let per_size = Case::ALL.len() as u64 * (2 * u64::from(self.rounds) + warmups);
        per_size * self.sizes.len() as u64
    }
}

/// One payload size's results.
struct SizeResult {
    bytes: usize,
    sequential: Phase,
    throughput: Phase,
}

/// The cases of round `round` (from 1), each with its index in [`Case::ALL`]: every case once,
/// the order rotated by one each round (raw, direct, balanced, local; then direct, balanced,
/// local, raw; …), so that no case always runs first or right after another.
fn round_order(round: u32) -> impl Iterator<Item = (usize, Case)> {
    let n = Case::ALL.len();
    let shift = round.saturating_sub(1) as usize % n;
    (0..n).map(move |k| {
        let i = (k + shift) % n;
        (i, Case::ALL[i])
    })
}

/// Runs both phases for one payload size.
async fn bench_size(
    targets: &Arc<Targets>,
    plan: &Plan,
    bytes: usize,
    bar: &ProgressBar,
) -> SizeResult {
    let payload = payload(bytes);
    let label = size_label(bytes);
    let mut sequential = Phase::new();
    if plan.warmup > 0 {
        for (i, case) in Case::ALL.into_iter().enumerate() {
            bar.set_message(format!("{label} sequential warm-up: {}", case.name()));
            let amount = Amount::Calls(plan.warmup);
            sequential.warmup[i] = Some(run_case(targets, case, &payload, 1, amount, true).await);
            bar.inc(1);
        }
    }
    for round in 1..=plan.rounds {
        for (i, case) in round_order(round) {
            bar.set_message(format!(
                "{label} sequential round {round}/{}: {}",
                plan.rounds,
                case.name()
            ));
            let amount = Amount::Calls(plan.calls_per_round);
            let report = run_case(targets, case, &payload, 1, amount, false).await;
            sequential.add_round(i, report);
            bar.inc(1);
        }
    }
    let mut throughput = Phase::new();
    if !plan.warmup_window.is_zero() {
        for (i, case) in Case::ALL.into_iter().enumerate() {
            bar.set_message(format!("{label} throughput warm-up: {}", case.name()));
            let amount = Amount::Duration(plan.warmup_window);
            let report = run_case(targets, case, &payload, plan.concurrency, amount, false).await;
            throughput.warmup[i] = Some(report);
            bar.inc(1);
        }
    }
    for round in 1..=plan.rounds {
        for (i, case) in round_order(round) {
            bar.set_message(format!(
                "{label} throughput round {round}/{}: {}",
                plan.rounds,
                case.name()
            ));
            let amount = Amount::Duration(plan.window);
            let report = run_case(targets, case, &payload, plan.concurrency, amount, false).await;
            throughput.add_round(i, report);
            bar.inc(1);
        }
    }
    SizeResult {
        bytes,
        sequential,
        throughput,
    }
}

/// Waits (≤ [`READY_TIMEOUT`] in all) until both targets' raw floor actors are known here and
/// a direct call to each target succeeds.
async fn find_targets(node: &Node, names: &[Arc<str>; 2]) -> CmdResult<[ActorRef<RawFloorMsg>; 2]> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    let raw = loop {
        if let (Some(first), Some(second)) =
            (raw_floor::find(&names[0]), raw_floor::find(&names[1]))
        {
            break [first, second];
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the raw floor actors of {} and {} did not show up within {} s",
                names[0],
                names[1],
                READY_TIMEOUT.as_secs()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for name in names {
        loop {
            let probe = node
                .call::<BytesEcho>(&**name, Payload::from_slice(&[1, 2, 3]))
                .timeout(Duration::from_secs(2))
                .await;
            match probe {
                Ok(_) => break,
                Err(error) if tokio::time::Instant::now() >= deadline => {
                    return Err(format!("{name} does not answer calls: {error}").into())
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    Ok(raw)
}

/// Starts the bench node's balancers and waits for their members.
async fn start_balancers(names: &[Arc<str>; 2]) -> CmdResult<(Balancer, Balancer)> {
    // Caller only: its members are the children that match TARGETS_REGEX.
    let balanced = Balancer::start(
        BalancerConfig::new(BENCH_BALANCER)
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await?;
    // Nobody else runs it: this node is its only member.
    let local =
        Balancer::start(BalancerConfig::new(LOCAL_BALANCER).algorithm(RoundRobin::new())).await?;
    load::wait_for_members(&balanced, 2, READY_TIMEOUT).await?;
    load::wait_for_members(&local, 1, READY_TIMEOUT).await?;
    let mut members = balanced.members().nodes();
    members.sort();
    let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    expected.sort();
    if members != expected {
        return Err(format!(
            "balancer {BENCH_BALANCER} has members {members:?}, expected {expected:?}"
        )
        .into());
    }
    Ok((balanced, local))
}

/// Joins the cluster, measures every payload size, prints the report; `Ok(true)` when no
/// call failed.
async fn measure(cluster: &Cluster, args: &BenchArgs, runtime: RuntimeSettings) -> CmdResult<bool> {
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
    if args.shape.json {
        let sizes: Vec<Value> = results
            .iter()
            .map(|r| {
                json!({
                    "bytes": r.bytes,
                    "sequential": r.sequential.to_json(),
                    "throughput": r.throughput.to_json(),
                })
            })
            .collect();
        let report = json!({
            "nodes": cluster.names(),
            "node_pids": cluster.nodes.iter().map(|n| n.pid()).collect::<Vec<_>>(),
            "bench_node": node.name(),
            "targets": names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            "settings": {
                "sizes": plan.sizes,
                "calls": plan.calls_per_round * u64::from(plan.rounds),
                "calls_per_round": plan.calls_per_round,
                "warmup": plan.warmup,
                "rounds": plan.rounds,
                "secs": args.secs,
                "warmup_secs": args.warmup_secs,
                "concurrency": plan.concurrency,
                "timeout_ms": args.shape.timeout_ms,
                "worker_threads": runtime.worker_threads,
                "node_worker_threads": args.node_worker_threads,
                "runtime": runtime.flavor.as_str(),
                "node_runtime": args.node_runtime.unwrap_or(runtime.flavor).as_str(),
                "node_args": args.node_args,
            },
            "sizes": sizes,
            "errors": errors,
            "ok": errors == 0,
        });
        println!("{report}");
    } else {
        println!(
            "rpclb bench: {} → {}, {} (children: {}, this node: {})",
            node.name(),
            names[0],
            names[1],
            describe(
                args.node_runtime.unwrap_or(runtime.flavor),
                args.node_worker_threads
            ),
            describe(runtime.flavor, runtime.worker_threads),
        );
        println!("cases: a raw = ractor_cluster RPC, one task per call (the floor); b direct = Node::call; c balanced = RoundRobin over the 2 targets; d local = balancer served by this node\n");
        for r in &results {
            let label = size_label(r.bytes);
            let sequential = format!(
                "{label}, sequential: {} timed calls per case in {} rounds (after {} warm-up)",
                plan.calls_per_round * u64::from(plan.rounds),
                plan.rounds,
                plan.warmup
            );
            println!("{}", r.sequential.to_table(&sequential));
            let throughput = format!(
                "{label}, throughput: {} callers, {:.1} s per case in {} rounds (after {:.1} s warm-up)",
                plan.concurrency, args.secs, plan.rounds, args.warmup_secs
            );
            println!("{}", r.throughput.to_table(&throughput));
        }
        if errors > 0 {
            println!("{errors} calls failed (warm-up included)");
        }
    }
    Ok(errors == 0)
}

/// How a report names a runtime: "current-thread" or "multi-thread, N worker(s)".
fn describe(flavor: RuntimeFlavor, worker_threads: u16) -> String {
    match flavor {
        RuntimeFlavor::CurrentThread => flavor.as_str().to_string(),
        RuntimeFlavor::MultiThread => format!("{}, {worker_threads} worker(s)", flavor.as_str()),
    }
}

/// The `rpclb node` arguments of every child; `runtime` is this process's (the children's
/// default).
fn child_args(args: &BenchArgs, runtime: RuntimeSettings) -> Vec<String> {
    let mut child: Vec<String> = [
        "--balancer",
        BENCH_BALANCER,
        "--algorithm",
        "round_robin",
        "--node-match-regex",
        TARGETS_REGEX,
        "--worker-threads",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    child.push(args.node_worker_threads.to_string());
    child.push("--runtime".to_string());
    child.push(
        args.node_runtime
            .unwrap_or(runtime.flavor)
            .as_str()
            .to_string(),
    );
    child.extend(args.node_args.iter().cloned());
    child
}

/// Runs the bench; this process runs `worker_threads` tokio workers (the global flag, for the
/// report). Exit status 0 when every call succeeded, 1 when some failed, 130 when interrupted
/// (Ctrl-C or SIGTERM). The children are killed and reaped before it returns, whatever the
/// outcome.
pub async fn run(args: BenchArgs, runtime: RuntimeSettings) -> CmdResult<i32> {
    let bin = std::env::current_exe()?;
    let child = child_args(&args, runtime);
    let child: Vec<&str> = child.iter().map(String::as_str).collect();
    let nodes = [child.as_slice(); 3];
    let interrupt = Interrupt::listen()?;
    if !args.shape.json {
        eprintln!("starting 3 nodes on 127.0.0.1 ...");
    }
    // A partly started cluster is dropped on interruption, which kills its children.
    let cluster = tokio::select! {
        cluster = Cluster::start_each(&bin, &nodes) => cluster?,
        () = interrupt.wait() => {
            eprintln!("interrupted");
            return Ok(130);
        }
    };
    let outcome = tokio::select! {
        outcome = measure(&cluster, &args, runtime) => Some(outcome),
        () = interrupt.wait() => None,
    };
    cluster.shutdown().await;
    match outcome {
        None => {
            eprintln!("interrupted");
            Ok(130)
        }
        Some(Ok(true)) => Ok(0),
        Some(Ok(false)) => Ok(1),
        Some(Err(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_labelled() {
        assert_eq!(size_label(100), "100 B");
        assert_eq!(size_label(1024), "1 KiB");
        assert_eq!(size_label(65536), "64 KiB");
        assert_eq!(size_label(1536), "1.5 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
    }

    #[test]
    fn each_round_runs_every_case_once_in_a_rotated_order() {
        let names = |round| {
            round_order(round)
                .map(|(i, case)| {
                    assert_eq!(Case::ALL[i], case);
                    case.name()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(1), ["raw", "direct", "balanced", "local"]);
        assert_eq!(names(2), ["direct", "balanced", "local", "raw"]);
        assert_eq!(names(4), ["local", "raw", "direct", "balanced"]);
        assert_eq!(names(5), names(1));
        // Over as many rounds as cases, each case runs once in every position.
        for position in 0..Case::ALL.len() {
            let firsts: std::collections::BTreeSet<_> =
                (1..=4).map(|round| names(round)[position]).collect();
            assert_eq!(firsts.len(), Case::ALL.len());
        }
    }

    #[test]
    fn ratio_stats_skip_unknown_rounds() {
        let stats = ratio_stats(&[Some(1.2), None, Some(1.0), Some(1.5)]);
        assert_eq!(stats["per_round"], json!([1.2, null, 1.0, 1.5]));
        assert_eq!(stats["min"], json!(1.0));
        assert_eq!(stats["median"], json!(1.2));
        assert_eq!(stats["max"], json!(1.5));
        let none = ratio_stats(&[None]);
        assert_eq!(none["median"], Value::Null);
        assert_eq!(ratio(1.0, 0.0), None);
    }

    fn cli_runtime() -> crate::cli::Cli {
        use clap::Parser;
        crate::cli::Cli::try_parse_from(["rpclb", "bench"]).unwrap()
    }

    #[test]
    fn children_get_the_node_runtime_flag() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "rpclb",
            "--runtime",
            "current-thread",
            "bench",
            "--node-runtime",
            "multi-thread",
            "--node-arg=--delay-ms=0",
        ])
        .unwrap();
        let runtime = crate::cli::RuntimeSettings::of(&cli);
        assert_eq!(runtime.flavor, RuntimeFlavor::CurrentThread);
        assert_eq!(runtime.worker_threads, 1);
        let crate::cli::Command::Bench(args) = cli.command else {
            panic!("not bench")
        };
        let child = child_args(&args, runtime);
        assert_eq!(
            child[child.len() - 3..],
            ["--runtime", "multi-thread", "--delay-ms=0"]
        );
    }

    #[test]
    fn the_plan_covers_at_least_the_calls_asked_for() {
        use clap::Parser;
        let cli =
            crate::cli::Cli::try_parse_from(["rpclb", "bench", "--calls", "1001", "--rounds", "4"])
                .unwrap();
        let crate::cli::Command::Bench(args) = cli.command else {
            panic!("not bench")
        };
        let plan = Plan::of(&args);
        assert_eq!(plan.calls_per_round, 251);
        assert_eq!(plan.window, Duration::from_millis(1250));
        // 3 sizes × 4 cases × (2 phases × 4 rounds + 2 warm-ups)
        assert_eq!(plan.steps(), 3 * 4 * 10);
        let runtime = crate::cli::RuntimeSettings::of(&cli_runtime());
        let child = child_args(&args, runtime);
        // The children run this process's runtime flavor unless --node-runtime says otherwise.
        assert_eq!(child[child.len() - 2..], ["--runtime", "current-thread"]);
        assert_eq!(
            child[..6],
            [
                "--balancer",
                "bench",
                "--algorithm",
                "round_robin",
                "--node-match-regex",
                "^n[12]@"
            ]
        );
    }
}
