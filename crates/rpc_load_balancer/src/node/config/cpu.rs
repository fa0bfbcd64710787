//! How this node measures its CPU load for LeastCpu balancers, and how often.

use std::time::Duration;

use super::NodeConfig;
use crate::cpu::CpuSampler;
#[cfg(doc)]
use crate::Error;

impl NodeConfig {
    /// How this node measures its CPU load (%, 0–100) for
    /// [`LeastCpu`](crate::LeastCpu) balancers anywhere in the cluster; default
    /// [`CpuSampler::System`] (the whole machine). Every node samples and answers CPU-reading
    /// requests, whatever algorithms its own balancers use. See [`CpuSampler`] for the
    /// choices (whole machine, this process, the tokio runtime, your own function).
    pub fn cpu_sampler(mut self, sampler: CpuSampler) -> Self {
        self.cpu_sampler = sampler;
        self
    }

    /// How often the node samples its CPU; default 1,000 ms, must be > 0 (checked at start:
    /// [`Error::InvalidConfig`] naming `cpu_sample_interval`). Each sample runs on tokio's
    /// blocking pool; a LeastCpu balancer's `cpu_cache_ttl` must be longer than this interval.
    /// The System and Process samplers are coarse below 200 ms (see [`CpuSampler`]).
    pub fn cpu_sample_interval(mut self, interval: Duration) -> Self {
        self.cpu_sample_interval = interval;
        self
    }
}
