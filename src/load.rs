//! The load engine behind `rpclb load` and `rpclb demo`: concurrent callers stream calls
//! through a balancer; the report counts calls per serving node, errors by kind, and latency
//! percentiles.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rpc_load_balancer::{Balancer, Error};
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::functions::{Burn, Echo, Sleep, Whoami};
use crate::latency::Latencies;

/// Which demo function each call runs.
#[derive(Debug, Clone)]
pub enum DemoCall {
    /// `whoami`.
    Whoami,
    /// `echo` with this text.
    Echo(String),
    /// `sleep` this many ms.
    Sleep(u64),
    /// `burn` this many ms.
    Burn(u64),
}

impl DemoCall {
    /// Parses `--function F [--arg X]`.
    ///
    /// Errors: a message for an unknown function or a bad argument.
    pub fn parse(function: &str, arg: Option<&str>) -> Result<DemoCall, String> {
        let number = |what: &str| -> Result<u64, String> {
            let arg = arg.ok_or_else(|| format!("{what} needs --arg MS"))?;
            arg.parse()
                .map_err(|e| format!("{what}: {arg:?} is not a number: {e}"))
        };
        match function {
            "whoami" => Ok(DemoCall::Whoami),
            "echo" => Ok(DemoCall::Echo(arg.unwrap_or("hello").to_string())),
            "sleep" => Ok(DemoCall::Sleep(number("sleep")?)),
            "burn" => Ok(DemoCall::Burn(number("burn")?)),
            other => Err(format!(
                "unknown load function {other:?} (whoami, echo, sleep, burn)"
            )),
        }
    }

    /// Runs one call through `balancer`; the serving node on success.
    async fn run(
        &self,
        balancer: &Balancer,
        timeout: Duration,
        key: u64,
    ) -> Result<Arc<str>, Error> {
        let key = key.to_be_bytes();
        match self {
            DemoCall::Whoami => balancer
                .call::<Whoami>(())
                .key(key)
                .timeout(timeout)
                .with_node()
                .await
                .map(|r| r.1),
            DemoCall::Echo(text) => balancer
                .call::<Echo>(text.clone())
                .key(key)
                .timeout(timeout)
                .with_node()
                .await
                .map(|r| r.1),
            DemoCall::Sleep(ms) => balancer
                .call::<Sleep>(*ms)
                .key(key)
                .timeout(timeout)
                .with_node()
                .await
                .map(|r| r.1),
            DemoCall::Burn(ms) => balancer
                .call::<Burn>(*ms)
                .key(key)
                .timeout(timeout)
                .with_node()
                .await
                .map(|r| r.1),
        }
    }
}

/// When a load run stops.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    /// After this many calls.
    Calls(u64),
    /// After this long.
    Duration(Duration),
}

/// Why one call failed, as a report counts it: the error's kind and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind, e.g. `request_timeout` ([`Error::kind`] for the library's errors).
    pub kind: String,
    /// The message (the first one of each kind is kept as a sample).
    pub message: String,
}

impl Failure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Self::new(error.kind(), error.to_string())
    }
}

/// What one call ended with: the node that served it, or why it failed.
pub type Outcome = Result<Arc<str>, Failure>;

/// The progress bar style of `rpclb load`, `demo` and `bench` (on stderr; drawn only when it
/// is a terminal): `len` calls, or with `seconds` a run of `len` seconds; the message shows
/// calls, calls/s and errors as they happen ([`progress_message`]).
pub fn progress_bar(
    len: u64,
    seconds: bool,
    prefix: impl Into<std::borrow::Cow<'static, str>>,
) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let template = if seconds {
        "{prefix:>12} [{bar:40}] {pos}/{len} s {msg}"
    } else {
        "{prefix:>12} [{bar:40}] {pos}/{len} {msg}"
    };
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(prefix);
    bar
}

