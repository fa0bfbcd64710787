//! The selector of an algorithm with [`SlowStart`]: the algorithm's own selector picks, and
//! a pick of a member in its window is kept with probability its factor, else redrawn.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::SlowStart;
use crate::routing::rng::splitmix64;
use crate::routing::wrapped::{record, Wrapped};
use crate::routing::{
    BuildContext, Change, Clock, Derived, Explanation, MemberView, Outcome, Request, Rng, Selector,
};
use crate::Error;

/// How many times a skipped pick is redrawn from the algorithm; the last draw is kept.
const REDRAWS: usize = 2;

/// Mixed into the balancer's seed, so the skips' random numbers are not the algorithm's own
/// sequence (a seeded [`Rng`] from the same seed draws the same numbers).
const SEED_MIX: u64 = 0x736c_6f77_5f73_7461;

/// When each member joined (ns on the selector's clock), by node; 0: it ramps not (a member
/// of the first list).
type ByNode = HashMap<Arc<str>, u64, foldhash::fast::RandomState>;

/// What a [`Ramping`] tells of the members in their window: their number, whenever it
/// changes (a member joins, or a window ends, seen by the first pick after it).
pub(crate) type RampingListener = Box<dyn Fn(usize) + Send + Sync>;

/// An algorithm's selector with slow start on top.
pub(crate) struct Ramping {
    inner: Box<dyn Selector>,
    options: SlowStart,
    clock: Clock,
    rng: Rng,
    by_node: ArcSwap<ByNode>,
    /// When the last member's window ends (ns); 0: no member is in its window, and a pick
    /// reads no clock.
    ramp_end: AtomicU64,
    /// Whether a non-empty member list came: the members of the first do not ramp.
    started: AtomicBool,
    /// When the next member's window ends (ns); `u64::MAX`: none is in its window.
    next_end: AtomicU64,
    listener: Option<RampingListener>,
}

impl Ramping {
    pub(crate) fn new(
        inner: Box<dyn Selector>,
        options: SlowStart,
        context: &BuildContext<'_>,
    ) -> Self {
        Self {
            inner,
            options,
            clock: context.clock.clone(),
            rng: Rng::from_seed(context.seed.map(|seed| splitmix64(seed ^ SEED_MIX))),
            by_node: ArcSwap::from_pointee(ByNode::default()),
            ramp_end: AtomicU64::new(0),
            started: AtomicBool::new(false),
            next_end: AtomicU64::new(u64::MAX),
            listener: None,
        }
    }

    /// This selector telling `listener` how many members are in their window.
    pub(crate) fn with_listener(mut self, listener: RampingListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Counts the members of `by_node` in their window at `now`, notes when the next window
    /// ends, and tells the listener.
    fn recount(&self, by_node: &ByNode, now: u64) {
        let window = u64::try_from(self.options.window.as_nanos()).unwrap_or(u64::MAX);
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

    /// `members[index]`'s factor at `now`.
    fn factor(
        &self,
        members: &[MemberView],
        joined: Option<&[u64]>,
        by_node: &ByNode,
        index: usize,
        now: u64,
    ) -> f64 {
        let at = record(members, joined, by_node, index).copied();
        match at {
            Some(at) if at != 0 => self
                .options
                .factor(std::time::Duration::from_nanos(now.saturating_sub(at))),
            _ => 1.0,
        }
    }

    /// Whether a draw keeps a pick of factor `factor`.
    #[inline]
    fn keeps(&self, factor: f64) -> bool {
        if factor >= 1.0 {
            return true;
        }
        // 53 random bits: uniform in [0, 1).
        let draw = (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        draw < factor
    }

    /// A pick while some member may be in its window: `first` if the draw keeps it, else up
    /// to [`REDRAWS`] more of the algorithm's picks, the last kept whatever its factor.
    #[cold]
    #[inline(never)]
    fn pick_ramping(
        &self,
        members: &[MemberView],
        request: &Request<'_>,
        joined: Option<&[u64]>,
        first: usize,
        ramp_end: u64,
    ) -> Result<usize, Error> {
        let now = self.now_ns();
        self.window_ended(now);
        if now >= ramp_end {
            // Every window ended: picks read no clock again, unless a member joined since.
            let _ =
                self.ramp_end
                    .compare_exchange(ramp_end, 0, Ordering::Relaxed, Ordering::Relaxed);
            return Ok(first);
        }
        let by_node = self.by_node.load();
        let mut pick = first;
        for _ in 0..REDRAWS {
            if self.keeps(self.factor(members, joined, &by_node, pick, now)) {
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
        let (inner_request, joined) = Wrapped::<u64>::split(request);
        let first = self.inner.pick(members, &inner_request)?;
        let ramp_end = self.ramp_end.load(Ordering::Relaxed);
        if ramp_end == 0 || first >= members.len() {
            return Ok(first);
        }
        self.pick_ramping(members, &inner_request, joined, first, ramp_end)
    }

    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        let (inner_request, _) = Wrapped::<u64>::split(request);
        self.inner.pick_many(members, count, &inner_request)
    }

    fn members_changed(&self, change: &Change<'_>) {
        let before = self.by_node.load();
        // The first non-empty list is the balancer starting: nobody ramps.
        let first = !change.members.is_empty() && !self.started.swap(true, Ordering::Relaxed);
        let now = self.now_ns();
        let window = u64::try_from(self.options.window.as_nanos()).unwrap_or(u64::MAX);
        let mut ramp_end = 0;
        let next: ByNode = change
            .members
            .iter()
            .map(|m| {
                let rejoined = change.joined.iter().any(|j| j == m.node_arc());
                let at = match before.get(m.node()) {
                    _ if first => 0,
                    Some(&at) if !rejoined => at,
                    _ => now,
                };
                if at != 0 && at.saturating_add(window) > now {
                    ramp_end = ramp_end.max(at.saturating_add(window));
                }
                (Arc::clone(m.node_arc()), at)
            })
            .collect();
        self.recount(&next, now);
        self.by_node.store(Arc::new(next));
        self.ramp_end.store(ramp_end, Ordering::Relaxed);
        self.inner.members_changed(change);
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let by_node = self.by_node.load();
        let joined = change
            .members
            .iter()
            .map(|m| by_node.get(m.node()).copied().unwrap_or(0))
            .collect();
        Wrapped::derive(self.inner.derive(change), joined)
    }

    fn released(&self, member: &MemberView) {
        self.inner.released(member);
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
        let (inner_request, joined) = Wrapped::<u64>::split(request);
        let mut explanation = self.inner.explain(members, chosen, &inner_request);
        let by_node = self.by_node.load();
        let now = self.now_ns();
        let ramping: Vec<String> = (0..members.len())
            .filter_map(|i| {
                let factor = self.factor(members, joined, &by_node, i, now);
                (factor < 1.0).then(|| format!("{} ×{factor:.2}", members[i].node()))
            })
            .collect();
        if !ramping.is_empty() {
            explanation.rule = format!(
                "{}; slow start, kept with probability: {}",
                explanation.rule,
                ramping.join(", ")
            );
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
}
