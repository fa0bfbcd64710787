//! Random: a uniformly random member per selection.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;

use super::{Explanation, SelectionAlgorithm, SelectionRequest};
use crate::balancer::Member;
use crate::Error;

/// Picks a member uniformly at random (the original's default algorithm).
///
/// Unseeded, it draws from a thread-local generator: no shared state, so callers on many
/// threads never contend. [`Random::seeded`] makes the sequence reproducible for tests, at the
/// cost of one shared atomic per pick.
#[derive(Debug, Default)]
pub struct Random {
    seed: Option<AtomicU64>,
}

impl Random {
    /// A random algorithm drawing from a thread-local generator.
    pub fn new() -> Self {
        Self { seed: None }
    }

    /// A reproducible sequence from `seed` (SplitMix64 over a shared counter).
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed: Some(AtomicU64::new(seed)),
        }
    }

    fn below(&self, n: usize) -> usize {
        match &self.seed {
            None => rand::rng().random_range(0..n),
            Some(state) => {
                let x = splitmix64(state.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed));
                ((u128::from(x) * n as u128) >> 64) as usize
            }
        }
    }
}

/// SplitMix64's output function (Steele, Lea, Flood: "Fast splittable pseudorandom number
/// generators", OOPSLA 2014).
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SelectionAlgorithm for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn explain(
        &self,
        members: &[Member],
        _chosen: usize,
        _request: &SelectionRequest<'_>,
    ) -> Explanation {
        let rule = match self.seed {
            Some(_) => format!("uniform random (seeded) among {}", members.len()),
            None => format!("uniform random among {}", members.len()),
        };
        Explanation {
            rule,
            scores: Vec::new(),
        }
    }

    fn choose_from_nodes(
        &self,
        members: &[Member],
        _request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        Ok(self.below(members.len()))
    }
}
