//! `rpclb demo-caller` (hidden): one caller process of `rpclb demo --scenario`. It joins the
//! cluster as a client node, starts a client-only balancer `demo` with one algorithm, waits
//! for the members, and from an agreed wall-clock start makes open-loop calls of `work`
//! (Poisson arrivals at `--rate`) for the warm-up and the measured window. It prints one JSON
//! line, [`CallerReport`], with the latencies of the calls issued in the window (an
//! hdrhistogram's recorded values), their outcomes, which member served each call (in
//! total, and per 100 ms of the whole run for the shed time), and, when told the fault's span
//! (`--fault-member`, `--fault-from-us`, `--fault-to-us`), the calls around it
//! ([`FaultCounts`]). With `--hedge` its balancer hedges the calls (declared idempotent) and
//! the report counts the hedges of the window ([`super::hedges`]). With `--retries` its calls
//! are idempotent (retried under the balancer's default retry budget) and the report counts
//! the window's retries ([`super::retries`]); with `--fail-kind retryable` it reads the
//! failing member's failures as lost connections.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rpc_load_balancer::cpu::CpuSampler;
use rpc_load_balancer::{Balancer, BalancerConfig, Error, Node, NodeConfig, RetryBudget};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::fault_window::{FaultCounts, FaultWindow};
use super::hedges::{HedgeCounters, HedgeTally};
use super::recorder::CallerCounters;
use super::retries::{RetryCounters, RetryTally};
use crate::cli::DemoCallerArgs;
use crate::work::{FailKind, WorkFn};
use crate::CmdResult;

/// The width of the per-member pick counts over time, ms.
pub const BUCKET_MS: u64 = 100;

/// What one caller process measured (its stdout line).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CallerReport {
    /// How late the caller started its first call after the agreed start, ms (0 when on
    /// time): the fault schedule is relative to that start.
    pub late_ms: u64,
    /// Calls issued in the measured window.
    pub calls: u64,
    /// Of those, calls that got a reply.
    pub ok: u64,
    /// Of those, calls that failed.
    pub errors: u64,
    /// Of the errors, timeouts.
    pub timeouts: u64,
    /// The errors by kind (`Error::kind`).
    pub error_kinds: BTreeMap<String, u64>,
    /// Latency of every call of the window, errors included: `[µs, count]` pairs of the
    /// histogram's recorded values.
    pub latency_us: Vec<(u64, u64)>,
    /// Calls of the window each member served or failed (by full node name).
    pub served: BTreeMap<String, u64>,
    /// Per member, its picks per [`BUCKET_MS`] of the whole run (warm-up included) by issue
    /// time; `totals` has every call's.
    pub per_bucket: BTreeMap<String, Vec<u64>>,
    /// Calls per [`BUCKET_MS`] of the whole run.
    pub totals: Vec<u64>,
    /// The calls around the fault, by this caller's clock from the agreed start
    /// ([`super::fault_window`] says how that differs from the lab); `None` (absent from the
    /// line, and from an older caller's) when the caller was not told the fault's span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultCounts>,
    /// What hedging did from the window's start until the caller stopped waiting for its
    /// calls (`--hedge`); `None` (absent) without hedging, or when the library counts nothing
    /// (built without `telemetry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedges: Option<HedgeTally>,
    /// What the retries did from the window's start until the caller stopped waiting for its
    /// calls (`--retries`, [`super::retries`]); `None` (absent) without retries, or when the
    /// library counts nothing (built without `telemetry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<RetryTally>,
}

/// The caller's running tally.
struct Tally {
    report: CallerReport,
    histogram: Histogram<u64>,
    /// The fault's span, when told it.
    window: Option<FaultWindow>,
}

