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

    /// The `p`-th percentile latency in µs (`p` in 0..=100).
    pub fn percentile_us(&self, p: f64) -> u64 {
        if self.latencies_us.is_empty() {
            return 0;
        }
        let rank = ((p / 100.0) * (self.latencies_us.len() - 1) as f64).round() as usize;
        self.latencies_us[rank.min(self.latencies_us.len() - 1)]
    }

    /// The report as JSON: `algorithm`, `calls`, `ok`, `errors` {kind: n}, `error_samples`
    /// {kind: first message}, `per_node` {node: n},
    /// `share` {node: fraction of successful calls}, `latency_us` {p50, p90, p99, max},
    /// `elapsed_ms`, `calls_per_sec`.
    pub fn to_json(&self) -> Value {
        let ok: u64 = self.per_node.values().sum();
        let share: BTreeMap<&String, f64> = self
            .per_node
            .iter()
            .map(|(n, c)| (n, if ok == 0 { 0.0 } else { *c as f64 / ok as f64 }))
            .collect();
        json!({
            "algorithm": self.algorithm,
            "calls": self.calls,
            "ok": ok,
            "errors": self.errors,
            "error_samples": self.error_samples,
            "per_node": self.per_node,
            "share": share,
            "latency_us": {
                "p50": self.percentile_us(50.0),
                "p90": self.percentile_us(90.0),
                "p99": self.percentile_us(99.0),
                "max": self.latencies_us.last().copied().unwrap_or(0),
            },
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "calls_per_sec": (self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)).round(),
        })
    }

    /// The report as a text table.
    pub fn to_table(&self) -> String {
        let ok: u64 = self.per_node.values().sum();
        let mut out = format!(
            "{}: {} calls in {:.2} s ({:.0} calls/s), {} errors\n",
            self.algorithm,
            self.calls,
            self.elapsed.as_secs_f64(),
            self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9),
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
    let issued = Arc::new(AtomicU64::new(0));
    let bar = match (progress, amount) {
        (true, Amount::Calls(n)) => ProgressBar::new(n),
        (true, Amount::Duration(d)) => ProgressBar::new(d.as_secs().max(1)),
        (false, _) => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:40}] {pos}/{len} {per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(balancer_algorithm(balancer));
    let started = Instant::now();
    let deadline = match amount {
        Amount::Duration(d) => Some(started + d),
        Amount::Calls(_) => None,
    };
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (balancer, call, issued, bar) = (
            balancer.clone(),
            call.clone(),
            Arc::clone(&issued),
            bar.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut part = LoadReport::default();
            loop {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                match (amount, deadline) {
                    (Amount::Calls(total), _) if n >= total => break,
                    (_, Some(deadline)) if Instant::now() >= deadline => break,
                    _ => {}
                }
                let at = Instant::now();
                let outcome = call.run(&balancer, timeout, n).await;
                part.latencies_us.push(at.elapsed().as_micros() as u64);
                part.calls += 1;
                match outcome {
                    Ok(node) => *part.per_node.entry(node.to_string()).or_default() += 1,
                    Err(error) => {
                        *part.errors.entry(error.kind().to_string()).or_default() += 1;
                        part.error_samples
                            .entry(error.kind().to_string())
                            .or_insert_with(|| error.to_string());
                    }
                }
                if deadline.is_none() {
                    bar.inc(1);
                } else {
                    bar.set_position(at.duration_since(started).as_secs());
                }
            }
            part
        }));
    }
    let mut report = LoadReport {
        algorithm: balancer_algorithm(balancer),
        ..LoadReport::default()
    };
    for task in tasks {
        if let Ok(part) = task.await {
            report.calls += part.calls;
            report.latencies_us.extend(part.latencies_us);
            for (node, n) in part.per_node {
                *report.per_node.entry(node).or_default() += n;
            }
            for (kind, n) in part.errors {
                *report.errors.entry(kind).or_default() += n;
            }
            for (kind, message) in part.error_samples {
                report.error_samples.entry(kind).or_insert(message);
            }
        }
    }
    report.elapsed = started.elapsed();
    report.latencies_us.sort_unstable();
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
