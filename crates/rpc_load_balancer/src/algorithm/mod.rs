//! The built-in selection algorithms: how a balancer picks a member for a call.
//!
//! Each is a configuration type implementing [`Algorithm`] (its
//! options are checked when a balancer starts) that builds one private
//! [`Selector`](crate::routing::Selector) per balancer: the rotation position, weighted
//! cycle or hash ring of one balancer belongs to that balancer. See [`crate::routing`] for
//! the seam (which method is called when) and the custom-algorithm how-to for writing one.
//!
//! | algorithm | rule | needs |
//! |---|---|---|
//! | [`Random`] | uniform random | — |
//! | [`RoundRobin`] | in turn, from a random start | — |
//! | [`WeightedRoundRobin`] | in turn, each as often as its weight | — |
//! | [`LeastConnections`] | fewest in flight, ties at random | in-flight counts |
//! | [`PowerOfTwo`] | fewer in flight of two sampled | in-flight counts |
//! | [`PeakEwma`] | lower latency estimate × (in flight + 1) of two sampled | in-flight counts, call outcomes |
//! | [`LoadWeighted`] | in turn, each as often as its reported qps ÷ utilization | the members' load reports |
//! | [`HashRing`] | the key's owner on a consistent-hash ring | — |
//! | [`LeastCpu`] | random within a band above the least CPU | CPU readings (a Poller) |
//! | [`CallDirect`] | this node, without selecting | — |

mod by_in_flight;
mod call_direct;
mod hash_ring;
mod least_connections;
mod least_cpu;
mod load_weighted;
mod peak_ewma;
mod power_of_two;
mod random;
mod rotation;
mod round_robin;
mod stride;
mod weighted_round_robin;

use std::sync::Arc;

pub use call_direct::CallDirect;
pub use hash_ring::HashRing;
pub use least_connections::LeastConnections;
pub use least_cpu::{LeastCpu, LeastCpuOptions};
pub use load_weighted::LoadWeighted;
pub use peak_ewma::PeakEwma;
pub use power_of_two::PowerOfTwo;
pub use random::Random;
pub use round_robin::RoundRobin;
pub use weighted_round_robin::WeightedRoundRobin;

use crate::routing::Algorithm;
use crate::Error;

/// The built-in algorithm called `name` (one of [`BUILT_IN`], or of [`EXTRA`]: a built-in
/// algorithm with a named set of options), with default options; with
/// the suffix `+ejection` (e.g. `round_robin+ejection`), that algorithm with
/// [`OutlierEjection`](crate::OutlierEjection)'s defaults on top; with `+slow_start`, with
/// [`SlowStart`](crate::SlowStart)'s defaults on top. Suffixes combine, each wrapping what
/// is before it (`round_robin+slow_start+ejection`: ejection outside, as a balancer with
/// both options builds it); see [`SUFFIXES`]. Used by the `rpclb` binary (`rpclb lab`
/// compares algorithms so) and admin control.
///
/// Errors: [`Error::InvalidConfig`] (`algorithm`) for an unknown name.
///
/// ```
/// use rpc_load_balancer::{algorithm, Error};
///
/// assert_eq!(algorithm::by_name("hash_ring")?.name(), "hash_ring");
/// let both = algorithm::by_name("round_robin+slow_start+ejection")?;
/// assert_eq!(both.name(), "round_robin+slow_start+ejection");
/// assert!(matches!(
///     algorithm::by_name("fastest"),
///     Err(Error::InvalidConfig { option: "algorithm", .. })
/// ));
/// # Ok::<(), Error>(())
/// ```
pub fn by_name(name: &str) -> Result<Arc<dyn Algorithm>, Error> {
    if let Some(twice) = SUFFIXES.iter().find(|s| name.matches(**s).count() > 1) {
        return Err(Error::InvalidConfig {
            option: "algorithm",
            reason: format!("{name:?} gives {twice} twice"),
        });
    }
    // The last suffix is the outermost wrapper.
    if let Some(algorithm) = name.strip_suffix(EJECTION_SUFFIX) {
        return Ok(crate::OutlierEjection::new().wrap(by_name(algorithm)?));
    }
    if let Some(algorithm) = name.strip_suffix(SLOW_START_SUFFIX) {
        return Ok(crate::SlowStart::new().wrap(by_name(algorithm)?));
    }
    match name {
        "random" => Ok(Arc::new(Random::new())),
        "round_robin" => Ok(Arc::new(RoundRobin::new())),
        "weighted_round_robin" => Ok(Arc::new(WeightedRoundRobin::new())),
        "least_connections" => Ok(Arc::new(LeastConnections::new())),
        "power_of_two" => Ok(Arc::new(PowerOfTwo::new())),
        "peak_ewma" => Ok(Arc::new(PeakEwma::new())),
        "load_weighted" => Ok(Arc::new(LoadWeighted::new())),
        "hash_ring" => Ok(Arc::new(HashRing::new())),
        "hash_ring_bounded" => Ok(Arc::new(HashRing::new().balance_factor(1.25))),
        "least_cpu" => Ok(Arc::new(LeastCpu::new())),
        "call_direct" => Ok(Arc::new(CallDirect)),
        other => Err(Error::InvalidConfig {
            option: "algorithm",
            reason: format!(
                "unknown algorithm {other:?}; known: {}, {}",
                BUILT_IN.join(", "),
                EXTRA.join(", ")
            ),
        }),
    }
}

/// The suffix of an algorithm name that [`by_name`] reads as "with outlier ejection".
pub const EJECTION_SUFFIX: &str = "+ejection";

/// The suffix of an algorithm name that [`by_name`] reads as "with slow start".
pub const SLOW_START_SUFFIX: &str = "+slow_start";

/// The suffixes [`by_name`] knows, in any number and order after a [`BUILT_IN`] or [`EXTRA`]
/// name.
pub const SUFFIXES: &[&str] = &[EJECTION_SUFFIX, SLOW_START_SUFFIX];

/// Names of the built-in algorithms [`by_name`] knows.
pub const BUILT_IN: &[&str] = &[
    "random",
    "round_robin",
    "weighted_round_robin",
    "least_connections",
    "power_of_two",
    "hash_ring",
    "call_direct",
    "least_cpu",
    "peak_ewma",
    "load_weighted",
];

/// Names [`by_name`] knows beyond [`BUILT_IN`]: a built-in algorithm with a named set of
/// options. `hash_ring_bounded`: [`HashRing`] with
/// [`balance_factor`](HashRing::balance_factor) 1.25 (bounded loads).
pub const EXTRA: &[&str] = &["hash_ring_bounded"];

#[cfg(test)]
mod locality_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
