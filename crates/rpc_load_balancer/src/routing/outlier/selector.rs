//! The selector of an algorithm with [`OutlierEjection`]: the algorithm's own selector
//! picks, and a pick of an ejected or suspected member is re-drawn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;

use super::health::Health;
use super::OutlierEjection;
use crate::routing::wrapped::{record, Wrapped};
use crate::routing::{
    Change, Clock, Derived, Explanation, MemberView, Outcome, OutcomeKind, Request, Rng, Selector,
};
use crate::{Error, ErrorCode};

/// How often (ns) outcomes look over every member: suspicion, ejections that ended, and the
/// success-rate interval.
const SWEEP_EVERY_NS: u64 = 10_000_000;

/// How many times a pick of an ejected or suspected member is re-drawn from the algorithm
/// before the next member in the list that is in is taken.
const REDRAWS: usize = 2;

/// How many members at random a pick tries once the algorithm's own picks were out.
const RANDOM_LOOKS: usize = 8;

/// Every member's health by node.
type ByNode = HashMap<Arc<str>, Arc<Health>, foldhash::fast::RandomState>;

/// Counts of what outlier ejection did, since the balancer started (see
/// [`Balancer::ejection_stats`](crate::Balancer::ejection_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EjectionStats {
    /// Members ejected, in all.
    pub ejections: u64,
    /// Members found silent and suspected, in all.
    pub suspicions: u64,
    /// Members ejected now (as of the last look over the members).
    pub ejected: usize,
    /// Members suspected now (as of the last look over the members).
    pub suspected: usize,
}

/// Why a member was ejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Its failures in a row reached `consecutive_failures`.
    ConsecutiveFailures,
    /// Its success rate was far below the others' at the end of an interval.
    SuccessRate,
    /// It was suspected and a call to it timed out.
    Silent,
}

impl Reason {
    /// The `reason` label and log field.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reason::ConsecutiveFailures => "consecutive_failures",
            Reason::SuccessRate => "success_rate",
            Reason::Silent => "silent",
        }
    }
}

/// What outlier ejection tells whoever drives it (a balancer: its metrics and log). The
/// routing core does no I/O: it only calls the listener it was given.
#[derive(Debug)]
pub(crate) enum EjectionEvent<'a> {
    /// The member `node` was ejected for `for_ns` (why: `reason`). `node` is the member's
    /// [id](MemberView::id): its node for a balancer, `"{node}#{pid}"` for an actor group.
    Ejected {
        node: &'a str,
        reason: Reason,
        for_ns: u64,
    },
    /// The member `node` (its [id](MemberView::id)) was suspected of being silent.
    Suspected { node: &'a str },
    /// The counts after a look over the members.
    Counts(EjectionStats),
}

