//! What [`LeastCpu`](super::LeastCpu) keeps of one member between readings: this caller's
//! picks of it since its reading last changed and in the period before, to project the
//! reading forward (see [`Track::value`]).
//!
//! A node's reading is its CPU over its last sampling interval (1 s by default), so it lags:
//! every caller reading the same low value sends that member everything until the next
//! sample shows the herd (the lab's `cold-start`: a member took 4× its fair share in some
//! seconds, every minute). Between readings, a member's value is projected by this caller's
//! rate of picks now against its rate while the reading was taken, assuming every caller
//! shifts its rates as this one does (they read the same values): a member this caller now
//! picks twice as often reads twice as high.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Below this reading (%), a projection scales as if the member read this much: a member
/// reading 0 % (idle, or sampled before its first calls) still rises as it is picked.
pub(super) const FLOOR_CPU: f64 = 5.0;

/// How far below its reading a projection may take a member, in bands (`cpu_threshold`s): a
/// member this caller stopped picking may come back into the band, but a reading far above
/// the others is load that fewer calls may not relieve (another process on the node), and
/// only a new reading clears it.
pub(super) const MAX_FALL_BANDS: f64 = 2.0;

/// A reading at or above this (%) is never projected down: a node pinned at 100 % (another
/// process burning its cores) is not relieved by fewer calls, whatever this caller sent it
/// before.
pub(super) const SATURATED_CPU: f64 = 99.5;

/// Shortest period (ms): a base that changes again sooner (a report from an older sample
/// arriving late, a reading that went stale and came back) continues the current period rather
/// than starting one, whose few picks would project nothing.
pub(super) const MIN_PERIOD_MS: u64 = 100;

/// The tracks of the members of one list, by index (what the selector derives from a list).
pub(super) type Tracks = Vec<Arc<Track>>;

/// Every member's track by node.
pub(super) type ByNode = HashMap<Arc<str>, Arc<Track>, foldhash::fast::RandomState>;

/// One member's record (times in ms on the selector's clock). Written by picks (counts) and by
/// the first pick that sees a new reading (the period's roll); read by every pick.
#[derive(Debug)]
pub(super) struct Track {
    /// The reading the current period started with, in hundredths of a percent plus one
    /// (0: none yet).
    reading: AtomicU64,
    /// When the current period started.
    since_ms: AtomicU64,
    /// This caller's picks of the member since then.
    sent: AtomicU64,
    /// The period before: its picks (high 32 bits) and its length in ms (low 32 bits; 0: no
    /// period yet, nothing to project by).
    before: AtomicU64,
    /// This caller's picks of every member when the current period started.
    all_at_since: AtomicU64,
}

/// The key of the state "never a reading" (a stand-in value, see [`Track::value`]).
const UNKNOWN: u64 = u64::MAX;

/// The key of the state "a reading older than the TTL" (see [`Track::value`]).
const STALE: u64 = u64::MAX - 1;

/// What a member's value starts from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Base {
    /// A fresh reading (%).
    Reading(f64),
    /// Never a reading: the stand-in (%) for a member as loaded as the others.
    Unknown(f64),
    /// A reading older than the TTL: the node stopped answering polls and calls, or this
    /// caller stopped calling it; it counts as this (%: the original's 50 %, or the old
    /// reading when higher), or more.
    Stale(f64),
}

impl Track {
    /// A track starting its first period at `now_ms`.
    pub(super) fn new(now_ms: u64) -> Self {
        Self {
            reading: AtomicU64::new(0),
            since_ms: AtomicU64::new(now_ms),
            sent: AtomicU64::new(0),
            before: AtomicU64::new(0),
            all_at_since: AtomicU64::new(0),
        }
    }

