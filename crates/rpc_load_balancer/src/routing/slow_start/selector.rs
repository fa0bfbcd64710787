//! The selector of an algorithm with [`SlowStart`]: it keeps each member's factor in the
//! member's view ([`MemberView::slow_start_factor`]), for the algorithm's selector to apply
//! (a cost divided by it, a weight multiplied by it: [`Selector::applies_slow_start`]); for an
//! algorithm that does not, a pick of a member in its window is kept with probability its
//! factor, else redrawn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::SlowStart;
use crate::routing::rng::splitmix64;
use crate::routing::{
    BuildContext, Change, Clock, Derived, Explanation, MemberView, Outcome, Request, Rng, Selector,
};
use crate::Error;

/// How many times a skipped pick is redrawn from the algorithm; the last draw is kept.
const REDRAWS: usize = 2;

/// Mixed into the balancer's seed, so the skips' random numbers are not the algorithm's own
/// sequence (a seeded [`Rng`] from the same seed draws the same numbers).
const SEED_MIX: u64 = 0x736c_6f77_5f73_7461;

/// The factors are refreshed at most every window ÷ this, while a member is in its window.
const REFRESHES_PER_WINDOW: u32 = 100;

/// The longest time between two refreshes of the factors (ns), whatever the window.
const MAX_REFRESH_NS: u64 = 100_000_000;

/// The shortest time between two refreshes of the factors (ns), whatever the window.
const MIN_REFRESH_NS: u64 = 1_000_000;

/// When each member joined (ns on the selector's clock), by node; 0: it ramps not (a member
/// of the first list).
type ByNode = HashMap<Arc<str>, u64, foldhash::fast::RandomState>;

/// The members in their window (as of the last membership change), with when each joined:
/// the views whose factors a refresh writes.
type InWindow = Vec<(MemberView, u64)>;

/// What a [`Ramping`] tells of the members in their window: their number, whenever it
/// changes (a member joins, or a window ends, seen by the first pick after it).
pub(crate) type RampingListener = Box<dyn Fn(usize) + Send + Sync>;

/// How long after the balancer's first non-empty member list a joining member still counts as
/// one of its starting members (no ramp): a balancer discovers its members one by one as its
/// node's sessions come up. At most a tenth of the window.
pub(crate) const STARTUP_GRACE: Duration = Duration::from_secs(2);

/// An algorithm's selector with slow start on top.
pub(crate) struct Ramping {
    inner: Box<dyn Selector>,
    /// Whether `inner` applies the factors itself ([`Selector::applies_slow_start`]): then
    /// no pick is skipped.
    applied: bool,
    options: SlowStart,
    clock: Clock,
    rng: Rng,
    by_node: ArcSwap<ByNode>,
    in_window: ArcSwap<InWindow>,
    /// When the last member's window ends (ns); 0: no member is in its window, and a pick
    /// reads no clock.
    ramp_end: AtomicU64,
    /// When the first non-empty member list came (ns; 0: none yet): members that join within
    /// [`STARTUP_GRACE`] of it (or a tenth of the window, if shorter) do not ramp.
    started_ns: AtomicU64,
    /// When the next member's window ends (ns); `u64::MAX`: none is in its window.
    next_end: AtomicU64,
    /// When the factors are next refreshed (ns).
    next_refresh: AtomicU64,
    /// The time between two refreshes (ns).
    refresh_ns: u64,
    listener: Option<RampingListener>,
}

impl Ramping {
    pub(crate) fn new(
        inner: Box<dyn Selector>,
        options: SlowStart,
        context: &BuildContext<'_>,
    ) -> Self {
        let window = u64::try_from(options.window.as_nanos()).unwrap_or(u64::MAX);
        Self {
            applied: inner.applies_slow_start(),
            inner,
            refresh_ns: (window / u64::from(REFRESHES_PER_WINDOW))
                .clamp(MIN_REFRESH_NS, MAX_REFRESH_NS),
            options,
            clock: context.clock.clone(),
            rng: Rng::from_seed(context.seed.map(|seed| splitmix64(seed ^ SEED_MIX))),
            by_node: ArcSwap::from_pointee(ByNode::default()),
            in_window: ArcSwap::from_pointee(InWindow::new()),
            ramp_end: AtomicU64::new(0),
            started_ns: AtomicU64::new(0),
            next_end: AtomicU64::new(u64::MAX),
            next_refresh: AtomicU64::new(0),
            listener: None,
        }
    }