/// The live line of a run's progress: `calls` done so far, the rate of the last interval in
/// calls/s, and the failed calls by kind, e.g. `1200 calls, 950 calls/s, 3 errors
/// (request_timeout 3)`.
pub fn progress_message(calls: u64, calls_per_sec: f64, errors: &BTreeMap<String, u64>) -> String {
    let failed: u64 = errors.values().sum();
    let mut message = format!("{calls} calls, {calls_per_sec:.0} calls/s, {failed} errors");
    if failed > 0 {
        let kinds: Vec<String> = errors
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        message.push_str(&format!(" ({})", kinds.join(", ")));
    }
    message
}

/// What a load run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// The balancer's algorithm.
    pub algorithm: String,
    /// Calls made.
    pub calls: u64,
    /// Calls that succeeded, per serving node.
    pub per_node: BTreeMap<String, u64>,
    /// Failed calls per error kind.
    pub errors: BTreeMap<String, u64>,
    /// The first error message seen of each kind.
    pub error_samples: BTreeMap<String, String>,
    /// Latencies of all calls, µs (a bounded histogram).
    pub latency: Latencies,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Calls that failed.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Calls that succeeded.
    pub fn ok_count(&self) -> u64 {
        self.per_node.values().sum()
    }

    /// The `p`-th percentile latency in µs (`p` in 0..=100, nearest rank, within the
    /// precision of [`Latencies`]).
    pub fn percentile_us(&self, p: f64) -> u64 {
        self.latency.percentile_us(p)
    }

    /// Calls per second of wall time.
    pub fn calls_per_sec(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Adds `other` (another caller's or batch's report) to this one: counts and latencies
    /// add up, the elapsed times too.
    pub fn absorb(&mut self, other: LoadReport) {
        self.calls += other.calls;
        self.latency.absorb(&other.latency);
        for (node, n) in other.per_node {
            *self.per_node.entry(node).or_default() += n;
        }
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
        for (kind, message) in other.error_samples {
            self.error_samples.entry(kind).or_insert(message);
        }
        self.elapsed += other.elapsed;
    }

    /// Lists each of `nodes` in [`LoadReport::per_node`], with 0 calls if it served none.
    pub fn list_nodes<'a>(&mut self, nodes: impl IntoIterator<Item = &'a String>) {
        for node in nodes {
            self.per_node.entry(node.clone()).or_insert(0);
        }
    }

    /// The report as JSON without `algorithm`: `calls`, `ok`, `errors` {kind: n},
    /// `error_samples` {kind: first message}, `per_node` {node: n},
    /// `share` {node: fraction of successful calls}, `latency_us` {p50, p90, p99, max},
    /// `elapsed_ms`, `calls_per_sec`.
    pub fn summary_json(&self) -> Value {
        let ok = self.ok_count();
        let share: BTreeMap<&String, f64> = self
            .per_node
            .iter()
            .map(|(n, c)| (n, if ok == 0 { 0.0 } else { *c as f64 / ok as f64 }))
            .collect();
        json!({
            "calls": self.calls,
            "ok": ok,
            "errors": self.errors,
            "error_samples": self.error_samples,
            "per_node": self.per_node,
            "share": share,
            "latency_us": self.latency.to_json(),
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "calls_per_sec": self.calls_per_sec().round(),
        })
    }

    /// The report as JSON: `algorithm` and the fields of [`LoadReport::summary_json`].
    pub fn to_json(&self) -> Value {
        let mut value = self.summary_json();
        value["algorithm"] = json!(self.algorithm);
        value
    }

    /// The report as a text table.
    pub fn to_table(&self) -> String {
        let ok = self.ok_count();
        let mut out = format!(
            "{}: {} calls in {:.2} s ({:.0} calls/s), {} errors\n",
            self.algorithm,
            self.calls,
            self.elapsed.as_secs_f64(),
            self.calls_per_sec(),
            self.error_count()
        );
        out.push_str(&format!("  {:<32} {:>8} {:>7}\n", "node", "calls", "share"));
        for (node, count) in &self.per_node {
            let share = if ok == 0 {
                0.0
            } else {
                100.0 * *count as f64 / ok as f64
            };
            out.push_str(&format!("  {node:<32} {count:>8} {share:>6.1}%\n"));
        }
        for (kind, count) in &self.errors {
            out.push_str(&format!("  error {kind:<26} {count:>8}\n"));
            if let Some(sample) = self.error_samples.get(kind) {
                out.push_str(&format!("    e.g. {sample}\n"));
            }
        }
        out.push_str(&format!(
            "  latency p50 {} µs, p99 {} µs, max {} µs\n",
            self.percentile_us(50.0),
            self.percentile_us(99.0),
            self.latency.max_us()
        ));
        out
    }
}

