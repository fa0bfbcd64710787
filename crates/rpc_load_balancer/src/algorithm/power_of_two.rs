//! PowerOfTwo: the less loaded of two members sampled at random.

use super::by_in_flight::InFlightRule;
use crate::routing::{Explanation, MemberView, Rng};

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

super::by_in_flight::in_flight_algorithm!(PowerOfTwo, "power_of_two", TwoChoices);

/// [`PowerOfTwo`]'s rule.
struct TwoChoices;

/// Two distinct indices below `n` (≥ 2) and a coin for ties, from one 64-bit draw: bits 0–31
/// pick the first, bits 33–63 the offset of the second, bit 32 the coin.
#[inline]
pub(super) fn two(rng: &Rng, n: usize) -> (usize, usize, bool) {
    let x = rng.next_u64();
    let n = n as u64;
    let a = ((x & 0xFFFF_FFFF) * n) >> 32;
    let offset = ((x >> 33) * (n - 1)) >> 31;
    // (a + 1 + offset) mod n, without a division: the sum is below 2n.
    let b = a + 1 + offset;
    let b = if b >= n { b - n } else { b };
    (a as usize, b as usize, (x >> 32) & 1 == 1)
}

impl InFlightRule for TwoChoices {
    #[inline]
    fn pick(members: &[MemberView], rng: &Rng) -> usize {
        if members.len() < 2 {
            return 0;
        }
        let (a, b, coin) = two(rng, members.len());
        let (load_a, load_b) = (members[a].in_flight(), members[b].in_flight());
        match load_a.cmp(&load_b) {
            std::cmp::Ordering::Less => a,
            std::cmp::Ordering::Greater => b,
            std::cmp::Ordering::Equal if coin => a,
            std::cmp::Ordering::Equal => b,
        }
    }

    fn explain(members: &[MemberView], chosen: usize) -> Explanation {
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