/// An empty latency histogram in µs: 1 µs to an hour, 3 significant digits (a bounded, flat
/// memory; a longer latency counts as an hour).
pub fn histogram() -> Histogram<u64> {
    use crate::latency::{HIGHEST_US, SIGNIFICANT_DIGITS};
    let mut histogram = Histogram::new_with_bounds(1, HIGHEST_US, SIGNIFICANT_DIGITS)
        .expect("1 µs to an hour with 3 digits are valid bounds");
    histogram.auto(false);
    histogram
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs one caller; exit status 0 (its report printed), or an error before any call
/// (joining, members not coming within 15 s). With `--exit-with-stdin`, an error as soon as
/// stdin reaches end of file (the demo that started it is gone): nothing is printed.
pub async fn run(args: DemoCallerArgs) -> CmdResult<i32> {
    if !args.exit_with_stdin {
        return run_calls(args).await;
    }
    tokio::select! {
        outcome = run_calls(args) => outcome,
        () = stdin_closed() => Err("stdin closed: the demo that started this caller ended".into()),
    }
}

/// Resolves when this process's stdin reaches end of file (or fails).
async fn stdin_closed() {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 256];
    while let Ok(n) = stdin.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

/// [`run`]'s calls.
async fn run_calls(args: DemoCallerArgs) -> CmdResult<i32> {
    let config = args
        .cluster
        .apply(NodeConfig::new(&args.name, "127.0.0.1:0"))
        .cpu_sampler(CpuSampler::Process)
        .cpu_sample_interval(crate::demo_cmd::DEMO_SAMPLE_INTERVAL);
    read_failures_as_lost(args.fail_kind)?;
    // (Before anything the library counts with: the recorder is read at its first count.)
    let counters = if args.hedge.is_some() || args.retries {
        CallerCounters::install()
    } else {
        None
    };
    let node = Node::start(config).await?;
    node.connect(&args.peer).await?;
    let algorithm = crate::demo_cmd::demo_algorithm(&args.algorithm)?;
    let mut balancer_config = BalancerConfig::new(crate::demo_cmd::DEMO_BALANCER)
        .algorithm_arc(algorithm)
        .node_match_list(Vec::<String>::new());
    if let Some(hedge) = &args.hedge {
        // Hedging alone, as the lab's `--hedge`: no retries of the idempotent calls.
        balancer_config = balancer_config
            .hedge(hedge.policy())
            .retry_budget(RetryBudget::none());
    }
    let balancer = Balancer::start(balancer_config).await?;
    crate::load::wait_for_members(&balancer, args.members as usize, Duration::from_secs(15))
        .await?;
    let now_unix = unix_ms();
    let late_ms = now_unix.saturating_sub(args.start_at_unix_ms);
    let start =
        Instant::now() + Duration::from_millis(args.start_at_unix_ms.saturating_sub(now_unix));
    let report = drive(&balancer, &args, start, late_ms, counters).await;
    println!("{}", serde_json::to_string(&report)?);
    balancer.stop().await;
    node.shutdown().await;
    Ok(0)
}

/// With `--fail-kind retryable`, sets the library's hook that reads `work`'s failures of the
/// retryable kind as lost connections.
///
/// Errors: the binary was built without the `test-hooks` feature (which has the hook).
fn read_failures_as_lost(kind: FailKind) -> CmdResult<()> {
    if kind != FailKind::Retryable {
        return Ok(());
    }
    #[cfg(feature = "test-hooks")]
    {
        rpc_load_balancer::read_failures_as_lost_connections(crate::work::LOST_CONNECTION);
        Ok(())
    }
    #[cfg(not(feature = "test-hooks"))]
    Err("--fail-kind retryable needs rpclb built with the `test-hooks` feature".into())
}

/// The open loop: Poisson arrivals at `args.rate` from `start` for the warm-up and the
/// window; waits (≤ timeout + 2 s) for the calls still running at the end. `counters`: the
/// hedge and retry counters (with `--hedge` or `--retries`), read at the window's start and
/// at the end.
async fn drive(
    balancer: &Balancer,
    args: &DemoCallerArgs,
    start: Instant,
    late_ms: u64,
    counters: Option<&'static CallerCounters>,
) -> CallerReport {
    let idempotent = args.hedge.is_some() || args.retries;
    let warmup = Duration::from_millis(args.warmup_ms);
    let window_start = start + warmup;
    let end = window_start + Duration::from_millis(args.measure_ms);
    let timeout = Duration::from_millis(args.timeout_ms);
    let buckets = (args.warmup_ms + args.measure_ms).div_ceil(BUCKET_MS) as usize;
    let window = fault_window(args);
    // The agreed start on this clock (`start` is later when this caller started late): the
    // fault's span is measured from it.
    let agreed = start
        .checked_sub(Duration::from_millis(late_ms))
        .unwrap_or(start);
    let tally = Arc::new(Mutex::new(Tally {
        report: CallerReport {
            late_ms,
            totals: vec![0; buckets],
            fault: window.as_ref().map(|_| FaultCounts::default()),
            ..CallerReport::default()
        },
        histogram: histogram(),
        window,
    }));
    let mut rng = StdRng::seed_from_u64(args.seed);
    let mut calls = JoinSet::new();
    let mut next = start;
    let hedged = counters.filter(|_| args.hedge.is_some()).map(|c| &c.hedges);
    let retried = counters.filter(|_| args.retries).map(|c| &c.retries);
    let (mut hedged_before, mut retried_before) = (None, None);
    loop {
        let gap = -(1.0 - rng.random::<f64>()).ln() / args.rate;
        next += Duration::from_secs_f64(gap.min(60.0));
        if next >= end {
            break;
        }
        tokio::time::sleep_until(next).await;
        let issued = Instant::now();
        let measured = issued >= window_start;
        if measured && hedged_before.is_none() {
            hedged_before = hedged.map(HedgeCounters::read);
        }
        if measured && retried_before.is_none() {
            retried_before = retried.map(RetryCounters::read);
        }
        let bucket =
            (issued.saturating_duration_since(start).as_millis() as u64 / BUCKET_MS) as usize;
        let (balancer, tally) = (balancer.clone(), Arc::clone(&tally));
        calls.spawn(async move {
            let outcome = balancer
                .call::<WorkFn>(())
                .idempotent(idempotent)
                .timeout(timeout)
                .with_node()
                .await;
            let ended = Instant::now();
            let latency = ended - issued;
            let since = |t: Instant| t.saturating_duration_since(agreed).as_micros() as u64;
            let span_us = (since(issued), since(ended));
            let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner());
            record(&mut tally, outcome, latency, measured, bucket, span_us);
        });
        while calls.try_join_next().is_some() {}
    }
    let _ = tokio::time::timeout(timeout + Duration::from_secs(2), async {
        while calls.join_next().await.is_some() {}
    })
    .await;
    calls.shutdown().await;
    let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(counters) = hedged {
        tally.report.hedges =
            Some(counters.since(hedged_before.unwrap_or_else(|| counters.read())));
    }
    if let Some(counters) = retried {
        tally.report.retries =
            Some(counters.since(retried_before.unwrap_or_else(|| counters.read())));
    }
    let histogram = tally.histogram.clone();
    tally.report.latency_us = histogram
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    std::mem::take(&mut tally.report)
}

