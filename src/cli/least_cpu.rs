//! LeastCpu's options as flags (`rpclb node` and `rpclb load`), and the algorithm by name.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rpc_load_balancer::algorithm::LeastCpuOptions;
use rpc_load_balancer::{Algorithm, Error, LeastCpu};

/// LeastCpu's options for a balancer started with `--algorithm least_cpu` (other algorithms
/// ignore them). Defaults are the library's ([`LeastCpuOptions::default`]).
#[derive(Debug, Clone, Args)]
pub struct LeastCpuArgs {
    /// least_cpu: period of the Poller's polls of the members' CPU readings, in ms (> 0).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().poll_interval.as_millis() as u64)]
    pub poll_interval_ms: u64,
    /// least_cpu: the first poll waits a uniform random delay in [0, this] ms (0 = at once).
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().poll_startup_jitter.as_millis() as u64)]
    pub poll_startup_jitter_ms: u64,
    /// least_cpu: oldest reading that counts, in ms (older or missing = 50 %). Must exceed
    /// the CPU sample interval of the node running the balancer (`rpclb load` samples every
    /// half of it, at most 1 s); keep it above the members' --cpu-sample-interval-ms too, or
    /// their readings age out between samples.
    #[arg(long, value_name = "MS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().cpu_cache_ttl.as_millis() as u64)]
    pub cpu_cache_ttl_ms: u64,
    /// least_cpu: calls go uniformly at random to the members within this many percentage
    /// points of the least loaded one (≥ 0).
    #[arg(long, value_name = "POINTS", allow_negative_numbers = true, default_value_t = LeastCpuOptions::default().cpu_threshold)]
    pub cpu_threshold: f64,
}

impl LeastCpuArgs {
    /// A LeastCpu with these options.
    pub fn least_cpu(&self) -> LeastCpu {
        LeastCpu::new()
            .poll_interval(Duration::from_millis(self.poll_interval_ms))
            .poll_startup_jitter(Duration::from_millis(self.poll_startup_jitter_ms))
            .cpu_cache_ttl(Duration::from_millis(self.cpu_cache_ttl_ms))
            .cpu_threshold(self.cpu_threshold)
    }

    /// The built-in algorithm called `name`: LeastCpu with these options, the others with
    /// their defaults.
    ///
    /// Errors: [`Error::InvalidConfig`] (`algorithm`) for an unknown name. (Bad LeastCpu
    /// options are refused when the balancer starts.)
    pub fn algorithm(&self, name: &str) -> Result<Arc<dyn Algorithm>, Error> {
        if name == "least_cpu" {
            return Ok(Arc::new(self.least_cpu()));
        }
        rpc_load_balancer::algorithm::by_name(name)
    }
}
