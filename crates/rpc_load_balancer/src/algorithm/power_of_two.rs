//! PowerOfTwo: the less loaded of two members sampled at random.

use super::rng::Rng;
use super::{Explanation, SelectionAlgorithm, SelectionRequest};
use crate::balancer::Member;
use crate::Error;

/// Samples two **distinct** members at random and picks the one with fewer calls in flight from
/// this node (ties: a random one of the two). Source: Mitzenmacher, "The Power of Two Choices in
/// Randomized Load Balancing" (IEEE TPDS, 2001); tower's `p2c` balancer does the same. Costs
/// two count reads whatever the cluster size.
#[derive(Debug, Default)]
pub struct PowerOfTwo {
    rng: Rng,
}

impl PowerOfTwo {
    /// Power of two choices with a thread-local generator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reproducible samples from `seed` (for tests).
    pub fn seeded(seed: u64) -> Self {
        Self {
            rng: Rng::seeded(seed),
        }
    }

    /// Two distinct indices below `n` (≥ 2).
    fn two(&self, n: usize) -> (usize, usize) {
        let a = self.rng.below(n);
        let b = (a + 1 + self.rng.below(n - 1)) % n;
        (a, b)
    }
}

impl SelectionAlgorithm for PowerOfTwo {
    fn name(&self) -> &'static str {
        "power_of_two"
    }

    fn choose_from_nodes(
        &self,
        members: &[Member],
        _request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        if members.len() < 2 {
            return Ok(0);
        }
        let (a, b) = self.two(members.len());
        let (load_a, load_b) = (members[a].in_flight(), members[b].in_flight());
        Ok(match load_a.cmp(&load_b) {
            std::cmp::Ordering::Less => a,
            std::cmp::Ordering::Greater => b,
            std::cmp::Ordering::Equal => {
                if self.rng.below(2) == 0 {
                    a
                } else {
                    b
                }
            }
        })
    }

    fn explain(
        &self,
        members: &[Member],
        chosen: usize,
        _request: &SelectionRequest<'_>,
    ) -> Explanation {
        Explanation {
            rule: format!(
                "fewer in flight of two sampled at random (picked {})",
                members[chosen].node()
            ),
            scores: vec![(
                members[chosen].node().to_string(),
                members[chosen].in_flight() as f64,
            )],
        }
    }
}
