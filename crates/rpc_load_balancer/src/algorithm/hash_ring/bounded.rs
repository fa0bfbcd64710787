//! Bounded loads ([`HashRing::balance_factor`](super::HashRing::balance_factor); Mirrokni,
//! Thorup and Zadimoghaddam, "Consistent Hashing with Bounded Loads"): each member's load as
//! this caller knows it, the cap, and the walk past members at it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::Ring;
use crate::routing::MemberView;

/// The oldest load report that counts, ms: past it the member's load is this caller's calls
/// in flight to it alone (a member nobody calls sends no report, and an old report must not
/// keep it over the cap for ever).
pub(super) const REPORT_TTL_MS: u64 = 1_000;

/// Per member of one list (by index): this caller's picks since the member's latest load
/// report, and when that report arrived.
#[derive(Debug)]
pub(super) struct Loads {
    sent: Box<[AtomicU32]>,
    seen_at_ms: Box<[AtomicU64]>,
}

impl Loads {
    pub(super) fn new(members: usize) -> Self {
        Self {
            sent: (0..members).map(|_| AtomicU32::new(0)).collect(),
            seen_at_ms: (0..members).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// `members[index]`'s load at `now_ms`: its last reported calls in flight (of this
    /// balancer, from every caller) plus this caller's picks of it since that report, at
    /// least this caller's calls in flight to it; only the latter without a report younger
    /// than [`REPORT_TTL_MS`].
    pub(super) fn load(&self, members: &[MemberView], index: usize, now_ms: u64) -> usize {
        let member = &members[index];
        let own = member.in_flight();
        let Some(reading) = member.report(now_ms) else {
            return own;
        };
        if reading.age_ms > REPORT_TTL_MS {
            return own;
        }
        let (Some(sent), Some(seen)) = (self.sent.get(index), self.seen_at_ms.get(index)) else {
            return own;
        };
        let at = now_ms.saturating_sub(reading.age_ms);
        // Read first: a write (to a line every picking thread reads) only for a new report.
        if seen.load(Ordering::Relaxed) != at && seen.swap(at, Ordering::Relaxed) != at {
            // A new report: it counts every call sent before it arrived.
            sent.store(0, Ordering::Relaxed);
        }
        let reported = reading.report.in_flight as usize + sent.load(Ordering::Relaxed) as usize;
        reported.max(own)
    }

    /// Counts a pick of `members[index]` (for the loads of later picks).
    pub(super) fn picked(&self, index: usize) {
        if let Some(sent) = self.sent.get(index) {
            sent.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The cap for `members` with balance factor `factor` at `now_ms`:
    /// `⌈factor × (total + 1) ÷ members⌉` with `total` their loads summed; and that total.
    pub(super) fn cap(&self, members: &[MemberView], factor: f64, now_ms: u64) -> (usize, usize) {
        let total: usize = (0..members.len())
            .map(|i| self.load(members, i, now_ms))
            .sum();
        let cap = (factor * (total as f64 + 1.0) / members.len() as f64).ceil();
        (cap as usize, total)
    }

    /// The member a key starting at ring position `start` goes to with balance factor
    /// `factor` (≥ 1) at `now_ms`, counted: see [`pick`](Self::pick), with the cap of
    /// [`cap`](Self::cap). Every cap is at least 1, so an owner with no load takes the key
    /// without the sum over every member's load (at 8 members with no load, a select +
    /// release of 897 instructions → 718; bench/README.md).
    #[inline]
    pub(super) fn pick_bounded(
        &self,
        ring: &Ring,
        members: &[MemberView],
        start: usize,
        factor: f64,
        now_ms: u64,
    ) -> usize {
        let owner = ring.points[start].1 as usize;
        if self.load(members, owner, now_ms) == 0 {
            self.picked(owner);
            return owner;
        }
        let (cap, _) = self.cap(members, factor, now_ms);
        self.pick(ring, members, start, cap, now_ms)
    }

    /// The member a key starting at ring position `start` goes to: the first member on the
    /// ring from there whose load is below `cap`; the owner (fail open) when a whole turn
    /// finds none. The pick is counted.
    pub(super) fn pick(
        &self,
        ring: &Ring,
        members: &[MemberView],
        start: usize,
        cap: usize,
        now_ms: u64,
    ) -> usize {
        let n = ring.points.len();
        let owner = ring.points[start].1 as usize;
        let mut last = usize::MAX;
        let mut chosen = owner;
        for step in 0..n {
            let index = ring.points[(start + step) % n].1 as usize;
            // Consecutive points of one member: tested once.
            if index != last {
                if self.load(members, index, now_ms) < cap {
                    chosen = index;
                    break;
                }
                last = index;
            }
        }
        self.picked(chosen);
        chosen
    }
}
