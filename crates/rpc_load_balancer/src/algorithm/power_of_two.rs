//! PowerOfTwo: the less loaded of two members sampled at random.

use crate::routing::{
    Algorithm, BuildContext, Explanation, MemberView, Needs, Request, Rng, Selector,
};
use crate::Error;

/// Samples two **distinct** members at random and picks the one with fewer calls in flight from
/// this node (ties: a random one of the two). Source: Mitzenmacher, "The Power of Two Choices in
/// Randomized Load Balancing" (IEEE TPDS, 2001); tower's `p2c` balancer does the same. Costs
/// two count reads whatever the cluster size.
#[derive(Debug, Default, Clone, Copy)]
pub struct PowerOfTwo {
    seed: Option<u64>,
}

impl PowerOfTwo {
    /// Power of two choices with a thread-local generator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reproducible samples from `seed` (for tests).
    pub fn seeded(seed: u64) -> Self {
        Self { seed: Some(seed) }
    }
}

impl Algorithm for PowerOfTwo {
    fn name(&self) -> &'static str {
        "power_of_two"
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(PowerOfTwoSelector {
            rng: context.rng(self.seed),
        }))
    }

    fn needs(&self) -> Needs {
        Needs::NONE.in_flight()
    }
}

/// One balancer's [`PowerOfTwo`].
#[derive(Debug)]
struct PowerOfTwoSelector {
    rng: Rng,
}

impl PowerOfTwoSelector {
    /// Two distinct indices below `n` (≥ 2) and a coin for ties, from one 64-bit draw: bits
    /// 0–31 pick the first, bits 33–63 the offset of the second, bit 32 the coin.
    #[inline]
    fn two(&self, n: usize) -> (usize, usize, bool) {
        let x = self.rng.next_u64();
        let n = n as u64;
        let a = ((x & 0xFFFF_FFFF) * n) >> 32;
        let offset = ((x >> 33) * (n - 1)) >> 31;
        let b = (a + 1 + offset) % n;
        (a as usize, b as usize, (x >> 32) & 1 == 1)
    }
}

impl Selector for PowerOfTwoSelector {
    #[inline]
    fn pick(&self, members: &[MemberView], _request: &Request<'_>) -> Result<usize, Error> {
        if members.len() < 2 {
            return Ok(0);
        }
        let (a, b, coin) = self.two(members.len());
        let (load_a, load_b) = (members[a].in_flight(), members[b].in_flight());
        Ok(match load_a.cmp(&load_b) {
            std::cmp::Ordering::Less => a,
            std::cmp::Ordering::Greater => b,
            std::cmp::Ordering::Equal if coin => a,
            std::cmp::Ordering::Equal => b,
        })
    }

    fn explain(
        &self,
        members: &[MemberView],
        chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        let member = members.get(chosen);
        Explanation {
            rule: format!(
                "fewer in flight of two sampled at random (picked {})",
                member.map_or("?", MemberView::node)
            ),
            scores: member
                .map(|m| (m.node().to_string(), m.in_flight() as f64))
                .into_iter()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