/// The fault's span from `--fault-member`, `--fault-from-us` and `--fault-to-us` (clap
/// requires all three or none).
fn fault_window(args: &DemoCallerArgs) -> Option<FaultWindow> {
    Some(FaultWindow {
        member: args.fault_member.clone()?,
        from_us: args.fault_from_us?,
        to_us: args.fault_to_us?,
    })
}

/// Counts a call that ended: `span_us` is when it was issued and when it ended, µs from the
/// agreed start.
fn record(
    tally: &mut Tally,
    outcome: Result<((), Arc<str>), Error>,
    latency: Duration,
    measured: bool,
    bucket: usize,
    span_us: (u64, u64),
) {
    let node = match &outcome {
        Ok((_, node)) => Some(node.to_string()),
        Err(e) => e.node().map(str::to_string),
    };
    if let (Some(window), Some(counts)) = (&tally.window, &mut tally.report.fault) {
        let (issued_us, ended_us) = span_us;
        counts.count(
            window,
            node.as_deref(),
            outcome.is_ok(),
            issued_us,
            ended_us,
        );
    }
    let report = &mut tally.report;
    let buckets = report.totals.len();
    if let Some(total) = report.totals.get_mut(bucket) {
        *total += 1;
    }
    if let Some(node) = &node {
        let counts = report
            .per_bucket
            .entry(node.clone())
            .or_insert_with(|| vec![0; buckets]);
        if let Some(count) = counts.get_mut(bucket) {
            *count += 1;
        }
    }
    if !measured {
        return;
    }
    report.calls += 1;
    match &outcome {
        Ok(_) => report.ok += 1,
        Err(e) => {
            report.errors += 1;
            if matches!(e, Error::RequestTimeout { .. }) {
                report.timeouts += 1;
            }
            *report.error_kinds.entry(e.kind().to_string()).or_default() += 1;
        }
    }
    if let Some(node) = node {
        *report.served.entry(node).or_default() += 1;
    }
    tally
        .histogram
        .saturating_record((latency.as_micros() as u64).max(1));
}