    /// This selector telling `listener` how many members are in their window.
    pub(crate) fn with_listener(mut self, listener: RampingListener) -> Self {
        self.listener = Some(listener);
        self
    }

    fn window_ns(&self) -> u64 {
        u64::try_from(self.options.window.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Counts the members of `by_node` in their window at `now`, notes when the next window
    /// ends, and tells the listener.
    fn recount(&self, by_node: &ByNode, now: u64) {
        let window = self.window_ns();
        let (mut count, mut next) = (0, u64::MAX);
        for &at in by_node.values() {
            let end = at.saturating_add(window);
            if at != 0 && end > now {
                count += 1;
                next = next.min(end);
            }
        }
        self.next_end.store(next, Ordering::Relaxed);
        if let Some(listener) = &self.listener {
            listener(count);
        }
    }

    /// Recounts once a window has ended (one thread of those that see it).
    fn window_ended(&self, now: u64) {
        let next = self.next_end.load(Ordering::Relaxed);
        if now >= next
            && self
                .next_end
                .compare_exchange(next, u64::MAX, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.recount(&self.by_node.load(), now);
        }
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The factor of a member that joined at `at` (ns; 0: a member of the first list), at
    /// `now`.
    fn factor_at(&self, at: u64, now: u64) -> f64 {
        if at == 0 {
            return 1.0;
        }
        self.options
            .factor(Duration::from_nanos(now.saturating_sub(at)))
    }

    /// Writes the factors of the members in their window at `now` (raised only: a refresh
    /// that read the clock before another's cannot lower them after it).
    fn refresh(&self, now: u64) {
        for (view, at) in self.in_window.load().iter() {
            view.raise_slow_start_factor(self.factor_at(*at, now));
        }
    }

    /// What a pick does first while some member may be in its window (`ramp_end`, when the
    /// last window ends): counts the windows that ended, and refreshes the factors when
    /// [`refresh_ns`](Self::refresh_ns) passed (or for good, at 1, when every window ended).
    /// The time now, or `None` once every window ended.
    #[cold]
    #[inline(never)]
    fn tick(&self, ramp_end: u64) -> Option<u64> {
        let now = self.now_ns();
        self.window_ended(now);
        if now >= ramp_end {
            // Every window ended: picks read no clock again, unless a member joined since.
            if self
                .ramp_end
                .compare_exchange(ramp_end, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                self.refresh(now);
            }
            return None;
        }
        let due = self.next_refresh.load(Ordering::Relaxed);
        if now >= due
            && self
                .next_refresh
                .compare_exchange(
                    due,
                    now.saturating_add(self.refresh_ns),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.refresh(now);
        }
        Some(now)
    }

    /// A pick of an algorithm that does not apply the factors, while some member may be in
    /// its window: `first` if a draw keeps it (with probability its factor), else up to
    /// [`REDRAWS`] more of the algorithm's picks, the last kept whatever its factor.
    #[cold]
    #[inline(never)]
    fn pick_skipping(
        &self,
        members: &[MemberView],
        request: &Request<'_>,
        first: usize,
        ramp_end: u64,
    ) -> Result<usize, Error> {
        if self.tick(ramp_end).is_none() {
            return Ok(first);
        }
        let mut pick = first;
        for _ in 0..REDRAWS {
            if self.rng.chance(members[pick].slow_start_factor()) {
                return Ok(pick);
            }
            let again = self.inner.pick(members, request)?;
            if again >= members.len() {
                return Ok(again);
            }
            pick = again;
        }
        Ok(pick)
    }
}

impl Selector for Ramping {
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        let ramp_end = self.ramp_end.load(Ordering::Relaxed);
        if self.applied {
            if ramp_end != 0 {
                // The factors refreshed before the algorithm reads them.
                self.tick(ramp_end);
            }
            return self.inner.pick(members, request);
        }
        let first = self.inner.pick(members, request)?;
        if ramp_end == 0 || first >= members.len() {
            return Ok(first);
        }
        self.pick_skipping(members, request, first, ramp_end)
    }

    /// The algorithm's re-selection, skipping ramping members as [`pick`](Self::pick) does
    /// (its redraws are ordinary picks).
    fn repick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        let ramp_end = self.ramp_end.load(Ordering::Relaxed);
        if self.applied {
            if ramp_end != 0 {
                self.tick(ramp_end);
            }
            return self.inner.repick(members, request);
        }
        let first = self.inner.repick(members, request)?;
        if ramp_end == 0 || first >= members.len() {
            return Ok(first);
        }
        self.pick_skipping(members, request, first, ramp_end)
    }

    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        self.inner.pick_many(members, count, request)
    }