/// A listener of [`EjectionEvent`]s.
pub(crate) type Listener = Box<dyn Fn(&EjectionEvent<'_>) + Send + Sync>;

/// An algorithm's selector with outlier ejection on top.
pub(crate) struct Ejecting {
    inner: Box<dyn Selector>,
    inner_learns: bool,
    options: OutlierEjection,
    clock: Clock,
    by_node: ArcSwap<ByNode>,
    /// Members ejected or suspected: while 0, a pick reads no clock and no health.
    out: AtomicUsize,
    /// Members ejected (against the cap).
    ejected: AtomicUsize,
    suspected: AtomicUsize,
    /// The last reply from any member (ns).
    replied: AtomicU64,
    /// When outcomes next look over every member (ns).
    next_sweep: AtomicU64,
    /// When the success-rate interval ends (ns; 0: not started).
    interval_end: AtomicU64,
    /// Held by a look over the members and by each ejection: the counts a look stores can
    /// then never miss an ejection (a count too high only sends picks down the slow path
    /// until the next look; one too low would pick an ejected member, or pass the cap).
    verdicts: Mutex<()>,
    ejections: AtomicU64,
    suspicions: AtomicU64,
    listener: Option<Listener>,
    /// Where a pick away from an ejected member lands when redraws fail: seeded from the
    /// build's seed (a test kit's, the lab's) so those picks repeat under it.
    rng: Rng,
}

impl Ejecting {
    pub(crate) fn new(
        inner: Box<dyn Selector>,
        options: OutlierEjection,
        clock: Clock,
        rng: Rng,
    ) -> Self {
        Self {
            inner_learns: inner.learns(),
            inner,
            options,
            clock,
            by_node: ArcSwap::from_pointee(ByNode::default()),
            out: AtomicUsize::new(0),
            ejected: AtomicUsize::new(0),
            suspected: AtomicUsize::new(0),
            replied: AtomicU64::new(0),
            next_sweep: AtomicU64::new(0),
            interval_end: AtomicU64::new(0),
            verdicts: Mutex::new(()),
            ejections: AtomicU64::new(0),
            suspicions: AtomicU64::new(0),
            listener: None,
            rng,
        }
    }

    /// Tells `listener` of every ejection, suspicion and look over the members.
    pub(crate) fn with_listener(mut self, listener: Listener) -> Self {
        self.listener = Some(listener);
        self
    }

    fn tell(&self, event: &EjectionEvent<'_>) {
        if let Some(listener) = &self.listener {
            // A listener's panic is the listener's: the pick and its outcome go on.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(event)));
        }
    }

    /// What ejection did so far.
    pub(crate) fn stats(&self) -> EjectionStats {
        EjectionStats {
            ejections: self.ejections.load(Ordering::Relaxed),
            suspicions: self.suspicions.load(Ordering::Relaxed),
            ejected: self.ejected.load(Ordering::Relaxed),
            suspected: self.suspected.load(Ordering::Relaxed),
        }
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Whether `members[index]` may not be picked at `now`.
    fn is_out(
        &self,
        members: &[MemberView],
        health: Option<&[Arc<Health>]>,
        by_node: &ByNode,
        index: usize,
        now: u64,
    ) -> bool {
        let member = &members[index];
        let Some(health) = record(members, health, by_node, index) else {
            return false;
        };
        // A suspect takes no call while any of its calls is still out: one that was
        // stuck in it still may reply (which clears it); once all ended without a reply, it
        // was ejected (see `observe`) or — at the cap — takes one call again, as a probe.
        health.is_ejected(now)
            || (health.suspected.load(Ordering::Relaxed) && member.in_flight() >= 1)
    }

    /// Ejects `health`'s member at `now` unless it is ejected already or the cap is reached.
    fn eject(&self, health: &Health, now: u64, members: usize, reason: Reason) {
        if health.is_ejected(now) {
            return;
        }
        let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        self.eject_locked(&verdicts, health, now, members, reason);
    }

    /// Ends `health`'s ejection if its time is up at `now`: it is picked again, with a clean
    /// run of failures.
    fn end_ejection_if_due(&self, health: &Health, now: u64) {
        let until = health.ejected_until.load(Ordering::Relaxed);
        if until == 0 || now < until {
            return;
        }
        let ended = health
            .ejected_until
            .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if ended {
            health.consecutive.store(0, Ordering::Relaxed);
            for count in [&self.ejected, &self.out] {
                let _ =
                    count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            }
        }
    }

    /// [`eject`](Self::eject) with the verdicts' lock held.
    fn eject_locked(
        &self,
        _held: &MutexGuard<'_, ()>,
        health: &Health,
        now: u64,
        members: usize,
        reason: Reason,
    ) {
        self.end_ejection_if_due(health, now);
        if health.ejected_until.load(Ordering::Relaxed) != 0 {
            return;
        }
        let cap = (members * usize::from(self.options.max_ejected_percent) / 100).max(1);
        if self.ejected.load(Ordering::Relaxed) >= cap {
            return;
        }
        self.ejected.fetch_add(1, Ordering::Relaxed);
        let times = health
            .times_ejected
            .fetch_add(1, Ordering::Relaxed)
            .saturating_add(1);
        let base = nanos(self.options.base_ejection_time);
        let most = nanos(self.options.max_ejection_time);
        let length = base.saturating_mul(u64::from(times)).min(most);
        health
            .ejected_until
            .store(now.saturating_add(length).max(1), Ordering::Relaxed);
        health.consecutive.store(0, Ordering::Relaxed);
        self.out.fetch_add(1, Ordering::Relaxed);
        self.ejections.fetch_add(1, Ordering::Relaxed);
        self.tell(&EjectionEvent::Ejected {
            node: health.view.id(),
            reason,
            for_ns: length,
        });
    }

    /// Looks over every member at `now` (at most once per [`SWEEP_EVERY_NS`], by one thread):
    /// ends ejections whose time is up, suspects silent members, and at the end of each
    /// interval runs the success-rate detector and decays ejection counts.
    fn sweep(&self, now: u64) {
        let next = self.next_sweep.load(Ordering::Relaxed);
        if now < next {
            return;
        }
        let Ok(verdicts) = self.verdicts.try_lock() else {
            // Another thread is looking, or ejecting: this outcome need not wait for it.
            return;
        };
        self.next_sweep
            .store(now.saturating_add(SWEEP_EVERY_NS), Ordering::Relaxed);
        let by_node = self.by_node.load();
        let replied = self.replied.load(Ordering::Relaxed);
        let (mut ejected, mut suspected) = (0, 0);
        for health in by_node.values() {
            self.end_ejection_if_due(health, now);
            self.look_for_silence(health, now, replied);
            ejected += usize::from(health.is_ejected(now));
            suspected += usize::from(health.suspected.load(Ordering::Relaxed));
        }
        let interval_end = self.interval_end.load(Ordering::Relaxed);
        if interval_end == 0 {
            let interval = nanos(self.options.interval);
            self.interval_end
                .store(now.saturating_add(interval), Ordering::Relaxed);
        } else if now >= interval_end {
            ejected += self.end_interval(&verdicts, &by_node, now, interval_end);
        }
        // Recounted exactly: the counts the picks and the cap read heal from any race.
        self.ejected.store(ejected, Ordering::Relaxed);
        self.suspected.store(suspected, Ordering::Relaxed);
        self.out.store(ejected + suspected, Ordering::Relaxed);
        drop(verdicts);
        self.tell(&EjectionEvent::Counts(self.stats()));
    }

    /// Notes when `health`'s member became busy, and suspects it if it has been silent with
    /// calls in flight for long enough while another member replied since.
    fn look_for_silence(&self, health: &Health, now: u64, replied: u64) {
        let in_flight = health.view.in_flight();
        if in_flight == 0 {
            health.busy_since.store(0, Ordering::Relaxed);
            return;
        }
        if health.busy_since.load(Ordering::Relaxed) == 0 {
            health.busy_since.store(now, Ordering::Relaxed);
        }
        if !self.options.suspicion
            || in_flight < self.options.suspicion_min_in_flight
            || health.suspected.load(Ordering::Relaxed)
        {
            return;
        }
        let Some(since) = health.silent_since() else {
            return;
        };
        let limit = self.suspicion_limit(health);
        // Others replied since it went silent, and lately: not a stall of every member.
        let others_reply = replied > since && replied.saturating_add(limit) >= now;
        if now.saturating_sub(since) >= limit && others_reply {
            self.suspect(health);
        }
    }

    /// How long (ns) `health`'s member must be silent to be suspected: max(the floor, its p99
    /// × the factor).
    fn suspicion_limit(&self, health: &Health) -> u64 {
        let floor = nanos(self.options.suspicion_floor);
        let p99 = health.p99_ns().unwrap_or(0) as f64;
        floor.max((p99 * self.options.suspicion_p99_factor) as u64)
    }

    /// A call to `health`'s member timed out at `now`, `latency_ns` after it was sent: the
    /// member is suspected if it has not replied for the suspicion limit (since that call was
    /// sent, or since its last reply if that came later), with enough calls in flight (this
    /// one counted only if it was sent after that reply: an older call that was merely slow
    /// does not make a member that replies since silent), while another member replied
    /// after the call was sent and no other member failed to answer since (a call of it timed
    /// out, or it holds calls silent as long: a stall of this caller, not of the member).
    /// A sweep may not have seen that silence: when every call a caller has out is stuck on
    /// the member, no outcome comes to run one until the timeouts, and by then the others'
    /// replies are older than the limit. Called with the verdicts' lock held, so that a
    /// sweep's recount cannot drop the suspicion from the counts.
    fn suspect_on_timeout(
        &self,
        _held: &MutexGuard<'_, ()>,
        by_node: &ByNode,
        health: &Health,
        now: u64,
        latency_ns: u64,
    ) {
        if !self.options.suspicion
            || health.suspected.load(Ordering::Relaxed)
            || health.is_ejected(now)
        {
            return;
        }
        let sent = now.saturating_sub(latency_ns);
        let replied = health.replied.load(Ordering::Relaxed);
        let counted = health
            .view
            .in_flight()
            .saturating_sub(usize::from(replied > sent));
        if counted < self.options.suspicion_min_in_flight {
            return;
        }
        let since = replied.max(sent);
        let limit = self.suspicion_limit(health);
        let others_replied = self.replied.load(Ordering::Relaxed) > sent;
        let stalled = by_node.values().any(|other| {
            !std::ptr::eq(&**other, health) && other.unanswered_since(sent, now, limit)
        });
        if now.saturating_sub(since) >= limit && others_replied && !stalled {
            self.suspect(health);
        }
    }

    /// A call to `health`'s member timed out at `now` after `latency_ns`: it may be found
    /// silent ([`Self::suspect_on_timeout`]), and a suspect is ejected (silent past a call's
    /// whole timeout: an outlier), which ends its suspicion unless the cap keeps it in.
    fn timed_out(&self, by_node: &ByNode, health: &Health, now: u64, latency_ns: u64) {
        // Most timeouts can change nothing here: no lock for them (under overload they come
        // by the thousand).
        let may_suspect = self.options.suspicion && !health.is_ejected(now);
        if !may_suspect && !health.suspected.load(Ordering::Relaxed) {
            return;
        }
        let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
        self.suspect_on_timeout(&verdicts, by_node, health, now, latency_ns);
        if !health.suspected.load(Ordering::Relaxed) {
            return;
        }
        self.eject_locked(&verdicts, health, now, by_node.len(), Reason::Silent);
        if health.is_ejected(now) && health.suspected.swap(false, Ordering::Relaxed) {
            let _ = self
                .out
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Marks `health`'s member suspected of being silent.
    fn suspect(&self, health: &Health) {
        if !health.suspected.swap(true, Ordering::Relaxed) {
            self.suspicions.fetch_add(1, Ordering::Relaxed);
            self.out.fetch_add(1, Ordering::Relaxed);
            self.tell(&EjectionEvent::Suspected {
                node: health.view.id(),
            });
        }
    }

    /// The end of a success-rate interval (due at `due`; looked at `now`): ejects members
    /// whose success rate is far below the others', takes one off the ejection count of
    /// members not ejected per interval that passed, and starts the next interval. Returns how
    /// many members it ejected.
    fn end_interval(
        &self,
        held: &MutexGuard<'_, ()>,
        by_node: &ByNode,
        now: u64,
        due: u64,
    ) -> usize {
        let interval = nanos(self.options.interval).max(1);
        self.interval_end
            .store(now.saturating_add(interval), Ordering::Relaxed);
        // Intervals with no outcome pass with no look: they count all the same.
        let passed = u32::try_from(1 + (now - due) / interval).unwrap_or(u32::MAX);
        let mut rates: Vec<(&Arc<Health>, f64)> = Vec::new();
        for health in by_node.values() {
            let calls = health.calls.swap(0, Ordering::Relaxed);
            let failures = health.failures.swap(0, Ordering::Relaxed);
            if calls >= self.options.success_rate_min_calls {
                rates.push((health, 1.0 - failures.min(calls) as f64 / calls as f64));
            }
            if !health.is_ejected(now) {
                let _ =
                    health
                        .times_ejected
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                            Some(n.saturating_sub(passed))
                        });
            }
        }
        let enough = self.options.success_rate_min_members;
        if enough == 0 || rates.len() < enough {
            return 0;
        }
        let n = rates.len() as f64;
        let mean = rates.iter().map(|(_, r)| r).sum::<f64>() / n;
        let variance = rates.iter().map(|(_, r)| (r - mean).powi(2)).sum::<f64>() / n;
        let deviation = variance.sqrt();
        if deviation < 1e-9 {
            // Equal rates (up to rounding): nobody is an outlier.
            return 0;
        }
        let threshold = mean - self.options.success_rate_stdev_factor * deviation;
        let mut newly = 0;
        for (health, rate) in rates {
            if rate < threshold && !health.is_ejected(now) {
                self.eject_locked(held, health, now, by_node.len(), Reason::SuccessRate);
                newly += usize::from(health.is_ejected(now));
            }
        }
        newly
    }
}

impl Selector for Ejecting {
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        let (inner_request, health) = Wrapped::<Arc<Health>>::split(request);
        let first = self.inner.pick(members, &inner_request)?;
        if self.out.load(Ordering::Relaxed) == 0 || first >= members.len() {
            return Ok(first);
        }
        self.pick_in(members, &inner_request, health, first)
    }

    /// The algorithm's re-selection, avoiding members out as [`pick`](Self::pick) does (its
    /// redraws, if the first is out, are ordinary picks).
    fn repick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        let (inner_request, health) = Wrapped::<Arc<Health>>::split(request);
        let first = self.inner.repick(members, &inner_request)?;
        if self.out.load(Ordering::Relaxed) == 0 || first >= members.len() {
            return Ok(first);
        }
        self.pick_in(members, &inner_request, health, first)
    }

    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        let (inner_request, _) = Wrapped::<Arc<Health>>::split(request);
        self.inner.pick_many(members, count, &inner_request)
    }

    fn members_changed(&self, change: &Change<'_>) {
        let before = self.by_node.load();
        let next: ByNode = change
            .members
            .iter()
            .map(|m| {
                let health = match before.get(m.id()) {
                    // The same member (the same actor: its view shares the estimates): its health
                    // carries. A new actor on the node is a new member.
                    Some(h)
                        if h.view.is_same_member(m)
                            && !change.joined.iter().any(|j| j == m.id_arc()) =>
                    {
                        Arc::clone(h)
                    }
                    _ => Arc::new(Health::new(m.clone())),
                };
                (Arc::clone(m.id_arc()), health)
            })
            .collect();
        self.by_node.store(Arc::new(next));
        self.inner.members_changed(change);
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let by_node = self.by_node.load();
        let health = change
            .members
            .iter()
            .map(|m| {
                by_node
                    .get(m.id())
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Health::new(m.clone())))
            })
            .collect();
        Wrapped::derive(self.inner.derive(change), health)
    }

    fn released(&self, member: &MemberView) {
        self.inner.released(member);
    }

    /// As the algorithm's: ejection only re-draws picks of members that are out, so a
    /// slow start over it (`…+ejection+slow_start`) scales by the factor where the algorithm
    /// does.
    fn applies_slow_start(&self) -> bool {
        self.inner.applies_slow_start()
    }

    fn learns(&self) -> bool {
        true
    }

    /// Only when the algorithm's own selector does: a `Cancelled` outcome counts for
    /// nothing here.
    fn observes_cancelled(&self) -> bool {
        self.inner_learns && self.inner.observes_cancelled()
    }

    fn observe(&self, outcome: &Outcome<'_>) {
        if self.inner_learns {
            self.inner.observe(outcome);
        }
        // A selection that ended without a result teaches nothing (and a guard's release
        // costs no lookup).
        if outcome.kind == OutcomeKind::Cancelled {
            return;
        }
        let by_node = self.by_node.load();
        let Some(health) = by_node.get(outcome.member.id()) else {
            return;
        };
        let now = self.now_ns();
        self.end_ejection_if_due(health, now);
        let latency = u64::try_from(outcome.latency.as_nanos()).unwrap_or(u64::MAX);
        let failed = match outcome.kind {
            OutcomeKind::Cancelled => return,
            OutcomeKind::Ok | OutcomeKind::Error(ErrorCode::BadRequest) => {
                health.replied(now, latency, true);
                false
            }
            OutcomeKind::Error(_) => {
                health.replied(now, latency, false);
                true
            }
            OutcomeKind::Timeout => true,
        };
        if outcome.kind != OutcomeKind::Timeout {
            self.replied.fetch_max(now, Ordering::Relaxed);
            if health.suspected.swap(false, Ordering::Relaxed) {
                // It replied: picked again (recounted exactly at the next sweep).
                let _ = self
                    .out
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            }
        }
        if outcome.kind == OutcomeKind::Timeout {
            health.timed_out.fetch_max(now, Ordering::Relaxed);
            self.timed_out(&by_node, health, now, latency);
        }
        health.calls.fetch_add(1, Ordering::Relaxed);
        if failed {
            health.failures.fetch_add(1, Ordering::Relaxed);
            let run = health
                .consecutive
                .fetch_add(1, Ordering::Relaxed)
                .saturating_add(1);
            let limit = self.options.consecutive_failures;
            if limit != 0 && run >= limit {
                self.eject(health, now, by_node.len(), Reason::ConsecutiveFailures);
            }
        } else {
            health.consecutive.store(0, Ordering::Relaxed);
        }
        self.sweep(now);
    }

    fn explain(&self, members: &[MemberView], chosen: usize, request: &Request<'_>) -> Explanation {
        let (inner_request, _) = Wrapped::<Arc<Health>>::split(request);
        let mut explanation = self.inner.explain(members, chosen, &inner_request);
        let by_node = self.by_node.load();
        let now = self.now_ns();
        let out: Vec<&str> = members
            .iter()
            .enumerate()
            .filter(|&(i, _)| self.is_out(members, None, &by_node, i, now))
            .map(|(_, m)| m.id())
            .collect();
        if !out.is_empty() {
            explanation.rule = format!(
                "{}; ejected or suspected, not picked: {}",
                explanation.rule,
                out.join(", ")
            );
        }
        explanation
    }
}

