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
pub(crate) mod sampler;

pub use crate::load::{CpuReading, NEUTRAL_CPU};
pub(crate) use cache::cache;
pub use cache::readings;
pub use sampler::CpuSampler;