    fn members_changed(&self, change: &Change<'_>) {
        let before = self.by_node.load();
        // The balancer starting: its members are discovered one by one, over the first
        // moments (a peer's groups arrive as its session comes up); those found within the
        // grace after the first non-empty list do not ramp.
        let now = self.now_ns();
        let window = self.window_ns();
        if !change.members.is_empty() {
            let _ = self.started_ns.compare_exchange(
                0,
                now.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        let started = self.started_ns.load(Ordering::Relaxed);
        let grace = u64::try_from(STARTUP_GRACE.as_nanos())
            .unwrap_or(u64::MAX)
            .min(window / 10);
        let first = started != 0 && now.saturating_sub(started) <= grace;
        let mut ramp_end = 0;
        let mut in_window = InWindow::new();
        let next: ByNode = change
            .members
            .iter()
            .map(|m| {
                let rejoined = change.joined.iter().any(|j| j == m.id_arc());
                let at = match before.get(m.id()) {
                    _ if first => 0,
                    Some(&at) if !rejoined => at,
                    _ => now,
                };
                let end = at.saturating_add(window);
                if at != 0 && end > now {
                    ramp_end = ramp_end.max(end);
                    in_window.push((m.clone(), at));
                }
                // Before the list is published: its first picks read the factor.
                m.set_slow_start_factor(self.factor_at(at, now));
                (Arc::clone(m.id_arc()), at)
            })
            .collect();
        self.recount(&next, now);
        self.by_node.store(Arc::new(next));
        self.in_window.store(Arc::new(in_window));
        self.next_refresh
            .store(now.saturating_add(self.refresh_ns), Ordering::Relaxed);
        self.ramp_end.store(ramp_end, Ordering::Relaxed);
        self.inner.members_changed(change);
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        self.inner.derive(change)
    }

    fn released(&self, member: &MemberView) {
        self.inner.released(member);
    }

    /// The factors are applied here, by the algorithm or by skipping: a wrapper over this one
    /// need not.
    fn applies_slow_start(&self) -> bool {
        true
    }

    fn learns(&self) -> bool {
        self.inner.learns()
    }

    fn observes_cancelled(&self) -> bool {
        self.inner.observes_cancelled()
    }

    fn observe(&self, outcome: &Outcome<'_>) {
        self.inner.observe(outcome);
    }

    fn explain(&self, members: &[MemberView], chosen: usize, request: &Request<'_>) -> Explanation {
        let mut explanation = self.inner.explain(members, chosen, request);
        let ramping: Vec<String> = members
            .iter()
            .filter(|m| m.slow_start_factor() < 1.0)
            .map(|m| format!("{} ×{:.2}", m.id(), m.slow_start_factor()))
            .collect();
        if !ramping.is_empty() {
            let how = if self.applied {
                "slow start factors, applied by the algorithm (costs ÷ factor, weights × factor)"
            } else {
                "slow start, kept with probability"
            };
            explanation.rule = format!("{}; {how}: {}", explanation.rule, ramping.join(", "));
        }
        explanation
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// Picks the first member, always.
    struct First;

    impl Selector for First {
        fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
            Ok(0)
        }
    }

    /// Picks the last member, always; says it applies the slow-start factor itself when
    /// `applies`, and notes the factor of the member it picks as it reads it.
    struct Last {
        applies: bool,
        seen: Arc<Mutex<Vec<f64>>>,
    }

    impl Selector for Last {
        fn pick(&self, members: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
            let last = members.len() - 1;
            self.seen
                .lock()
                .unwrap()
                .push(members[last].slow_start_factor());
            Ok(last)
        }

        fn applies_slow_start(&self) -> bool {
            self.applies
        }

        fn explain(&self, _: &[MemberView], _: usize, _: &Request<'_>) -> Explanation {
            Explanation {
                rule: "last".into(),
                scores: Vec::new(),
            }
        }
    }

    fn context(clock: &crate::routing::ManualClock) -> BuildContext<'static> {
        let mut context = BuildContext::new("b");
        context.clock = clock.clock();
        context.seed = Some(5);
        context
    }

    fn list(nodes: &[&str]) -> Vec<MemberView> {
        nodes.iter().map(|n| MemberView::new(*n, false)).collect()
    }

    fn change<'a>(joined: &'a [Arc<str>], members: &'a [MemberView]) -> Change<'a> {
        Change {
            balancer: "b",
            joined,
            left: &[],
            members,
            version: 1,
        }
    }

    #[test]
    fn the_listener_hears_members_enter_and_leave_their_window() {
        let clock = Clock::manual();
        let mut context = BuildContext::new("b");
        context.clock = clock.clock();
        context.seed = Some(1);
        let heard = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&heard);
        let options = SlowStart::new().window(Duration::from_secs(10));
        let ramping = Ramping::new(Box::new(First), options, &context)
            .with_listener(Box::new(move |n| sink.lock().unwrap().push(n)));
        let first = list(&["a@h"]);
        ramping.members_changed(&change(&[Arc::from("a@h")], &first));
        // Past the startup grace (a tenth of the 10 s window).
        clock.advance(Duration::from_secs(2));
        let two = list(&["a@h", "b@h"]);
        ramping.members_changed(&change(&[Arc::from("b@h")], &two));
        clock.advance(Duration::from_secs(4));
        let three = list(&["a@h", "b@h", "c@h"]);
        ramping.members_changed(&change(&[Arc::from("c@h")], &three));
        assert_eq!(
            *heard.lock().unwrap(),
            vec![0, 1, 2],
            "the first list ramps not"
        );
        let request = Request::new("b", None, Request::UNCACHED);
        ramping.pick(&three, &request).unwrap();
        assert_eq!(heard.lock().unwrap().len(), 3, "no window ended yet");
        clock.advance(Duration::from_secs(7));
        ramping.pick(&three, &request).unwrap();
        ramping.pick(&three, &request).unwrap();
        assert_eq!(
            *heard.lock().unwrap(),
            vec![0, 1, 2, 1],
            "b's window ended, once"
        );
        clock.advance(Duration::from_secs(4));
        ramping.pick(&three, &request).unwrap();
        assert_eq!(*heard.lock().unwrap(), vec![0, 1, 2, 1, 0]);
    }

