//! Random: a uniformly random member per selection.

use crate::routing::{Algorithm, BuildContext, Explanation, MemberView, Request, Rng, Selector};
use crate::Error;

/// Picks a member uniformly at random, ignoring any key. Source: the original's default
/// algorithm; the same rule as nginx's `random` balancing without `two`.
///
/// Unseeded, it draws from a thread-local generator: no shared state, so callers on many
/// threads never contend. [`Random::seeded`] makes the sequence reproducible for tests, at the
/// cost of one shared atomic per pick (each balancer's selector starts the sequence anew).
#[derive(Debug, Default, Clone, Copy)]
pub struct Random {
    seed: Option<u64>,
}

impl Random {
    /// A random algorithm drawing from a thread-local generator.
    pub fn new() -> Self {
        Self { seed: None }
    }

    /// A reproducible sequence from `seed` (SplitMix64 over a shared counter).
    pub fn seeded(seed: u64) -> Self {
        Self { seed: Some(seed) }
    }
}

impl Algorithm for Random {
    fn name(&self) -> &'static str {
        "random"
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(RandomSelector {
            rng: context.rng(self.seed),
        }))
    }
}

/// One balancer's [`Random`].
#[derive(Debug)]
struct RandomSelector {
    rng: Rng,
}

impl Selector for RandomSelector {
    #[inline]
    fn pick(&self, members: &[MemberView], _request: &Request<'_>) -> Result<usize, Error> {
        Ok(self.rng.below(members.len()))
    }

    fn explain(
        &self,
        members: &[MemberView],
        _chosen: usize,
        _request: &Request<'_>,
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

#[cfg(test)]
mod tests;
