//! [`MemberView`]: one member as the routing core sees it.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::load::{CpuReading, CpuSlot, LoadReport, ReportReading, ReportSlot};

/// One member as the routing core sees it: its node, whether it is this node, and the
/// estimates the balancer keeps for it (its in-flight count, its node's CPU reading). Cheap to
/// clone (reference counts); the balancer and the selector share the same estimates.
#[derive(Clone)]
pub struct MemberView {
    node: Arc<str>,
    /// The member's id: the same `Arc` as `node` for a balancer's member.
    id: Arc<str>,
    local: bool,
    /// In this node's zone ([`Locality`](super::Locality)); set when the list is built.
    preferred: bool,
    stats: Arc<MemberStats>,
    /// The member's node's CPU reading, kept by the balancer when its algorithm
    /// [needs](super::Needs::cpu) it (shared by every view of that node).
    cpu: Option<Arc<CpuSlot>>,
}

/// Per-member estimates, carried from one member list to the next while the member (its
/// actor) stays the same.
#[derive(Debug, Default)]
pub(crate) struct MemberStats {
    /// Selections of the member in flight (counted only when the algorithm needs it).
    in_flight: AtomicUsize,
    /// Its slow-start factor (beside `in_flight`: a pick that reads one reads the other
    /// from the same cache line).
    slow_start: Factor,
    /// The latest load report its replies carried.
    report: ReportSlot,
}

/// A slow-start factor in (0, 1], as `f32` bits (1 until slow start sets one). Positive
/// `f32`s order as their bits do, so an atomic max of the bits is a max of the factors.
#[derive(Debug)]
struct Factor(AtomicU32);

/// The bits of factor 1.
const ONE: u32 = 1.0f32.to_bits();

impl Default for Factor {
    fn default() -> Self {
        Factor(AtomicU32::new(ONE))
    }
}

impl MemberView {
    /// A member on `node` (full name, `name@host`); `local` when it is this node. Its
    /// estimates start empty: 0 in flight, no CPU reading.
    pub fn new(node: impl Into<Arc<str>>, local: bool) -> Self {
        let node = node.into();
        Self {
            id: Arc::clone(&node),
            node,
            local,
            preferred: false,
            stats: Arc::default(),
            cpu: None,
        }
    }

    /// The member's node, full name (`name@host`).
    #[inline]
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The node name as a shared string (cheap to clone; no allocation).
    #[inline]
    pub fn node_arc(&self) -> &Arc<str> {
        &self.node
    }

