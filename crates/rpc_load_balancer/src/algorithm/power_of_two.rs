//! PowerOfTwo: the less loaded of two members sampled at random.

use super::by_in_flight::InFlightRule;
use crate::routing::{Explanation, MemberView, Rng};

/// Samples two **distinct** members at random and picks the one with fewer calls in flight from
/// this node (ties: a random one of the two). Source: Mitzenmacher, "The Power of Two Choices in
/// Randomized Load Balancing" (IEEE TPDS, 2001); tower's `p2c` balancer does the same. Costs
/// two count reads whatever the cluster size.
///
/// With [`SlowStart`](crate::SlowStart), a member in its window costs its calls in flight ÷
/// its [factor](crate::routing::MemberView::slow_start_factor) (it looks busier), and a tie
/// goes to each of the two with probability proportional to its factor: two idle members,
/// one at factor 0.25, split their picks 1 : 4. Slow start then skips no pick.
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
        let (member_a, member_b) = (&members[a], &members[b]);
        let (load_a, load_b) = (member_a.in_flight(), member_b.in_flight());
        let (factor_a, factor_b) = (member_a.slow_start_factor(), member_b.slow_start_factor());
        if factor_a < 1.0 || factor_b < 1.0 {
            return ramping(rng, (a, load_a, factor_a), (b, load_b, factor_b));
        }
        match load_a.cmp(&load_b) {
            std::cmp::Ordering::Less => a,
            std::cmp::Ordering::Greater => b,
            std::cmp::Ordering::Equal if coin => a,
            std::cmp::Ordering::Equal => b,
        }
    }

    fn explain(members: &[MemberView], chosen: usize) -> Explanation {
        let member = members.get(chosen);
        let ramping = member.is_some_and(|m| m.slow_start_factor() < 1.0);
        Explanation {
            rule: format!(
                "fewer in flight{} of two sampled at random (picked {})",
                if ramping {
                    " ÷ slow-start factor (ties by factor)"
                } else {
                    ""
                },
                member.map_or("?", MemberView::id)
            ),
            scores: member
                .map(|m| {
                    let cost = m.in_flight() as f64 / m.slow_start_factor();
                    (m.id().to_string(), cost)
                })
                .into_iter()
                .collect(),
        }
    }

    fn applies_slow_start() -> bool {
        true
    }
}

/// The pick of two sampled members `(index, in flight, slow-start factor)` when one is in
/// its slow-start window: the lower in flight ÷ factor, a tie to each with probability
/// proportional to its factor.
#[cold]
#[inline(never)]
fn ramping(rng: &Rng, a: (usize, usize, f64), b: (usize, usize, f64)) -> usize {
    let (cost_a, cost_b) = (a.1 as f64 / a.2, b.1 as f64 / b.2);
    if cost_a < cost_b {
        a.0
    } else if cost_b < cost_a {
        b.0
    } else if rng.chance(a.2 / (a.2 + b.2)) {
        a.0
    } else {
        b.0
    }
}

#[cfg(test)]
mod tests;
