//! The node's CPU sampler: how a node measures its own CPU load, and the task that publishes
//! it.
//!
//! Every [`Node`](crate::Node) runs one sampling task (started by `Node::start` and
//! `Node::attach`, stopped by `Node::shutdown`). Every
//! [`cpu_sample_interval`](crate::NodeConfig::cpu_sample_interval) it takes one sample with
//! the node's [`CpuSampler`] on tokio's blocking pool (sysinfo reads `/proc`, and a custom
//! function may block: neither may stall the runtime), and stores a good one in the
//! process-wide cache under the node's own name. That cached reading is what the node answers
//! to CPU-reading requests ([`ControlRequest::CpuReading`](crate::ControlRequest::CpuReading)),
//! with its age.
//!
//! **The first sample is withheld** for the measuring samplers ([`CpuSampler::System`],
//! [`CpuSampler::Process`], [`CpuSampler::Runtime`]): a utilisation is a difference between two
//! readings of a counter, and the first one has nothing to compare with (sysinfo reports 0.0).
//! Publishing it would make a fresh node look idle and herd every caller onto it.
//!
//! **A failed sample publishes nothing.** A sampler that panics, or returns NaN, an infinity, a
//! negative value or a value above 100, is logged at WARN (naming the node and why) and the
//! previous reading stays in place, aging: callers stop trusting it once it is older than their
//! `cpu_cache_ttl`, instead of routing by a made-up figure. The task keeps sampling.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::Error;

/// How a node measures its CPU load, in percent (0–100). Set it with
/// [`NodeConfig::cpu_sampler`](crate::NodeConfig::cpu_sampler); the default is
/// [`CpuSampler::System`].
///
/// The text form (`rpclb node --cpu-sampler SPEC`, [`FromStr`] and [`Display`](fmt::Display))
/// is one of `system`, `process` and `runtime`; a [`CpuSampler::Custom`] displays as `custom`
/// and has no text form. (A build with the `test-hooks` feature adds samplers that pin or break
/// a node's reading, for tests; see the crate's feature list.)
///
/// The node samples on tokio's blocking pool, never on the runtime's workers. The measuring
/// samplers (System, Process, Runtime) **withhold their first sample**: a utilisation is a
/// difference between two readings, and a first figure of 0.0 would herd every caller onto a
/// fresh node. **A failed sample publishes nothing** — a panic, NaN, an infinity, a negative
/// value or one above 100 is logged at WARN with the node's name and the reason, and the
/// previous reading stays, aging, until callers stop trusting it (`cpu_cache_ttl`).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::cpu::CpuSampler;
/// use rpc_load_balancer::NodeConfig;
///
/// // The same sampler from code and from a flag (`rpclb node --cpu-sampler process`).
/// let sampler: CpuSampler = "process".parse()?;
/// let config = NodeConfig::new("worker", "127.0.0.1:0")
///     .cookie("secret")
///     .cpu_sampler(sampler)
///     .cpu_sample_interval(Duration::from_millis(500));
///
/// // Or a function of your own, e.g. a load figure your service already computes.
/// let custom = CpuSampler::custom(|| 42.0);
/// assert_eq!(custom.to_string(), "custom");
/// # let _ = config;
/// # Ok::<(), rpc_load_balancer::Error>(())
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum CpuSampler {
    /// The whole machine's CPU utilisation (sysinfo's global CPU usage over all cores since
    /// the previous sample). The default: a node's callers compete with everything else on
    /// its machine. The first sample is withheld; at intervals under 200 ms (sysinfo's
    /// `MINIMUM_CPU_UPDATE_INTERVAL` on Linux) the machine's counters are re-read only every
    /// 200 ms, and the samples in between repeat the previous figure.
    #[default]
    System,
    /// This process's CPU time (all its threads) over wall time since the previous sample,
    /// divided by the cores this process may use (`std::thread::available_parallelism`, which
    /// counts CPU affinity and cgroup quotas): 100 = every usable core busy with this process.
    /// The first sample is withheld. Linux counts CPU time in 10 ms ticks, so at short
    /// intervals the figure is coarse (±10 ms per core per interval).
    Process,
    /// The share of time the tokio runtime that started the node keeps its workers busy:
    /// the growth of tokio's `RuntimeMetrics::worker_total_busy_duration`, summed over
    /// `num_workers`, divided by the wall time since the previous sample × the number of
    /// workers, × 100. It sees only async work on that runtime (not the blocking pool, nor
    /// other runtimes or processes). The first sample is withheld. tokio adds a worker's busy
    /// time when the worker parks, so a long busy stretch may land in one sample: values are
    /// capped at 100. Needs 64-bit atomics (every sample fails without them).
    Runtime,
    /// A function of your own, called on tokio's blocking pool once per interval (it may block
    /// briefly; a hanging function delays every later sample). A panic, NaN, infinity,
    /// negative value or value above 100 is a failed sample. Build it with
    /// [`CpuSampler::custom`].
    Custom(Arc<dyn Fn() -> f64 + Send + Sync>),
    /// Test sampler (feature `test-hooks`, hidden from the docs; text form `const:N`): always
    /// this value, from the first sample on. A value outside 0–100 (or NaN) fails every sample.
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    Const(f64),
    /// Test sampler (feature `test-hooks`, hidden from the docs; text form `panic`): panics on
    /// every sample (the node never publishes a reading).
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    Panic,
    /// Test sampler (feature `test-hooks`, hidden from the docs; text form
    /// `const-then-panic:N:AFTER_MS`): `value` until `after` has passed since sampling started,
    /// then panics on every sample (the node's last reading then ages).
    #[cfg(any(test, feature = "test-hooks"))]
    #[doc(hidden)]
    ConstThenPanic {
        /// The value before the switch, % (0–100).
        value: f64,
        /// Time from the start of sampling to the first panic.
        after: Duration,
    },
}

