//! CPU load: what [`LeastCpu`](crate::LeastCpu) routes by.
//!
//! **Sampling belongs to the node.** Every [`Node`](crate::Node) runs one [`CpuSampler`]
//! (chosen with [`NodeConfig::cpu_sampler`](crate::NodeConfig::cpu_sampler), sampled every
//! [`NodeConfig::cpu_sample_interval`](crate::NodeConfig::cpu_sample_interval)) and answers
//! CPU-reading requests from any peer, whatever algorithms its own balancers use. The Poller of
//! each LeastCpu balancer fetches its remote members' readings into the process-wide cache
//! ([`readings`]), keyed by node name and shared by every LeastCpu balancer of the process.
//!
//! A reading carries its **age at the source**: a node whose sampler stopped keeps answering
//! with an ever older reading, which ages out at the callers instead of looking fresh. Selection
//! reads the cache without I/O, locks or allocation; a missing reading or one older than the
//! balancer's `cpu_cache_ttl` counts as [`NEUTRAL_CPU`] (50 %).

mod cache;
pub(crate) mod clock;
pub(crate) mod poller;
pub(crate) mod sampler;
pub(crate) mod selection;

pub use crate::load::{CpuReading, NEUTRAL_CPU};
pub(crate) use cache::cache;
pub use cache::readings;
pub use sampler::CpuSampler;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::algorithm::LeastCpuOptions;
    use crate::{LeastCpu, NodeConfig};

    #[test]
    fn the_defaults_are_the_originals() {
        let ms = Duration::from_millis;
        assert_eq!(
            LeastCpuOptions::default(),
            LeastCpuOptions {
                poll_interval: ms(5_000),
                poll_startup_jitter: ms(60_000),
                cpu_cache_ttl: ms(10_000),
                cpu_threshold: 5.0,
            }
        );
        assert_eq!(LeastCpu::new().options(), &LeastCpuOptions::default());
        let node = NodeConfig::new("a", "127.0.0.1:0");
        assert_eq!(node.cpu_sample_interval, ms(1_000));
        assert_eq!(node.cpu_sampler.to_string(), "system");
        assert_eq!(super::NEUTRAL_CPU, 50.0);
        assert_eq!(super::poller::REMOTE_TIMEOUT, ms(2_000));
    }
}
