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

mod parse;
mod state;
mod task;

use std::fmt;
use std::sync::Arc;
#[cfg(any(test, feature = "test-hooks"))]
use std::time::Duration;

pub(crate) use task::spawn;

/// How a node measures its CPU load, in percent (0–100). Set it with
/// [`NodeConfig::cpu_sampler`](crate::NodeConfig::cpu_sampler); the default is
/// [`CpuSampler::System`].
///
/// The text form (`rpclb node --cpu-sampler SPEC`, [`FromStr`](std::str::FromStr) and [`Display`](fmt::Display))
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