    /// This view with member id `id` (a member of an actor group, one of
    /// several actors a node may have in it): see [`id`](Self::id).
    ///
    /// ```
    /// use rpc_load_balancer::routing::MemberView;
    ///
    /// let member = MemberView::new("a@h", false).with_id("a@h#7");
    /// assert_eq!((member.node(), member.id()), ("a@h", "a@h#7"));
    /// assert_eq!(MemberView::new("a@h", false).id(), "a@h");
    /// ```
    pub fn with_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.id = id.into();
        self
    }

    /// The member's id: what identifies it among the members of one list, the same on every
    /// node, and what selectors key per-member state on (hash-ring points, estimates, slow
    /// start and ejection records, [`Change::joined`](super::Change::joined) and
    /// [`Change::left`](super::Change::left)). For a balancer's member — one per node — it is
    /// the node's full name (`name@host`, the same `Arc` as [`node_arc`](Self::node_arc));
    /// for a member of an actor group it is `"{node}#{pid}"`, `pid` being the
    /// actor's pid on its home node, so several actors of one node are distinct members.
    /// Node-level state (the CPU reading, node filters, per-node weights) stays keyed by
    /// [`node`](Self::node).
    #[inline]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The member's [id](Self::id) as a shared string (cheap to clone; no allocation).
    #[inline]
    pub fn id_arc(&self) -> &Arc<str> {
        &self.id
    }

    /// Whether the member is this node.
    #[inline]
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// Whether the member is in this node's zone: its node's [`Locality`](super::Locality)
    /// label has this node's value. Set when the balancer builds the member list, only when
    /// the balancer has [`Locality`](super::Locality); otherwise `false`. A plain field: no
    /// load.
    #[inline]
    pub fn is_preferred(&self) -> bool {
        self.preferred
    }

    /// This view marked in this node's zone or not (see [`is_preferred`](Self::is_preferred)).
    pub fn with_preferred(mut self, preferred: bool) -> Self {
        self.preferred = preferred;
        self
    }

    /// Calls and casts routed to this member by this balancer and not finished yet: taken at
    /// selection, released when the selection ends. Counted only when the algorithm asks for
    /// it ([`Needs::in_flight`](super::Needs::in_flight)) or the balancer caps in-flight calls
    /// per member; otherwise always 0.
    #[inline]
    pub fn in_flight(&self) -> usize {
        self.stats.in_flight.load(Ordering::Relaxed)
    }

    /// The member's slow-start factor, in (0, 1]: 1 unless the balancer has
    /// [`SlowStart`](super::SlowStart) and the member joined (or rejoined) within its window,
    /// then max(min_percent / 100, (time since it joined / window)^(1 / aggression)).
    /// Slow start writes it when the member joins and refreshes it before a pick, at most
    /// every window ÷ 100 (and at most every 100 ms, at least every 1 ms) while some member
    /// is in its window; it is 1 again from the first pick after the window's end.
    ///
    /// A selector that [applies it itself](super::Selector::applies_slow_start) divides a
    /// member's cost, or multiplies its weight, by it (a ramping member looks costlier, or
    /// lighter); for any other selector slow start skips picks of ramping members instead.
    /// One relaxed atomic load, on the cache line of [`in_flight`](Self::in_flight); no lock.
    ///
    /// ```
    /// use rpc_load_balancer::routing::MemberView;
    ///
    /// let member = MemberView::new("a@h", false);
    /// // Nothing ramps it: its cost and weight stand as they are.
    /// assert_eq!(member.slow_start_factor(), 1.0);
    /// let cost = 3.0 / member.slow_start_factor();
    /// assert_eq!(cost, 3.0);
    /// ```
    #[inline]
    pub fn slow_start_factor(&self) -> f64 {
        f64::from(f32::from_bits(
            self.stats.slow_start.0.load(Ordering::Relaxed),
        ))
    }

    /// Sets the slow-start factor (`factor` in (0, 1]; slow start, at a join).
    pub(crate) fn set_slow_start_factor(&self, factor: f64) {
        self.stats
            .slow_start
            .0
            .store(factor_bits(factor), Ordering::Relaxed);
    }

    /// Raises the slow-start factor to `factor` if it is below (slow start, as time goes
    /// on): a refresh that read the clock earlier than another and stores after it cannot
    /// lower the factor again.
    pub(crate) fn raise_slow_start_factor(&self, factor: f64) {
        self.stats
            .slow_start
            .0
            .fetch_max(factor_bits(factor), Ordering::Relaxed);
    }

    /// The member's node's CPU utilisation (%, 0–100) if its reading was sampled at most
    /// `ttl_ms` before `now_ms` (inclusive; both on the selector's
    /// [`Clock::now_ms`](super::Clock::now_ms)); `None` when there is no reading, it is stale,
    /// or the balancer keeps none (the algorithm does not [need](super::Needs::cpu) them).
    /// One atomic load; no lock.
    #[inline]
    pub fn cpu(&self, now_ms: u64, ttl_ms: u64) -> Option<f64> {
        self.cpu.as_ref()?.fresh(now_ms, ttl_ms)
    }

    /// The latest [`LoadReport`] the member's replies carried (through this balancer), with
    /// its age at `now_ms` (on the selector's [`Clock::now_ms`](super::Clock::now_ms)),
    /// whatever its age; `None` before the first reply (or for a member on this node, whose
    /// calls run here without a reply). Three atomic loads; no lock.
    #[inline]
    pub fn report(&self, now_ms: u64) -> Option<ReportReading> {
        self.stats.report.reading(now_ms)
    }

    /// When the member's latest report arrived (ms on the selector's clock), if one did: one
    /// atomic load.
    #[inline]
    pub fn report_at_ms(&self) -> Option<u64> {
        self.stats.report.at_ms()
    }

    /// Keeps `report`, arrived at `now_ms` (the selector's clock): the member's latest, and —
    /// when the view keeps its node's CPU reading and the report has one — that reading too
    /// (sampled now, as far as the caller can tell: a serving node reports only a sample at
    /// most 3 of its sampling intervals old).
    pub(crate) fn store_report(&self, report: &LoadReport, now_ms: u64) {
        self.stats.report.store(report, now_ms);
        if let (Some(slot), Some(cpu)) = (&self.cpu, report.cpu) {
            slot.store(cpu, 0, now_ms);
        }
    }

    /// The member's node's CPU reading with its age at `now_ms`, whatever its age; `None`
    /// when there is none.
    pub fn cpu_reading(&self, now_ms: u64) -> Option<CpuReading> {
        self.cpu.as_ref()?.reading(now_ms)
    }

    /// This view reading its node's CPU from `slot`.
    pub(crate) fn with_cpu_slot(mut self, slot: Arc<CpuSlot>) -> Self {
        self.cpu = Some(slot);
        self
    }

    /// The estimates, shared (tests of their lifetime).
    #[cfg(test)]
    pub(crate) fn stats(&self) -> &Arc<MemberStats> {
        &self.stats
    }

    /// Whether `other` is the same member as this view (it shares this view's estimates: the
    /// same actor, carried into a new list), not only the same node.
    pub(crate) fn is_same_member(&self, other: &MemberView) -> bool {
        Arc::ptr_eq(&self.stats, &other.stats)
    }

    /// Shares `other`'s estimates (the same member in a new list).
    pub(crate) fn keep_stats_of(&mut self, other: &MemberView) {
        self.stats = Arc::clone(&other.stats);
    }

    /// Counts one more selection in flight.
    #[inline]
    pub(crate) fn acquire(&self) {
        self.stats.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one more selection in flight if fewer than `limit` are; whether it did.
    pub(crate) fn try_acquire(&self, limit: usize) -> bool {
        self.stats
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok()
    }

    /// Counts one selection finished; never below zero.
    #[inline]
    pub(crate) fn release(&self) {
        let _ = self
            .stats
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Sets the in-flight count (test kit).
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn set_in_flight(&self, count: usize) {
        self.stats.in_flight.store(count, Ordering::Relaxed);
    }
}

/// The bits of `factor` as an `f32` in (0, 1] (NaN and out-of-range values clamped).
fn factor_bits(factor: f64) -> u32 {
    let factor = if factor.is_nan() { 1.0 } else { factor };
    (factor.clamp(f64::from(f32::MIN_POSITIVE), 1.0) as f32).to_bits()
}

impl std::fmt::Debug for MemberView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberView")
            .field("node", &self.node)
            .field("id", &self.id)
            .field("local", &self.local)
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_never_go_negative_and_carry_with_the_stats() {
        let view = MemberView::new("a@h", false);
        view.release();
        assert_eq!(view.in_flight(), 0);
        view.acquire();
        view.release();
        view.release();
        assert_eq!(view.in_flight(), 0);
        assert!(view.try_acquire(1) && !view.try_acquire(1));
        let mut next = MemberView::new("a@h", false);
        assert_eq!(next.in_flight(), 0);
        next.keep_stats_of(&view);
        assert_eq!(next.in_flight(), 1);
        next.release();
        assert_eq!(view.in_flight(), 0, "one count, shared");
    }

    #[test]
    fn the_slow_start_factor_starts_at_1_is_only_raised_by_a_refresh_and_carries_with_the_stats() {
        let view = MemberView::new("a@h", false);
        assert_eq!(view.slow_start_factor(), 1.0);
        view.set_slow_start_factor(0.25);
        assert_eq!(view.slow_start_factor(), 0.25);
        view.raise_slow_start_factor(0.1);
        assert_eq!(
            view.slow_start_factor(),
            0.25,
            "a late refresh does not lower it"
        );
        view.raise_slow_start_factor(0.5);
        assert_eq!(view.slow_start_factor(), 0.5);
        let mut next = MemberView::new("a@h", false);
        next.keep_stats_of(&view);
        assert_eq!(
            next.slow_start_factor(),
            0.5,
            "the same member in a new list"
        );
        next.set_slow_start_factor(f64::NAN);
        assert_eq!(view.slow_start_factor(), 1.0);
        next.set_slow_start_factor(0.0);
        assert!(
            view.slow_start_factor() > 0.0,
            "never 0: costs are divided by it"
        );
        view.set_slow_start_factor(3.0);
        assert_eq!(view.slow_start_factor(), 1.0);
    }

    #[test]
    fn a_report_is_kept_with_its_age_and_feeds_the_cpu_slot() {
        let view = MemberView::new("a@h", false);
        assert_eq!(view.report(10), None);
        let report = LoadReport {
            qps: 40,
            cpu: Some(70.0),
            ..LoadReport::default()
        };
        view.store_report(&report, 1_000);
        assert_eq!(
            view.report(1_100).map(|r| (r.report, r.age_ms)),
            Some((report, 100))
        );
        assert_eq!(view.report_at_ms(), Some(1_000));
        assert_eq!(view.cpu(1_000, 10), None, "no slot kept: nothing stored");
        let slot = Arc::new(CpuSlot::default());
        let view = view.with_cpu_slot(Arc::clone(&slot));
        view.store_report(&report, 2_000);
        assert_eq!(view.cpu(2_050, 100), Some(70.0));
    }

    #[test]
    fn cpu_is_fresh_only_within_the_ttl_and_absent_without_a_slot() {
        let bare = MemberView::new("a@h", true);
        assert!(bare.is_local());
        assert_eq!(bare.cpu(1_000, 10), None);
        let slot = Arc::new(CpuSlot::default());
        slot.store(30.0, 100, 1_000);
        let view = bare.with_cpu_slot(Arc::clone(&slot));
        assert_eq!(view.cpu(1_000, 100), Some(30.0));
        assert_eq!(view.cpu(1_001, 100), None);
        assert_eq!(view.cpu_reading(1_001).map(|r| r.age_ms), Some(101));
    }
}