    #[test]
    fn members_found_within_the_startup_grace_do_not_ramp() {
        // A balancer discovers its members one by one as its sessions come up: those found
        // within 2 s of its first member (a tenth of the window, if shorter) are starting
        // members; a member found later ramps.
        let clock = Clock::manual();
        let options = SlowStart::new().window(Duration::from_secs(100));
        let ramping = Ramping::new(Box::new(First), options, &context(&clock));
        let first = list(&["a@h"]);
        ramping.members_changed(&change(&[Arc::from("a@h")], &first));
        clock.advance(Duration::from_millis(1_500));
        let two = vec![first[0].clone(), MemberView::new("b@h", false)];
        ramping.members_changed(&change(&[Arc::from("b@h")], &two));
        assert_eq!(
            two[1].slow_start_factor(),
            1.0,
            "found 1.5 s after the first"
        );
        clock.advance(Duration::from_millis(600));
        let three = vec![
            two[0].clone(),
            two[1].clone(),
            MemberView::new("c@h", false),
        ];
        ramping.members_changed(&change(&[Arc::from("c@h")], &three));
        assert_eq!(
            three[2].slow_start_factor(),
            f64::from(0.1f32),
            "2.1 s: it ramps"
        );
        // With a 10 s window the grace is 1 s.
        let options = SlowStart::new().window(Duration::from_secs(10));
        let ramping = Ramping::new(Box::new(First), options, &context(&clock));
        let first = list(&["a@h"]);
        ramping.members_changed(&change(&[Arc::from("a@h")], &first));
        clock.advance(Duration::from_millis(1_100));
        let two = vec![first[0].clone(), MemberView::new("b@h", false)];
        ramping.members_changed(&change(&[Arc::from("b@h")], &two));
        assert_eq!(two[1].slow_start_factor(), f64::from(0.1f32));
    }

