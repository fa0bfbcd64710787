//! [`LoadWeighted`](super::LoadWeighted)'s selector: the members' tracks by node and by
//! list, when weights are next recomputed, and the pick.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::schedule::{next, recompute, rescale, scale, Mode};
use super::track::Track;
use super::Options;
use crate::routing::{Change, Clock, Derived, Explanation, MemberView, Request, Selector};
use crate::Error;

/// The tracks of the members of one list, by index (what the selector derives from a list
/// and its picks read).
type Tracks = Vec<Arc<Track>>;

/// Every member's track by node.
type ByNode = HashMap<Arc<str>, Arc<Track>, foldhash::fast::RandomState>;

/// How often, at most, the weights of a list whose members ramp (slow start) follow their
/// factors (ms), between recomputations from the reports.
const RAMP_REFRESH_MS: u64 = 100;

/// One balancer's load-weighted round robin.
pub(super) struct LoadWeightedSelector {
    options: Options,
    clock: Clock,
    /// The stride schedule's sequence (every pick's, over any list).
    sequence: AtomicU64,
    /// When a pick next recomputes the weights or, while members ramp, rescales them by
    /// their slow-start factors (ms on the clock; 0: at the next pick).
    next_update_ms: AtomicU64,
    /// When the weights are next recomputed from the reports (ms on the clock; 0: at the
    /// next update).
    recompute_at_ms: AtomicU64,
    /// Whether a member was in its slow-start window at the last recomputation or rescale.
    ramping: AtomicBool,
    /// Held by the one recomputing (a pick or a membership change); others skip.
    updating: AtomicBool,
    /// Whether the last recomputation weighted (else: round robin).
    weighted: AtomicBool,
    by_node: ArcSwap<ByNode>,
    /// `members.weight_unknown{load_balancer}`: members without a usable weight.
    unknown: Option<metrics::Gauge>,
}

impl LoadWeightedSelector {
    pub(super) fn new(options: Options, clock: Clock, start: u64, balancer: &str) -> Self {
        let unknown = crate::telemetry::ENABLED.then(|| {
            metrics::gauge!(
                crate::telemetry::MEMBERS_WEIGHT_UNKNOWN,
                "load_balancer" => balancer.to_string()
            )
        });
        Self {
            unknown,
            options,
            clock,
            sequence: AtomicU64::new(start),
            next_update_ms: AtomicU64::new(0),
            recompute_at_ms: AtomicU64::new(0),
            ramping: AtomicBool::new(false),
            updating: AtomicBool::new(false),
            weighted: AtomicBool::new(false),
            by_node: ArcSwap::from_pointee(ByNode::default()),
        }
    }

    /// Recomputes the weights of `members` (with their `tracks`) from their reports — or
    /// unless `full`, only rescales them by the slow-start factors — if no one else is;
    /// whether it did.
    fn recompute(
        &self,
        members: &[MemberView],
        tracks: &[Arc<Track>],
        now_ms: u64,
        full: bool,
    ) -> bool {
        if self
            .updating
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let ramping = if full {
            let (mode, unknown, ramping) = recompute(members, tracks, now_ms, &self.options);
            self.weighted
                .store(mode == Mode::Weighted, Ordering::Relaxed);
            if let Some(gauge) = &self.unknown {
                gauge.set(unknown as f64);
            }
            self.recompute_at_ms.store(
                now_ms.saturating_add(self.options.update_ms),
                Ordering::Relaxed,
            );
            ramping
        } else {
            rescale(members, tracks)
        };
        self.ramping.store(ramping, Ordering::Relaxed);
        self.updating.store(false, Ordering::Release);
        true
    }

    /// When a pick next updates the weights, after an update at `now_ms`: at the next
    /// recomputation, or while members ramp, within [`RAMP_REFRESH_MS`].
    fn next_update(&self, now_ms: u64) -> u64 {
        let recompute_at = self.recompute_at_ms.load(Ordering::Relaxed);
        if self.ramping.load(Ordering::Relaxed) {
            recompute_at.min(now_ms.saturating_add(RAMP_REFRESH_MS))
        } else {
            recompute_at
        }
    }

    /// The pick that finds the update time over: recomputes (or rescales, while members
    /// ramp and the period is not over) if it wins the time.
    #[cold]
    #[inline(never)]
    fn update(&self, members: &[MemberView], tracks: &[Arc<Track>], now_ms: u64) {
        let due = self.next_update_ms.load(Ordering::Relaxed);
        // Until the update below sets the time it is next due: none sooner than this.
        let soonest = now_ms.saturating_add(self.options.update_ms.min(RAMP_REFRESH_MS));
        if now_ms >= due
            && self
                .next_update_ms
                .compare_exchange(due, soonest, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let full = now_ms >= self.recompute_at_ms.load(Ordering::Relaxed);
            if self.recompute(members, tracks, now_ms, full) {
                self.next_update_ms
                    .store(self.next_update(now_ms), Ordering::Relaxed);
            }
        }
    }