impl CpuSampler {
    /// A [`CpuSampler::Custom`] calling `sample` once per interval; it returns the node's CPU
    /// load in percent (0–100).
    pub fn custom(sample: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        Self::Custom(Arc::new(sample))
    }
}

impl fmt::Debug for CpuSampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::System => f.write_str("System"),
            Self::Process => f.write_str("Process"),
            Self::Runtime => f.write_str("Runtime"),
            Self::Custom(_) => f.write_str("Custom(..)"),
            #[cfg(any(test, feature = "test-hooks"))]
            Self::Const(value) => f.debug_tuple("Const").field(value).finish(),
            #[cfg(any(test, feature = "test-hooks"))]
            Self::Panic => f.write_str("Panic"),
            #[cfg(any(test, feature = "test-hooks"))]
            Self::ConstThenPanic { value, after } => f
                .debug_struct("ConstThenPanic")
                .field("value", value)
                .field("after", after)
                .finish(),
        }
    }
}

/// The flag syntax: `system`, `process`, `runtime`, and `custom` for a [`CpuSampler::Custom`]
/// (which does not parse back).
impl fmt::Display for CpuSampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::System => f.write_str("system"),
            Self::Process => f.write_str("process"),
            Self::Runtime => f.write_str("runtime"),
            Self::Custom(_) => f.write_str("custom"),
            #[cfg(any(test, feature = "test-hooks"))]
            Self::Const(value) => write!(f, "const:{value}"),
            #[cfg(any(test, feature = "test-hooks"))]
            Self::Panic => f.write_str("panic"),
            #[cfg(any(test, feature = "test-hooks"))]
            Self::ConstThenPanic { value, after } => {
                write!(f, "const-then-panic:{value}:{}", after.as_millis())
            }
        }
    }
}

/// The forms [`CpuSampler`]'s [`FromStr`] accepts, for error messages.
const SPECS: &str = "system, process, runtime (and with the `test-hooks` feature the test \
samplers const:N, panic, const-then-panic:N:AFTER_MS, N in %, AFTER in ms)";

/// Whether this build has the test samplers (feature `test-hooks`).
const TEST_SAMPLERS: bool = cfg!(any(test, feature = "test-hooks"));