/// The run's tally, shared by its callers (each records a call under the lock: memory stays
/// flat, nodes kept as `Arc<str>` so counting a success allocates nothing).
#[derive(Default)]
struct Tally {
    calls: u64,
    per_node: BTreeMap<Arc<str>, u64>,
    errors: BTreeMap<String, u64>,
    error_samples: BTreeMap<String, String>,
    latency: Latencies,
}

impl Tally {
    fn record(&mut self, latency: Duration, outcome: Outcome) {
        self.latency
            .record(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
        self.calls += 1;
        match outcome {
            Ok(node) => *self.per_node.entry(node).or_default() += 1,
            Err(failure) => {
                *self.errors.entry(failure.kind.clone()).or_default() += 1;
                self.error_samples
                    .entry(failure.kind)
                    .or_insert(failure.message);
            }
        }
    }

    fn into_report(self) -> LoadReport {
        LoadReport {
            calls: self.calls,
            per_node: self
                .per_node
                .into_iter()
                .map(|(node, n)| (node.to_string(), n))
                .collect(),
            errors: self.errors,
            error_samples: self.error_samples,
            latency: self.latency,
            ..LoadReport::default()
        }
    }
}

/// Locks the shared tally (a panic elsewhere does not void what was counted).
fn lock(tally: &Mutex<Tally>) -> MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How often the progress message is refreshed.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Refreshes `bar`'s message from `tally` every [`PROGRESS_EVERY`] (calls, calls/s over the
/// last interval, errors) until dropped; with a run of `seconds`, its position too.
async fn show_progress(
    bar: ProgressBar,
    tally: Arc<Mutex<Tally>>,
    started: Instant,
    seconds: bool,
) {
    let mut ticks = tokio::time::interval(PROGRESS_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut last_calls, mut last_at) = (0, Instant::now());
    loop {
        ticks.tick().await;
        let (calls, errors) = {
            let tally = lock(&tally);
            (tally.calls, tally.errors.clone())
        };
        let now = Instant::now();
        let rate =
            (calls - last_calls) as f64 / now.duration_since(last_at).as_secs_f64().max(1e-3);
        (last_calls, last_at) = (calls, now);
        bar.set_message(progress_message(calls, rate, &errors));
        if seconds {
            bar.set_position(now.duration_since(started).as_secs());
        }
    }
}

/// The load engine: `concurrency` callers, each on its own task, make calls back to back until
/// `amount` is reached or `stop` resolves; every call is timed from just before `call(caller,
/// n)` is invoked to when its future completes. `caller` is the caller's index
/// (0..concurrency) and `n` the call's number in the run. With `Amount::Calls` the bar
/// advances by one per call; with `Amount::Duration` it shows whole seconds elapsed; its
/// message shows calls, calls/s and errors as they happen. Callers started after the run's
/// end make no call, and a call started before it is awaited. When `stop` resolves first, the
/// calls in flight are dropped and the report counts the calls that had ended; the second
/// value is then `true`.
///
/// The report's `algorithm` is empty. Its memory does not grow with the number of calls.
pub async fn drive_until<C, Fut>(
    concurrency: u32,
    amount: Amount,
    bar: &ProgressBar,
    stop: impl std::future::Future<Output = ()>,
    call: C,
) -> (LoadReport, bool)
where
    C: Fn(u32, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    let issued = Arc::new(AtomicU64::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let deadline = match amount {
        Amount::Duration(d) => Some(started + d),
        Amount::Calls(_) => None,
    };
    let mut callers = JoinSet::new();
    for caller in 0..concurrency {
        let (call, issued, tally) = (call.clone(), Arc::clone(&issued), Arc::clone(&tally));
        let bar = bar.clone();
        callers.spawn(async move {
            loop {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                match (amount, deadline) {
                    (Amount::Calls(total), _) if n >= total => break,
                    (_, Some(deadline)) if Instant::now() >= deadline => break,
                    _ => {}
                }
                let at = Instant::now();
                let outcome = call(caller, n).await;
                lock(&tally).record(at.elapsed(), outcome);
                if deadline.is_none() {
                    bar.inc(1);
                }
            }
        });
    }
    let progress = tokio::spawn(show_progress(
        bar.clone(),
        Arc::clone(&tally),
        started,
        deadline.is_some(),
    ));
    let all_done = async { while callers.join_next().await.is_some() {} };
    let stopped = tokio::select! {
        () = all_done => false,
        () = stop => true,
    };
    // Stopped: the calls in flight are dropped with their callers.
    callers.shutdown().await;
    progress.abort();
    let elapsed = started.elapsed();
    let tally = std::mem::take(&mut *lock(&tally));
    let rate = tally.calls as f64 / elapsed.as_secs_f64().max(1e-9);
    bar.set_message(progress_message(tally.calls, rate, &tally.errors));
    let mut report = tally.into_report();
    report.elapsed = elapsed;
    (report, stopped)
}

/// [`drive_until`] with no stop: the run ends when `amount` is reached.
pub async fn drive<C, Fut>(
    concurrency: u32,
    amount: Amount,
    bar: &ProgressBar,
    call: C,
) -> LoadReport
where
    C: Fn(u32, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    drive_until(concurrency, amount, bar, std::future::pending(), call)
        .await
        .0
}

/// Streams `call` through `balancer` from `concurrency` callers until `amount` is reached.
/// Shows a progress bar on stderr when `progress` (and stderr is a terminal).
pub async fn run(
    balancer: &Balancer,
    call: &DemoCall,
    amount: Amount,
    concurrency: u32,
    timeout: Duration,
    progress: bool,
) -> LoadReport {
    run_until(
        balancer,
        call,
        amount,
        concurrency,
        timeout,
        progress,
        std::future::pending(),
    )
    .await
    .0
}

/// [`run`] that also ends when `stop` resolves: the report then counts the calls that had
/// ended, and the second value is `true` (see [`drive_until`]).
pub async fn run_until(
    balancer: &Balancer,
    call: &DemoCall,
    amount: Amount,
    concurrency: u32,
    timeout: Duration,
    progress: bool,
    stop: impl std::future::Future<Output = ()>,
) -> (LoadReport, bool) {
    let bar = match (progress, amount) {
        (true, Amount::Calls(n)) => progress_bar(n, false, balancer_algorithm(balancer)),
        (true, Amount::Duration(d)) => progress_bar(
            d.as_secs_f64().ceil().max(1.0) as u64,
            true,
            balancer_algorithm(balancer),
        ),
        (false, _) => ProgressBar::hidden(),
    };
    let (balancer_ref, call_ref) = (balancer.clone(), Arc::new(call.clone()));
    let (mut report, stopped) = drive_until(concurrency, amount, &bar, stop, move |_caller, n| {
        let (balancer, call) = (balancer_ref.clone(), Arc::clone(&call_ref));
        async move { call.run(&balancer, timeout, n).await.map_err(Failure::from) }
    })
    .await;
    report.algorithm = balancer_algorithm(balancer);
    bar.finish_and_clear();
    (report, stopped)
}

fn balancer_algorithm(balancer: &Balancer) -> String {
    balancer.algorithm_name().to_string()
}

/// Waits until `balancer` has at least `count` members, at most `timeout`.
///
/// Errors: [`Error::NoMembers`] if it does not.
pub async fn wait_for_members(
    balancer: &Balancer,
    count: usize,
    timeout: Duration,
) -> Result<(), Error> {
    let mut members = balancer.watch_members();
    let reached = tokio::time::timeout(timeout, members.wait_for(|m| m.len() >= count)).await;
    match reached {
        Ok(Ok(_)) => Ok(()),
        _ => Err(Error::NoMembers {
            balancer: balancer.name().to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `calls` calls that end at once: every third fails, the others are served by
    /// `a` or `b` in turn.
    async fn instant_run(calls: u64, bar: &ProgressBar) -> LoadReport {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        drive(4, Amount::Calls(calls), bar, move |_, n| {
            let served = if n % 2 == 0 { a.clone() } else { b.clone() };
            async move {
                if n % 3 == 0 {
                    Err(Failure::new("node_down", format!("call {n}")))
                } else {
                    Ok(served)
                }
            }
        })
        .await
    }

    #[tokio::test]
    async fn a_run_holds_the_same_memory_for_any_number_of_calls() {
        let short = instant_run(30, &ProgressBar::hidden()).await;
        let long = instant_run(300_000, &ProgressBar::hidden()).await;
        assert_eq!(long.calls, 300_000);
        assert_eq!(long.latency.count(), 300_000);
        assert_eq!(long.error_count(), 100_000);
        assert_eq!(long.ok_count(), 200_000);
        assert_eq!(short.latency.size_bytes(), long.latency.size_bytes());
        assert_eq!(short.latency.size_bytes(), Latencies::new().size_bytes());
        // Bounded by nodes and error kinds, not calls.
        assert_eq!(long.per_node.len(), 2);
        assert_eq!(long.error_samples.len(), 1);
        assert_eq!(long.error_samples["node_down"], "call 0");
    }

    #[tokio::test]
    async fn the_progress_counts_calls_and_errors() {
        let bar = ProgressBar::hidden();
        let report = instant_run(30, &bar).await;
        assert_eq!(bar.position(), 30);
        let message = bar.message();
        assert!(
            message.starts_with("30 calls, ")
                && message.ends_with(" calls/s, 10 errors (node_down 10)"),
            "{message}"
        );
        assert_eq!(report.error_count(), 10);
    }

    #[test]
    fn the_progress_message_names_each_error_kind() {
        let mut errors = BTreeMap::new();
        assert_eq!(
            progress_message(1200, 950.4, &errors),
            "1200 calls, 950 calls/s, 0 errors"
        );
        errors.insert("request_timeout".to_string(), 3);
        errors.insert("node_down".to_string(), 2);
        assert_eq!(
            progress_message(1200, 0.0, &errors),
            "1200 calls, 0 calls/s, 5 errors (node_down 2, request_timeout 3)"
        );
    }

    #[tokio::test]
    async fn a_stopped_run_reports_the_calls_that_ended() {
        let (report, stopped) = drive_until(
            2,
            Amount::Calls(1_000),
            &ProgressBar::hidden(),
            tokio::time::sleep(Duration::from_millis(100)),
            |_, n| async move {
                if n >= 10 {
                    std::future::pending::<()>().await;
                }
                Ok(Arc::from("a"))
            },
        )
        .await;
        assert!(stopped);
        assert_eq!(report.calls, 10);
        assert_eq!(report.per_node["a"], 10);
    }

    #[test]
    fn nodes_without_calls_are_listed_with_zero() {
        let mut report = LoadReport::default();
        report.per_node.insert("a".into(), 3);
        report.list_nodes(&["a".to_string(), "b".to_string()]);
        assert_eq!(report.per_node["a"], 3);
        assert_eq!(report.per_node["b"], 0);
        let json = report.summary_json();
        assert_eq!(json["per_node"]["b"], 0);
        assert_eq!(json["share"]["b"], 0.0);
        assert!(report.to_table().contains("  b "), "{}", report.to_table());
    }
}
