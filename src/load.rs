//! The load engine behind `rpclb load` and `rpclb demo`: concurrent callers stream calls
//! through a balancer; the report counts calls per serving node, errors by kind, and latency
//! percentiles.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use rpc_load_balancer::{Balancer, Error};
use serde_json::{json, Value};

use crate::functions::{Burn, Echo, Sleep, Whoami};

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

/// The `p`-th percentile (`p` in 0..=100, nearest rank) of ascending `sorted` values; 0 when
/// empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// `{"p50","p90","p99","max"}` of ascending `sorted` latencies (µs), as every report prints
/// them.
pub fn latency_json(sorted: &[u64]) -> Value {
    json!({
        "p50": percentile(sorted, 50.0),
        "p90": percentile(sorted, 90.0),
        "p99": percentile(sorted, 99.0),
        "max": sorted.last().copied().unwrap_or(0),
    })
}

/// The progress bar style of `rpclb load`, `demo` and `bench` (on stderr; drawn only when it
/// is a terminal).
pub fn progress_bar(len: u64, prefix: impl Into<std::borrow::Cow<'static, str>>) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(prefix);
    bar
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
    /// Latencies of all calls in µs, sorted.
    pub latencies_us: Vec<u64>,
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

    /// The `p`-th percentile latency in µs (`p` in 0..=100).
    pub fn percentile_us(&self, p: f64) -> u64 {
        percentile(&self.latencies_us, p)
    }

    /// Calls per second of wall time.
    pub fn calls_per_sec(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Adds `other` (another caller's or batch's report) to this one: counts and latencies
    /// add up, the elapsed times too (call [`LoadReport::finish`] after the last one).
    pub fn absorb(&mut self, other: LoadReport) {
        self.calls += other.calls;
        self.latencies_us.extend(other.latencies_us);
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

    /// Sorts the latencies (percentiles need them sorted).
    pub fn finish(&mut self) {
        self.latencies_us.sort_unstable();
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
            "latency_us": latency_json(&self.latencies_us),
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
            self.latencies_us.last().copied().unwrap_or(0)
        ));
        out
    }
}

/// One caller's tally while it runs (nodes kept as `Arc<str>`, so counting a success
/// allocates nothing).
#[derive(Default)]
struct Tally {
    calls: u64,
    per_node: BTreeMap<Arc<str>, u64>,
    errors: BTreeMap<String, u64>,
    error_samples: BTreeMap<String, String>,
    latencies_us: Vec<u64>,
}

impl Tally {
    fn record(&mut self, latency: Duration, outcome: Outcome) {
        self.latencies_us.push(latency.as_micros() as u64);
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
            latencies_us: self.latencies_us,
            ..LoadReport::default()
        }
    }
}

/// The load engine: `concurrency` callers, each on its own task, make calls back to back until
/// `amount` is reached; every call is timed from just before `call(caller, n)` is invoked to
/// when its future completes. `caller` is the caller's index (0..concurrency) and `n` the
/// call's number in the run. With `Amount::Calls` the bar advances by one per call; with
/// `Amount::Duration` it shows whole seconds elapsed. Callers started after the run's end
/// make no call, and a call started before it is awaited.
///
/// The report's `algorithm` is empty and its latencies are sorted.
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
    let issued = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = match amount {
        Amount::Duration(d) => Some(started + d),
        Amount::Calls(_) => None,
    };
    let mut tasks = Vec::new();
    for caller in 0..concurrency {
        let (call, issued, bar) = (call.clone(), Arc::clone(&issued), bar.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            if let Amount::Calls(total) = amount {
                let share = total / u64::from(concurrency) + 1;
                tally.latencies_us.reserve(share.min(1 << 20) as usize);
            }
            loop {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                match (amount, deadline) {
                    (Amount::Calls(total), _) if n >= total => break,
                    (_, Some(deadline)) if Instant::now() >= deadline => break,
                    _ => {}
                }
                let at = Instant::now();
                let outcome = call(caller, n).await;
                tally.record(at.elapsed(), outcome);
                if deadline.is_none() {
                    bar.inc(1);
                } else {
                    bar.set_position(at.duration_since(started).as_secs());
                }
            }
            tally
        }));
    }
    let mut report = LoadReport::default();
    for task in tasks {
        if let Ok(tally) = task.await {
            report.absorb(tally.into_report());
        }
    }
    report.elapsed = started.elapsed();
    report.finish();
    report
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
    let bar = match (progress, amount) {
        (true, Amount::Calls(n)) => progress_bar(n, balancer_algorithm(balancer)),
        (true, Amount::Duration(d)) => {
            progress_bar(d.as_secs().max(1), balancer_algorithm(balancer))
        }
        (false, _) => ProgressBar::hidden(),
    };
    let (balancer_ref, call_ref) = (balancer.clone(), Arc::new(call.clone()));
    let mut report = drive(concurrency, amount, &bar, move |_caller, n| {
        let (balancer, call) = (balancer_ref.clone(), Arc::clone(&call_ref));
        async move { call.run(&balancer, timeout, n).await.map_err(Failure::from) }
    })
    .await;
    report.algorithm = balancer_algorithm(balancer);
    bar.finish_and_clear();
    report
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