/// Parses the flag syntax (see [`CpuSampler`]).
///
/// Errors: [`Error::InvalidConfig`] with option `cpu_sampler`, its reason naming the bad part
/// (an unknown sampler, a missing or extra `:` part, a number that does not parse or is not
/// within 0–100, a test sampler in a build without the `test-hooks` feature).
impl FromStr for CpuSampler {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let invalid = |reason: String| Error::InvalidConfig {
            option: "cpu_sampler",
            reason,
        };
        let mut parts = spec.split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let arity = |wanted: usize, form: &str| {
            if args.len() == wanted {
                Ok(())
            } else {
                Err(invalid(format!(
                    "{spec:?}: `{kind}` takes {wanted} `:` part(s) ({form}), got {}",
                    args.len()
                )))
            }
        };
        #[cfg(any(test, feature = "test-hooks"))]
        let percent = |text: &str| {
            let value = text
                .parse::<f64>()
                .map_err(|e| invalid(format!("{spec:?}: N = {text:?} is not a number: {e}")))?;
            if (0.0..=100.0).contains(&value) {
                Ok(value)
            } else {
                Err(invalid(format!(
                    "{spec:?}: N = {text:?} is not a percentage from 0 to 100"
                )))
            }
        };
        match kind {
            "system" => arity(0, "system").map(|()| Self::System),
            "process" => arity(0, "process").map(|()| Self::Process),
            "runtime" => arity(0, "runtime").map(|()| Self::Runtime),
            "panic" | "const" | "const-then-panic" if !TEST_SAMPLERS => {
                Err(invalid(test_sampler_refused(spec)))
            }
            #[cfg(any(test, feature = "test-hooks"))]
            "panic" => arity(0, "panic").map(|()| Self::Panic),
            #[cfg(any(test, feature = "test-hooks"))]
            "const" => {
                arity(1, "const:N")?;
                Ok(Self::Const(percent(args[0])?))
            }
            #[cfg(any(test, feature = "test-hooks"))]
            "const-then-panic" => {
                arity(2, "const-then-panic:N:AFTER_MS")?;
                let value = percent(args[0])?;
                let after_ms = args[1].parse::<u64>().map_err(|e| {
                    invalid(format!(
                        "{spec:?}: AFTER_MS = {:?} is not a whole number of ms: {e}",
                        args[1]
                    ))
                })?;
                Ok(Self::ConstThenPanic {
                    value,
                    after: Duration::from_millis(after_ms),
                })
            }
            "custom" => Err(invalid(
                "a custom sampler is built in code (CpuSampler::custom), not from text".into(),
            )),
            other => Err(invalid(format!(
                "unknown sampler {other:?} in {spec:?}; known: {SPECS}"
            ))),
        }
    }
}

/// Why a test sampler's text form `spec` does not parse in a build without the `test-hooks`
/// feature.
fn test_sampler_refused(spec: &str) -> String {
    format!(
        "{spec:?} is a test sampler: it needs rpc_load_balancer's `test-hooks` feature, which this \
         build does not have (the rpclb binary's default build has it)"
    )
}

/// What a sampler gave this time.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sample {
    /// A figure to check and publish.
    Value(f64),
    /// Nothing to publish yet (the first sample of a measuring sampler).
    Withheld,
}

/// What a sampler carries from one sample to the next. Owned by the sampling task and lent to
/// a blocking-pool thread for each sample.
struct SamplerState {
    sampler: CpuSampler,
    /// When sampling started (for the `const-then-panic` test sampler).
    #[cfg(any(test, feature = "test-hooks"))]
    started: Instant,
    /// sysinfo's state (System and Process).
    system: Option<sysinfo::System>,
    /// When the first System refresh was made.
    primed_at: Option<Instant>,
    /// The previous cumulative busy time (seconds) and when it was read (Process, Runtime).
    previous: Option<(f64, Instant)>,
    /// The runtime the node was started on (Runtime).
    runtime: Option<tokio::runtime::Handle>,
}

impl SamplerState {
    fn new(sampler: CpuSampler, runtime: Option<tokio::runtime::Handle>) -> Self {
        Self {
            sampler,
            #[cfg(any(test, feature = "test-hooks"))]
            started: Instant::now(),
            system: None,
            primed_at: None,
            previous: None,
            runtime,
        }
    }