    #[test]
    fn factors_are_written_at_a_join_refreshed_before_picks_and_1_after_the_window() {
        let clock = Clock::manual();
        let options = SlowStart::new().window(Duration::from_secs(10));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let last = Last {
            applies: true,
            seen: Arc::clone(&seen),
        };
        let ramping = Ramping::new(Box::new(last), options, &context(&clock));
        let first = list(&["a@h"]);
        ramping.members_changed(&change(&[Arc::from("a@h")], &first));
        assert_eq!(
            first[0].slow_start_factor(),
            1.0,
            "the first list ramps not"
        );
        // a's view carried into the new list (its stats shared), b's new, past the startup
        // grace (a tenth of the 10 s window).
        clock.advance(Duration::from_secs(2));
        let two = vec![first[0].clone(), MemberView::new("b@h", false)];
        ramping.members_changed(&change(&[Arc::from("b@h")], &two));
        // Written before the list is published: min_percent at the join.
        assert_eq!(two[1].slow_start_factor(), f64::from(0.1f32));
        let request = Request::new("b", None, Request::UNCACHED);
        // A re-selection list shares the members' stats: it reads the same factors.
        let again: Vec<MemberView> = two.to_vec();
        clock.advance(Duration::from_secs(5));
        assert_eq!(ramping.pick(&again, &request).unwrap(), 1);
        assert_eq!(two[1].slow_start_factor(), 0.5, "refreshed before the pick");
        clock.advance(Duration::from_millis(50));
        ramping.pick(&two, &request).unwrap();
        assert_eq!(
            two[1].slow_start_factor(),
            0.5,
            "at most every window / 100 (100 ms)"
        );
        clock.advance(Duration::from_millis(60));
        ramping.pick(&two, &request).unwrap();
        assert_eq!(two[1].slow_start_factor(), f64::from(0.511f32));
        clock.advance(Duration::from_secs(5));
        ramping.pick(&two, &request).unwrap();
        assert_eq!(two[1].slow_start_factor(), 1.0, "the window ended");
        assert_eq!(two[0].slow_start_factor(), 1.0);
        assert_eq!(
            *seen.lock().unwrap(),
            [0.5, 0.5, f64::from(0.511f32), 1.0],
            "the algorithm read the factor refreshed for its pick"
        );
    }

    #[test]
    fn an_algorithm_that_applies_the_factor_is_not_skipped_one_that_does_not_is() {
        for applies in [true, false] {
            let clock = Clock::manual();
            let options = SlowStart::new().window(Duration::from_secs(100));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let last = Last {
                applies,
                seen: Arc::clone(&seen),
            };
            let ramping = Ramping::new(Box::new(last), options, &context(&clock));
            let first = list(&["a@h"]);
            ramping.members_changed(&change(&[Arc::from("a@h")], &first));
            clock.advance(Duration::from_secs(3));
            let two = list(&["a@h", "b@h"]);
            ramping.members_changed(&change(&[Arc::from("b@h")], &two));
            clock.advance(Duration::from_secs(25));
            let request = Request::new("b", None, Request::UNCACHED);
            let picks = 4_000;
            for _ in 0..picks {
                // The inner selector always picks b: only a skip could redraw it, and the
                // redraw picks b again.
                assert_eq!(ramping.pick(&two, &request).unwrap(), 1);
            }
            let asked = seen.lock().unwrap().len();
            if applies {
                assert_eq!(asked, picks, "no pick skipped: the factor counts once");
            } else {
                // Kept at the first draw with probability 0.25, else redrawn (twice at most):
                // 1 + 0.75 + 0.75² draws a pick on average.
                let per_pick = asked as f64 / picks as f64;
                assert!((2.2..2.4).contains(&per_pick), "{per_pick}");
            }
            let explained = ramping.explain(&two, 1, &request).rule;
            let expected = if applies {
                "last; slow start factors, applied by the algorithm (costs ÷ factor, weights × factor): b@h ×0.25"
            } else {
                "last; slow start, kept with probability: b@h ×0.25"
            };
            assert_eq!(explained, expected);
        }
    }
}