    /// A pick over a list that is no published one (a re-selection that excludes members):
    /// the members' tracks looked up by node, their weights rescaled to the heaviest of
    /// them.
    #[cold]
    #[inline(never)]
    fn pick_unpublished(&self, members: &[MemberView]) -> usize {
        let by_node = self.by_node.load();
        let weight = |m: &MemberView| {
            by_node.get(m.id()).map_or(1.0, |t| t.in_use()) * m.slow_start_factor()
        };
        let heaviest = members.iter().map(weight).fold(0.0, f64::max);
        next(&self.sequence, members.len(), |i| {
            scale(weight(&members[i]), heaviest)
        })
    }
}

impl Selector for LoadWeightedSelector {
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        if members.is_empty() {
            // A balancer never asks with no members; a direct caller gets an error, not a panic.
            return Err(Error::NoMembers {
                balancer: request.balancer.to_string(),
            });
        }
        match request.derived_as::<Tracks>() {
            Some(tracks) if tracks.len() == members.len() => {
                let now_ms = self.clock.now_ms();
                if now_ms >= self.next_update_ms.load(Ordering::Relaxed) {
                    self.update(members, tracks, now_ms);
                }
                Ok(next(&self.sequence, members.len(), |i| tracks[i].scaled()))
            }
            _ => Ok(self.pick_unpublished(members)),
        }
    }

    fn members_changed(&self, change: &Change<'_>) {
        let before = self.by_node.load();
        let next: ByNode = change
            .members
            .iter()
            .map(|m| {
                // A member that (re)joined starts afresh: its blackout again (gRFC A58 resets
                // it when an endpoint becomes ready again), none of its old weight.
                let rejoined = change.joined.iter().any(|j| j == m.id_arc());
                let track = match before.get(m.id()) {
                    Some(track) if !rejoined => Arc::clone(track),
                    _ => Arc::default(),
                };
                (Arc::clone(m.id_arc()), track)
            })
            .collect();
        self.by_node.store(Arc::new(next));
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let by_node = self.by_node.load();
        let tracks: Tracks = change
            .members
            .iter()
            .map(|m| by_node.get(m.id()).cloned().unwrap_or_default())
            .collect();
        // The new list's weights at once (a joined member at the mean, × its slow-start
        // factor, which slow start wrote before); if a pick is recomputing the last list's,
        // the next pick recomputes this one.
        let now_ms = self.clock.now_ms();
        let next = if self.recompute(change.members, &tracks, now_ms, true) {
            self.next_update(now_ms)
        } else {
            self.recompute_at_ms.store(0, Ordering::Relaxed);
            0
        };
        self.next_update_ms.store(next, Ordering::Relaxed);
        Some(Arc::new(tracks))
    }

    /// Weights are multiplied by the slow-start factor ([`rescale`]).
    fn applies_slow_start(&self) -> bool {
        true
    }

    fn explain(
        &self,
        members: &[MemberView],
        chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        let by_node = self.by_node.load();
        let now_ms = self.clock.now_ms();
        let mut standings = Vec::with_capacity(members.len());
        let scores = members
            .iter()
            .map(|m| {
                let (standing, in_use) = by_node.get(m.id()).map_or_else(
                    || ("unknown (not a member)".to_string(), 1.0),
                    |t| (t.standing(now_ms, &self.options).to_string(), t.in_use()),
                );
                let factor = m.slow_start_factor();
                if factor < 1.0 {
                    standings.push(format!(
                        "{}: {standing}, × slow-start factor {factor:.2}",
                        m.id()
                    ));
                } else {
                    standings.push(format!("{}: {standing}", m.id()));
                }
                (m.id().to_string(), in_use * factor)
            })
            .collect();
        let mode = if self.weighted.load(Ordering::Relaxed) {
            "weights qps / (utilization + eps / qps × penalty), unknown ones at the mean of the usable, clamped to [0.01, 10] × that mean"
        } else {
            "fewer than two usable weights: every member weighs the same (round robin)"
        };
        Explanation {
            rule: format!(
                "load-weighted round robin (stride schedule; score: the weight in use × the slow-start factor): {mode}; picked {}; {}",
                members.get(chosen).map_or("?", MemberView::id),
                standings.join(", ")
            ),
            scores,
        }
    }
}
