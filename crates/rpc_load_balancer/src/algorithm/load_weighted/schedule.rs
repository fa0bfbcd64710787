//! [`LoadWeighted`](super::LoadWeighted)'s weights and picks: the recomputation of a list's
//! weights from its members' reports (in place, allocation-free), and the stride schedule
//! that picks by them with one atomic sequence (gRPC's static stride scheduler, gRFC A58).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::track::Track;
use super::Options;
use crate::routing::MemberView;

/// The heaviest member's scaled weight: it takes every round of the schedule.
pub(super) const MAX_SCALED: u32 = u16::MAX as u32;

/// The lightest weight in use, relative to the mean of the usable ones.
pub(super) const MIN_RATIO: f64 = 0.01;
/// The heaviest weight in use, relative to the mean of the usable ones.
pub(super) const MAX_RATIO: f64 = 10.0;

/// How far apart members' strides start in a round (half the scale), so that the picks of
/// members of equal weight interleave instead of coming in a row.
const OFFSET: u64 = MAX_SCALED as u64 / 2;

/// Most rounds a pick tries before it takes the last member tried: only reached while a
/// recomputation is half written and no member weighs [`MAX_SCALED`] (else a pick tries at
/// most one round).
const MAX_ROUNDS: usize = 16;

/// How a list's weights were last recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Fewer than two usable weights: every member weighs the same.
    RoundRobin,
    /// By the weights, the unknown ones at the mean.
    Weighted,
}

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

/// Recomputes the weights of a list (`members` and their `tracks`, in the same order) at
/// `now_ms`: each member's latest report taken in, the usable weights' mean given to the
/// unknown ones, every weight clamped to [[`MIN_RATIO`], [`MAX_RATIO`]] × that mean and
/// scaled so the heaviest is [`MAX_SCALED`]; with fewer than two usable weights, every
/// member at [`MAX_SCALED`]. Writes the tracks' atomics in place: no allocation. Returns
/// the mode and how many members had no usable weight.
pub(super) fn recompute(
    members: &[MemberView],
    tracks: &[Arc<Track>],
    now_ms: u64,
    options: &Options,
) -> (Mode, usize) {
    let (mut sum, mut usable) = (0.0, 0usize);
    for (member, track) in members.iter().zip(tracks) {
        if let Some(weight) = track.refresh(member, now_ms, options).usable() {
            sum += weight;
            usable += 1;
        }
    }
    if usable < 2 {
        for track in tracks {
            track.set_in_use(1.0, MAX_SCALED);
        }
        return (Mode::RoundRobin, tracks.len() - usable);
    }
    let mean = sum / usable as f64;
    let in_use = |track: &Track| {
        track
            .standing(now_ms, options)
            .usable()
            .map_or(mean, |w| w.clamp(MIN_RATIO * mean, MAX_RATIO * mean))
    };
    let heaviest = tracks.iter().map(|t| in_use(t)).fold(0.0, f64::max);
    for track in tracks {
        let weight = in_use(track);
        track.set_in_use(weight, scale(weight, heaviest));
    }
    (Mode::Weighted, tracks.len() - usable)
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
