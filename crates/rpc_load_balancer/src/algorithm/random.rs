//! Random: a uniformly random member per selection.

use super::rng::Rng;
use super::{Explanation, SelectionAlgorithm, SelectionRequest};
use crate::balancer::Member;
use crate::Error;

/// Picks a member uniformly at random, ignoring any key. Source: the original's default
/// algorithm; the same rule as nginx's `random` balancing without `two`.
///
/// Unseeded, it draws from a thread-local generator: no shared state, so callers on many
/// threads never contend. [`Random::seeded`] makes the sequence reproducible for tests, at the
/// cost of one shared atomic per pick.
#[derive(Debug, Default)]
pub struct Random {
    rng: Rng,
}

impl Random {
    /// A random algorithm drawing from a thread-local generator.
    pub fn new() -> Self {
        Self { rng: Rng::Thread }
    }

    /// A reproducible sequence from `seed` (SplitMix64 over a shared counter).
    pub fn seeded(seed: u64) -> Self {
        Self {
            rng: Rng::seeded(seed),
        }
    }
}

impl SelectionAlgorithm for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn choose_from_nodes(
        &self,
        members: &[Member],
        _request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        Ok(self.rng.below(members.len()))
    }

    fn explain(
        &self,
        members: &[Member],
        _chosen: usize,
        _request: &SelectionRequest<'_>,
    ) -> Explanation {
        let seeded = if self.rng.is_seeded() {
            " (seeded)"
        } else {
            ""
        };
        Explanation {
            rule: format!("uniform random{seeded} among {}", members.len()),
            scores: Vec::new(),
        }
    }
}
