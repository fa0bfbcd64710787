//! The stride schedule (gRPC's static stride scheduler, gRFC A58): picks members in turn,
//! each as often as its scaled weight, with one atomic sequence and no lock — what
//! [`LoadWeighted`](super::LoadWeighted) picks by, and
//! [`WeightedRoundRobin`](super::WeightedRoundRobin) while members are in their slow-start
//! window.

use std::sync::atomic::{AtomicU64, Ordering};

/// The heaviest member's scaled weight: it takes every round of the schedule.
pub(super) const MAX_SCALED: u32 = u16::MAX as u32;

/// How far apart members' strides start in a round (half the scale), so that the picks of
/// members of equal weight interleave instead of coming in a row.
const OFFSET: u64 = MAX_SCALED as u64 / 2;

/// Most rounds a pick tries before it takes the last member tried: only reached while a
/// recomputation is half written and no member weighs [`MAX_SCALED`] (else a pick tries at
/// most one round).
const MAX_ROUNDS: usize = 16;

/// The next member of `n` (> 0) by the stride schedule over the scaled weights `scaled`
/// gives (1 ..= [`MAX_SCALED`] each; 0 counts as 1): each value `s` the sequence hands out
/// names member `s mod n` in round `s / n`, which takes it when its stride — (weight ×
/// round plus member × [`OFFSET`]) mod [`MAX_SCALED`] — is among the top `weight` values.
/// So each member takes `weight / MAX_SCALED` of the rounds, the heaviest all of them.
#[inline]
pub(super) fn next(sequence: &AtomicU64, n: usize, scaled: impl Fn(usize) -> u32) -> usize {
    let len = n as u64;
    let scale = u64::from(MAX_SCALED);
    let mut index = 0;
    for _ in 0..n.saturating_mul(MAX_ROUNDS) {
        let value = sequence.fetch_add(1, Ordering::Relaxed);
        let round = value / len;
        index = (value - round * len) as usize;
        let weight = u64::from(scaled(index).clamp(1, MAX_SCALED));
        // (weight × round) mod scale, without overflow: the round reduced first.
        let stride = (weight * (round % scale) + index as u64 % scale * OFFSET) % scale;
        if stride >= scale - weight {
            return index;
        }
    }
    index
}

/// `weight` scaled so that `heaviest` is [`MAX_SCALED`] (at least 1).
pub(super) fn scale(weight: f64, heaviest: f64) -> u32 {
    let scaled = (weight / heaviest * f64::from(MAX_SCALED)).round();
    if scaled.is_finite() {
        (scaled as u32).clamp(1, MAX_SCALED)
    } else {
        MAX_SCALED
    }
}