    /// Counts one pick.
    #[inline]
    pub(super) fn picked(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// The member's value at `now_ms` from `base`, projected by this caller's picks since the
    /// base changed (a new reading, or none any more): `all` is this caller's picks of every
    /// member so far, `members` how many there are. When the base differs from the one the
    /// current period started with, a new period starts (the old one's picks and length are
    /// kept to project by).
    ///
    /// Projection of a reading: with `p` picks over the period before (of `P` ms) and `s`
    /// picks in the `e` ms since, this caller's picks over the last `P` ms are about
    /// `s + p × (1 − e/P)` (the old rate for the part of the window before the change), or
    /// `s × P/e` once `e ≥ P`; their ratio to `p` (both plus one, so a member not picked
    /// before doubles with one pick: it comes back geometrically, period by period — a prior
    /// of even 5 % of an even share let the herd back onto a slow member in the lab's
    /// `cold-start`) scales the reading (at least [`FLOOR_CPU`]). Without a period before
    /// (the first value seen) the ratio is 1 (so a member whose first value is a reading is
    /// not projected until that reading changes, about one sampling interval). A member never heard from (its stand-in) is scaled by
    /// its picks since against an even share of this caller's picks since (both plus one).
    /// Either falls at most [`MAX_FALL_BANDS`] × `threshold` below its base, never below 0,
    /// and not at all from [`SATURATED_CPU`] up. A stale member's value is projected as a
    /// reading when the track has a period before (as an unheard one without), but only up:
    /// fewer picks of a node that stopped answering say nothing of its load.
    ///
    /// Slow start: a ramping member's value (at least [`FLOOR_CPU`]) is divided by its
    /// `factor` (in (0, 1], its [slow-start
    /// factor](crate::routing::MemberView::slow_start_factor)): a cost divided by the factor,
    /// as the rule has it. Its CPU follows its calls, so it settles where its
    /// reading ÷ factor meets the others' — about `factor` × their load.
    #[inline]
    pub(super) fn value(
        &self,
        base: Base,
        now_ms: u64,
        threshold: f64,
        (all, members): (u64, usize),
        factor: f64,
    ) -> f64 {
        let (cpu, key) = match base {
            Base::Reading(cpu) => (cpu, (cpu * 100.0).round() as u64 + 1),
            Base::Unknown(cpu) => (cpu, UNKNOWN),
            Base::Stale(cpu) => (cpu, STALE),
        };
        let is_reading = matches!(base, Base::Reading(_));
        if self.reading.load(Ordering::Relaxed) != key {
            self.roll(key, now_ms, all);
        }
        let sent = self.sent.load(Ordering::Relaxed) as f64;
        let before = self.before.load(Ordering::Relaxed);
        let period = (before & u64::from(u32::MAX)) as f64;
        let members = members.max(1) as f64;
        let ratio = if period == 0.0 {
            if is_reading {
                1.0
            } else {
                let even =
                    all.saturating_sub(self.all_at_since.load(Ordering::Relaxed)) as f64 / members;
                (sent + 1.0) / (even + 1.0)
            }
        } else {
            let prev = (before >> 32) as f64;
            let elapsed = now_ms.saturating_sub(self.since_ms.load(Ordering::Relaxed)) as f64;
            let recent = if elapsed < period {
                sent + prev * (1.0 - elapsed / period)
            } else {
                sent * period / elapsed
            };
            (recent + 1.0) / (prev + 1.0)
        };
        let mut value = cpu + cpu.max(FLOOR_CPU) * (ratio - 1.0);
        if factor < 1.0 {
            value = value.max(FLOOR_CPU) / factor;
        }
        if key == STALE || cpu >= SATURATED_CPU {
            return value.max(cpu);
        }
        value.max(cpu - MAX_FALL_BANDS * threshold).max(0.0)
    }

    /// Starts a new period for reading `key` at `now_ms` (the first pick to see it does).
    #[cold]
    fn roll(&self, key: u64, now_ms: u64, all: u64) {
        let old = self.reading.load(Ordering::Relaxed);
        if old == key
            || self
                .reading
                .compare_exchange(old, key, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let since = self.since_ms.load(Ordering::Relaxed);
        if now_ms.saturating_sub(since) < MIN_PERIOD_MS && self.before.load(Ordering::Relaxed) != 0
        {
            return;
        }
        self.all_at_since.store(all, Ordering::Relaxed);
        self.since_ms.store(now_ms, Ordering::Relaxed);
        let sent = self.sent.swap(0, Ordering::Relaxed);
        // The time before the first base seen is no period of a reading: nothing to project
        // by yet.
        let period = if old == 0 {
            0
        } else {
            now_ms.saturating_sub(since).min(u64::from(u32::MAX))
        };
        let sent = sent.min(u64::from(u32::MAX));
        self.before.store((sent << 32) | period, Ordering::Relaxed);
    }

    /// This caller's picks since the reading changed, and the period before as (picks, ms).
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        let before = self.before.load(Ordering::Relaxed);
        (
            self.sent.load(Ordering::Relaxed),
            before >> 32,
            before & u64::from(u32::MAX),
        )
    }
}
