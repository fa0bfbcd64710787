//! [`LoadWeighted`](super::LoadWeighted)'s weights: the recomputation of a list's weights
//! from its members' reports (in place, allocation-free), for the stride schedule that picks
//! by them with one atomic sequence (gRPC's static stride scheduler, gRFC A58:
//! [`stride`](crate::algorithm::stride)).

use std::sync::Arc;

use super::track::Track;
use super::Options;
use crate::routing::MemberView;

pub(super) use crate::algorithm::stride::{next, scale, MAX_SCALED};

/// The lightest weight in use, relative to the mean of the usable ones.
pub(super) const MIN_RATIO: f64 = 0.01;
/// The heaviest weight in use, relative to the mean of the usable ones.
pub(super) const MAX_RATIO: f64 = 10.0;

/// How a list's weights were last recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Fewer than two usable weights: every member weighs the same.
    RoundRobin,
    /// By the weights, the unknown ones at the mean.
    Weighted,
}

/// Recomputes the weights of a list (`members` and their `tracks`, in the same order) at
/// `now_ms`: each member's latest report taken in, the usable weights' mean given to the
/// unknown ones, every weight clamped to [[`MIN_RATIO`], [`MAX_RATIO`]] × that mean; with
/// fewer than two usable weights, every member at 1. Then [`rescale`]s them by the members'
/// slow-start factors. Writes the tracks' atomics in place: no allocation. Returns the mode,
/// how many members had no usable weight, and whether a member is in its slow-start window.
pub(super) fn recompute(
    members: &[MemberView],
    tracks: &[Arc<Track>],
    now_ms: u64,
    options: &Options,
) -> (Mode, usize, bool) {
    let (mut sum, mut usable) = (0.0, 0usize);
    for (member, track) in members.iter().zip(tracks) {
        if let Some(weight) = track.refresh(member, now_ms, options).usable() {
            sum += weight;
            usable += 1;
        }
    }
    let mode = if usable < 2 {
        for track in tracks {
            track.set_in_use(1.0);
        }
        Mode::RoundRobin
    } else {
        let mean = sum / usable as f64;
        for track in tracks {
            let weight = track
                .standing(now_ms, options)
                .usable()
                .map_or(mean, |w| w.clamp(MIN_RATIO * mean, MAX_RATIO * mean));
            track.set_in_use(weight);
        }
        Mode::Weighted
    };
    let ramping = rescale(members, tracks);
    (mode, tracks.len() - usable, ramping)
}

/// Scales the weights in use of a list (`members` and their `tracks`) for the schedule: each
/// × its member's slow-start factor, the heaviest at [`MAX_SCALED`]. In place: no
/// allocation. Whether a member is in its slow-start window (a factor below 1).
pub(super) fn rescale(members: &[MemberView], tracks: &[Arc<Track>]) -> bool {
    let weight = |member: &MemberView, track: &Track| track.in_use() * member.slow_start_factor();
    let heaviest = members
        .iter()
        .zip(tracks)
        .map(|(m, t)| weight(m, t))
        .fold(0.0, f64::max);
    let mut ramping = false;
    for (member, track) in members.iter().zip(tracks) {
        ramping |= member.slow_start_factor() < 1.0;
        track.set_scaled(scale(weight(member, track), heaviest));
    }
    ramping
}