    /// Takes one sample. `Err` is a failed sample with the reason; may panic (test samplers,
    /// custom functions).
    fn sample(&mut self) -> Result<Sample, String> {
        #[cfg(any(test, feature = "test-hooks"))]
        let started = self.started;
        let Self {
            sampler,
            system,
            primed_at,
            previous,
            runtime,
            ..
        } = self;
        match sampler {
            CpuSampler::System => {
                let system = system.get_or_insert_with(sysinfo::System::new);
                system.refresh_cpu_usage();
                // sysinfo re-reads the counters only every MINIMUM_CPU_UPDATE_INTERVAL: until
                // one such period has passed since the first refresh, its figure is still 0.0.
                let primed = *primed_at.get_or_insert_with(Instant::now);
                if primed.elapsed() < sysinfo::MINIMUM_CPU_UPDATE_INTERVAL {
                    return Ok(Sample::Withheld);
                }
                Ok(measured(f64::from(system.global_cpu_usage())))
            }
            CpuSampler::Process => {
                let pid = sysinfo::get_current_pid()
                    .map_err(|e| format!("cannot find this process's id: {e}"))?;
                let system = system.get_or_insert_with(sysinfo::System::new);
                system.refresh_processes_specifics(
                    sysinfo::ProcessesToUpdate::Some(&[pid]),
                    false,
                    sysinfo::ProcessRefreshKind::nothing().with_cpu(),
                );
                let now = Instant::now();
                let cpu_ms = system
                    .process(pid)
                    .ok_or_else(|| format!("sysinfo does not list this process ({pid})"))?
                    .accumulated_cpu_time();
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                Ok(busy_share(previous, cpu_ms as f64 / 1_000.0, now, cores))
            }
            CpuSampler::Runtime => {
                let handle = runtime
                    .as_ref()
                    .ok_or("the node was not started on a tokio runtime")?;
                let (busy, workers) = runtime_busy(handle)?;
                Ok(busy_share(previous, busy, Instant::now(), workers))
            }
            CpuSampler::Custom(sample) => Ok(Sample::Value(sample())),
            #[cfg(any(test, feature = "test-hooks"))]
            CpuSampler::Const(value) => Ok(Sample::Value(*value)),
            #[cfg(any(test, feature = "test-hooks"))]
            CpuSampler::Panic => panic!("the `panic` test sampler panics on every sample"),
            #[cfg(any(test, feature = "test-hooks"))]
            CpuSampler::ConstThenPanic { value, after } => {
                if started.elapsed() >= *after {
                    panic!(
                        "the `const-then-panic` test sampler panics {} ms after sampling started",
                        after.as_millis()
                    );
                }
                Ok(Sample::Value(*value))
            }
        }
    }
}

/// A measured figure, with rounding at the edges clamped into 0–100 (NaN and infinities stay,
/// to fail the check).
fn measured(cpu: f64) -> Sample {
    Sample::Value(if cpu.is_finite() {
        cpu.clamp(0.0, 100.0)
    } else {
        cpu
    })
}

/// The share (%) of `units` that was busy since the previous reading of the cumulative busy
/// time `busy_secs`; the first reading is withheld.
fn busy_share(
    previous: &mut Option<(f64, Instant)>,
    busy_secs: f64,
    now: Instant,
    units: usize,
) -> Sample {
    let Some((before, at)) = previous.replace((busy_secs, now)) else {
        return Sample::Withheld;
    };
    let wall = now.duration_since(at).as_secs_f64() * units.max(1) as f64;
    if wall <= 0.0 {
        return Sample::Withheld;
    }
    measured((busy_secs - before).max(0.0) / wall * 100.0)
}

/// The runtime's total worker busy time (seconds) and its number of workers.
#[cfg(target_has_atomic = "64")]
fn runtime_busy(handle: &tokio::runtime::Handle) -> Result<(f64, usize), String> {
    let metrics = handle.metrics();
    let workers = metrics.num_workers();
    let busy: Duration = (0..workers)
        .map(|worker| metrics.worker_total_busy_duration(worker))
        .sum();
    Ok((busy.as_secs_f64(), workers))
}

/// Without 64-bit atomics tokio has no busy-time metric.
#[cfg(not(target_has_atomic = "64"))]
fn runtime_busy(_: &tokio::runtime::Handle) -> Result<(f64, usize), String> {
    Err("tokio's worker busy time needs 64-bit atomics on this target".into())
}