impl Ejecting {
    /// A pick that must avoid members out: the algorithm's `first` pick if it is in, else up
    /// to [`REDRAWS`] more of its picks, else the next member in the list that is in; if every
    /// member is out, `first` (fail open).
    #[cold]
    #[inline(never)]
    fn pick_in(
        &self,
        members: &[MemberView],
        request: &Request<'_>,
        health: Option<&[Arc<Health>]>,
        first: usize,
    ) -> Result<usize, Error> {
        let now = self.now_ns();
        let by_node = self.by_node.load();
        let out = |i: usize| self.is_out(members, health, &by_node, i, now);
        if !out(first) {
            return Ok(first);
        }
        for _ in 0..REDRAWS {
            let again = self.inner.pick(members, request)?;
            if again < members.len() && !out(again) {
                return Ok(again);
            }
        }
        // A member in, at random: the member out's share spreads evenly over the others (an
        // algorithm that keeps choosing it — LeastConnections, HashRing — would otherwise hand
        // all of it to one neighbour). With most members out, the first in from a random place.
        let len = members.len();
        for _ in 0..RANDOM_LOOKS {
            let i = self.rng.below(len);
            if !out(i) {
                return Ok(i);
            }
        }
        let start = self.rng.below(len);
        Ok((0..len)
            .map(|step| (start + step) % len)
            .find(|&i| !out(i))
            .unwrap_or(first))
    }
}

/// `duration` in ns, saturating (an option of centuries stays centuries).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