/// Why `cpu` is not a publishable reading, if it isn't.
fn rejection(cpu: f64) -> Option<String> {
    if cpu.is_nan() {
        Some("the sample is NaN".into())
    } else if cpu.is_infinite() {
        Some(format!("the sample is {cpu}"))
    } else if cpu < 0.0 {
        Some(format!("the sample {cpu} is negative"))
    } else if cpu > 100.0 {
        Some(format!("the sample {cpu} is above 100"))
    } else {
        None
    }
}

/// Starts node `node`'s sampling task on the current tokio runtime: a sample with `sampler`
/// at once and then every `interval` (a late tick delays the next ones rather than bunching
/// them), each on the blocking pool; good samples are stored under `node` in the cache. Runs
/// until the returned handle is aborted (or the runtime stops).
///
/// Panics outside a tokio runtime (as `tokio::spawn` does).
pub(crate) fn spawn(sampler: CpuSampler, node: String, interval: Duration) -> JoinHandle<()> {
    let state = SamplerState::new(sampler, tokio::runtime::Handle::try_current().ok());
    tokio::spawn(run(node, interval.max(Duration::from_millis(1)), state))
}

/// The sampling loop.
async fn run(node: String, interval: Duration, mut state: SamplerState) {
    tracing::debug!(%node, sampler = %state.sampler, interval_ms = interval.as_millis() as u64, "CPU sampling started");
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let taken = tokio::task::spawn_blocking(move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| state.sample()));
            (state, outcome, Instant::now())
        })
        .await;
        let (back, outcome, taken_at) = match taken {
            Ok(taken) => taken,
            // Cancelled: the runtime is shutting down. (Panics are caught inside.)
            Err(_) => return,
        };
        state = back;
        let why = match outcome {
            Ok(Ok(Sample::Value(cpu))) => match rejection(cpu) {
                None => {
                    let age_ms = taken_at.elapsed().as_millis() as u64;
                    super::cache().store(&node, cpu, age_ms);
                    tracing::trace!(%node, cpu, "CPU sample published");
                    continue;
                }
                Some(why) => why,
            },
            Ok(Ok(Sample::Withheld)) => {
                tracing::trace!(%node, "CPU sample withheld (nothing to compare with yet)");
                continue;
            }
            Ok(Err(why)) => why,
            Err(panic) => format!(
                "the sampler panicked: {}",
                crate::panic::panic_message(panic.as_ref())
            ),
        };
        tracing::warn!(
            %node,
            sampler = %state.sampler,
            reason = %why,
            "CPU sample failed; nothing published (the node's last reading keeps aging)"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::cpu::{cache, CpuReading};

    /// Waits (≤ 5 s) until `node` has a reading that satisfies `ok`.
    async fn reading_of(node: &str, ok: impl Fn(&CpuReading) -> bool) -> Option<CpuReading> {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(reading) = cache().get(node) {
                    if ok(&reading) {
                        return reading;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .ok()
    }

    /// A custom sampler returning `value`, counting its calls.
    fn counted(value: f64) -> (CpuSampler, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let sampler = CpuSampler::custom(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            value
        });
        (sampler, calls)
    }

    /// Waits (≤ 5 s) until `calls` reaches `n`.
    async fn calls_reach(calls: &AtomicUsize, n: usize) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while calls.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the sampler was called");
    }

    #[test]
    fn the_flag_syntax_round_trips() {
        for spec in [
            "system",
            "process",
            "runtime",
            "const:42.5",
            "const:0",
            "const:100",
            "panic",
            "const-then-panic:30:2000",
        ] {
            let sampler: CpuSampler = spec.parse().unwrap();
            assert_eq!(sampler.to_string(), spec);
            let again: CpuSampler = sampler.to_string().parse().unwrap();
            assert_eq!(again.to_string(), spec);
        }
        assert!(matches!("system".parse(), Ok(CpuSampler::System)));
        assert!(matches!(
            "const-then-panic:7.5:250".parse(),
            Ok(CpuSampler::ConstThenPanic { value, after })
                if value == 7.5 && after == Duration::from_millis(250)
        ));
        assert_eq!(CpuSampler::default().to_string(), "system");
        assert_eq!(CpuSampler::custom(|| 1.0).to_string(), "custom");
        assert_eq!(format!("{:?}", CpuSampler::custom(|| 1.0)), "Custom(..)");
        assert_eq!(format!("{:?}", CpuSampler::Const(2.0)), "Const(2.0)");
    }

    #[test]
    fn a_build_without_test_hooks_names_the_feature_when_refusing_a_test_sampler() {
        let reason = test_sampler_refused("const:5");
        assert!(
            reason.starts_with("\"const:5\" is a test sampler"),
            "{reason}"
        );
        assert!(reason.contains("`test-hooks` feature"), "{reason}");
    }

    #[test]
    fn parse_errors_name_the_bad_part() {
        let reason = |spec: &str| match spec.parse::<CpuSampler>() {
            Err(Error::InvalidConfig {
                option: "cpu_sampler",
                reason,
            }) => reason,
            other => panic!("{spec}: expected InvalidConfig(cpu_sampler), got {other:?}"),
        };
        assert!(reason("sytem").contains("unknown sampler \"sytem\""));
        assert!(reason("").contains("unknown sampler \"\""));
        assert!(reason("const").contains("takes 1"));
        assert!(reason("const:").contains("N = \"\""));
        assert!(reason("const:abc").contains("N = \"abc\""));
        for out_of_range in [
            "const:-3",
            "const:NaN",
            "const:100.5",
            "const-then-panic:150:10",
        ] {
            assert!(
                reason(out_of_range).contains("not a percentage from 0 to 100"),
                "{out_of_range}"
            );
        }
        assert!(reason("const:1:2").contains("takes 1"));
        assert!(reason("system:1").contains("takes 0"));
        assert!(reason("const-then-panic:5").contains("takes 2"));
        assert!(reason("const-then-panic:x:5").contains("N = \"x\""));
        assert!(reason("const-then-panic:5:1.5").contains("AFTER_MS = \"1.5\""));
        assert!(reason("const-then-panic:5:-1").contains("AFTER_MS = \"-1\""));
        assert!(reason("custom").contains("CpuSampler::custom"));
    }

    #[tokio::test]
    async fn const_publishes_to_the_cache() {
        let node = "sampler-const@test";
        let task = spawn(
            CpuSampler::Const(42.5),
            node.into(),
            Duration::from_millis(20),
        );
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert_eq!(reading.cpu, 42.5);
        assert!(reading.age_ms < 1_000, "fresh: {reading:?}");
        task.abort();
    }

    #[tokio::test]
    async fn failed_samples_publish_nothing_and_sampling_goes_on() {
        let panics = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&panics);
        let panicking = CpuSampler::custom(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            panic!("sampler failure for a test")
        });
        let mut cases = vec![("sampler-panic@test", panicking, panics)];
        for (node, value) in [
            ("sampler-nan@test", f64::NAN),
            ("sampler-inf@test", f64::INFINITY),
            ("sampler-neginf@test", f64::NEG_INFINITY),
            ("sampler-negative@test", -0.5),
            ("sampler-over@test", 100.5),
        ] {
            let (sampler, calls) = counted(value);
            cases.push((node, sampler, calls));
        }
        let mut tasks = Vec::new();
        for (node, sampler, calls) in &cases {
            tasks.push(spawn(
                sampler.clone(),
                node.to_string(),
                Duration::from_millis(10),
            ));
            // Several samples were taken (and the task survived the failures).
            calls_reach(calls, 3).await;
        }
        for (task, (node, ..)) in tasks.iter().zip(&cases) {
            assert_eq!(cache().get(node), None, "{node} published nothing");
            assert!(!task.is_finished(), "{node}'s sampling goes on");
            task.abort();
        }
    }

    #[test]
    fn the_panic_sampler_panics_every_time() {
        let mut state = SamplerState::new(CpuSampler::Panic, None);
        for _ in 0..2 {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| state.sample()));
            assert!(outcome.is_err());
        }
    }

    #[tokio::test]
    async fn the_edges_of_the_range_are_published() {
        for (node, value) in [("sampler-zero@test", 0.0), ("sampler-full@test", 100.0)] {
            let task = spawn(
                CpuSampler::Const(value),
                node.into(),
                Duration::from_millis(10),
            );
            let reading = reading_of(node, |_| true).await.expect("a reading");
            assert_eq!(reading.cpu, value);
            task.abort();
        }
    }

    #[test]
    fn the_first_system_sample_is_withheld_then_a_percentage_arrives() {
        let mut state = SamplerState::new(CpuSampler::System, None);
        assert_eq!(state.sample(), Ok(Sample::Withheld));
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL + Duration::from_millis(50));
        match state.sample() {
            Ok(Sample::Value(cpu)) => assert!((0.0..=100.0).contains(&cpu), "{cpu}"),
            other => panic!("expected a value, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_system_sampler_publishes_after_its_withheld_first_sample() {
        let node = "sampler-system@test";
        let task = spawn(CpuSampler::System, node.into(), Duration::from_millis(250));
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert!((0.0..=100.0).contains(&reading.cpu), "{reading:?}");
        task.abort();
    }

    #[test]
    fn the_process_sampler_withholds_then_measures() {
        let mut state = SamplerState::new(CpuSampler::Process, None);
        assert_eq!(state.sample(), Ok(Sample::Withheld));
        // Spin a little so there is CPU time to see.
        let until = Instant::now() + Duration::from_millis(100);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        match state.sample() {
            Ok(Sample::Value(cpu)) => assert!((0.0..=100.0).contains(&cpu), "{cpu}"),
            other => panic!("expected a value, got {other:?}"),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runtime_sampler_gives_a_percentage() {
        let mut state =
            SamplerState::new(CpuSampler::Runtime, Some(tokio::runtime::Handle::current()));
        assert_eq!(state.sample(), Ok(Sample::Withheld));
        // Some async work on the workers, some idle time.
        let busy = tokio::spawn(async {
            let until = Instant::now() + Duration::from_millis(30);
            while Instant::now() < until {
                tokio::task::yield_now().await;
            }
        });
        busy.await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        match state.sample() {
            Ok(Sample::Value(cpu)) => assert!((0.0..=100.0).contains(&cpu), "{cpu}"),
            other => panic!("expected a value, got {other:?}"),
        }
        // And through the sampling task.
        let node = "sampler-runtime@test";
        let task = spawn(CpuSampler::Runtime, node.into(), Duration::from_millis(20));
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert!((0.0..=100.0).contains(&reading.cpu), "{reading:?}");
        task.abort();
    }

    #[test]
    fn without_a_runtime_the_runtime_sampler_fails() {
        let mut state = SamplerState::new(CpuSampler::Runtime, None);
        assert!(state.sample().is_err());
    }

    #[tokio::test]
    async fn const_then_panic_switches_and_the_reading_ages() {
        let mut state = SamplerState::new(
            CpuSampler::ConstThenPanic {
                value: 30.0,
                after: Duration::from_secs(3_600),
            },
            None,
        );
        assert_eq!(state.sample(), Ok(Sample::Value(30.0)));
        let mut switched = SamplerState::new(
            CpuSampler::ConstThenPanic {
                value: 30.0,
                after: Duration::ZERO,
            },
            None,
        );
        assert!(std::panic::catch_unwind(AssertUnwindSafe(|| switched.sample())).is_err());

        let node = "sampler-const-then-panic@test";
        let sampler = CpuSampler::ConstThenPanic {
            value: 30.0,
            after: Duration::from_millis(150),
        };
        let task = spawn(sampler, node.into(), Duration::from_millis(10));
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert_eq!(reading.cpu, 30.0);
        // After the switch nothing new is stored: the last reading only gets older.
        let aged = reading_of(node, |r| r.age_ms >= 400).await;
        assert_eq!(
            aged.map(|r| r.cpu),
            Some(30.0),
            "the reading aged past 400 ms"
        );
        assert!(!task.is_finished());
        task.abort();
    }

    #[tokio::test]
    async fn aborting_the_task_stops_sampling() {
        let (sampler, calls) = counted(10.0);
        let task = spawn(
            sampler,
            "sampler-abort@test".into(),
            Duration::from_millis(5),
        );
        calls_reach(&calls, 2).await;
        task.abort();
        let _ = task.await;
        let seen = calls.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A sample handed to the blocking pool just before the abort may still run.
        assert!(calls.load(Ordering::SeqCst) <= seen + 1);
    }
}
