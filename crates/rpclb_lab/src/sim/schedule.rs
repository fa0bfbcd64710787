//! The schedule of a run: a scenario's events as a timeline of member changes, and the
//! faulty member whose shed time a run measures.

use super::{ns, NS_PER_MS, SHED_WINDOW_NS};
use crate::scenario::{Action, Scenario};

/// What a member does in one moment of the timeline.
#[derive(Debug, Clone, Copy)]
pub(super) enum Change {
    Pause,
    Resume,
    Slow(f64),
    Fail(f64),
    Join { warm_factor: f64 },
    WarmEnd,
    Leave,
}

/// The faulty member's picks per 100 ms window while its fault lasts.
pub(super) struct Fault {
    pub(super) member: u32,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) members_present: usize,
    /// (every pick, the faulty member's picks) per window.
    pub(super) windows: Vec<(u64, u64)>,
    /// Replies that came while the fault lasted.
    pub(super) ok_during: u64,
    /// Replies that came in as long a span just before it (or since the run began).
    pub(super) ok_before: u64,
    /// Each caller's picks of the faulty member while the fault lasted (by caller index).
    pub(super) picks_by_caller: Vec<u64>,
    /// The last pick of the faulty member by any caller while the fault lasted (ns).
    pub(super) last_pick: Option<u64>,
}

impl Fault {
    /// Counts a reply that came at `now`.
    pub(super) fn count_reply(&mut self, now: u64) {
        if now >= self.start && now < self.end {
            self.ok_during += 1;
        } else if now < self.start && now >= self.start.saturating_sub(self.end - self.start) {
            self.ok_before += 1;
        }
    }

    /// Counts a pick of `member` by `caller` at `now`.
    pub(super) fn count_caller_pick(&mut self, caller: u32, member: u32, now: u64) {
        if member == self.member && now >= self.start && now < self.end {
            let c = caller as usize;
            if self.picks_by_caller.len() <= c {
                self.picks_by_caller.resize(c + 1, 0);
            }
            self.picks_by_caller[c] += 1;
            self.last_pick = Some(now);
        }
    }

    /// Replies per second while the fault lasted ÷ replies per second in as long a span
    /// just before it; `None` for a fault from the run's start or with no reply before it.
    pub(super) fn goodput_ratio(&self) -> Option<f64> {
        let before_span = (self.end - self.start).min(self.start);
        if before_span == 0 || self.ok_before == 0 {
            return None;
        }
        let during = self.ok_during as f64 / (self.end - self.start) as f64;
        Some(during / (self.ok_before as f64 / before_span as f64))
    }

    /// How long after the fault began the faulty member was last picked while it lasted (ms);
    /// `None` when it was not picked then.
    pub(super) fn last_pick_ms(&self) -> Option<f64> {
        self.last_pick
            .map(|at| (at - self.start) as f64 / super::NS_PER_MS)
    }

    /// The most picks of the faulty member by one caller while the fault lasted.
    pub(super) fn most_picks_by_a_caller(&self) -> u64 {
        self.picks_by_caller.iter().copied().max().unwrap_or(0)
    }

    pub(super) fn shed_ms(&self) -> Option<f64> {
        if self.windows.iter().all(|&(total, _)| total == 0) {
            // Nothing picked while the fault lasted (no call measured): nothing to shed.
            return None;
        }
        let fair = 1.0 / self.members_present.max(1) as f64;
        let last_picked = self
            .windows
            .iter()
            .rposition(|&(total, faulty)| total > 0 && faulty as f64 >= fair / 2.0 * total as f64);
        match last_picked {
            None => Some(0.0),
            Some(w) if w + 1 == self.windows.len() => None,
            Some(w) => Some(((w as u64 + 1) * SHED_WINDOW_NS) as f64 / NS_PER_MS),
        }
    }
}

/// The faulty member and its fault's span (see [`RunReport::faulty_member`]); `None` without
/// one, or when its fault ends before the measured window starts or starts after the run.
pub(super) fn find_fault(s: &Scenario, run_end: u64, joins_later: &[bool]) -> Option<Fault> {
    let initial = joins_later.iter().filter(|j| !**j).count();
    let (member, start, end, present) = if let Some(e) = s.event.iter().find(|e| {
        matches!(e.action, Action::Pause | Action::Slow | Action::Fail)
            || (e.action == Action::Join && e.factor.is_some_and(|f| f > 1.0))
    }) {
        let start = ns(e.at_s);
        let end = e.for_s.map_or(run_end, |f| start + ns(f)).min(run_end);
        let present = initial + usize::from(e.action == Action::Join);
        (e.member, start, end, present)
    } else {
        let m = s
            .member
            .iter()
            .find(|m| m.slow_factor.is_some_and(|f| f > 1.0))?;
        (m.index, 0, run_end, initial)
    };
    // A fault over before the measured window starts is not measured (the run warns of it),
    // as one after the run's end is not.
    if start >= end || end <= ns(s.warmup_s) {
        return None;
    }
    let windows = (end - start).div_ceil(SHED_WINDOW_NS) as usize;
    Some(Fault {
        member: member as u32,
        start,
        end,
        members_present: present,
        windows: vec![(0, 0); windows],
        ok_during: 0,
        ok_before: 0,
        picks_by_caller: Vec::new(),
        last_pick: None,
    })
}

/// The scenario's events as a timeline of changes, in time order.
pub(super) fn expand_timeline(s: &Scenario) -> Vec<(u64, Change, u32)> {
    let end = ns(s.warmup_s + s.measure_s);
    let mut timeline = Vec::new();
    for e in &s.event {
        let m = e.member as u32;
        let (on, off) = match e.action {
            Action::Pause => (Change::Pause, Some(Change::Resume)),
            Action::Slow => (
                Change::Slow(e.factor.unwrap_or(1.0)),
                Some(Change::Slow(1.0)),
            ),
            Action::Fail => (
                Change::Fail(e.fraction.unwrap_or(0.0)),
                Some(Change::Fail(0.0)),
            ),
            Action::Join => (
                Change::Join {
                    warm_factor: e.factor.unwrap_or(1.0),
                },
                Some(Change::WarmEnd),
            ),
            Action::Leave => (Change::Leave, None),
        };
        let mut at = ns(e.at_s);
        loop {
            if at > end {
                break;
            }
            timeline.push((at, on, m));
            if let (Some(f), Some(off)) = (e.for_s, off) {
                timeline.push((at + ns(f), off, m));
            }
            match e.every_s {
                Some(every) => at += ns(every),
                None => break,
            }
        }
    }
    // Stable: changes at one instant keep the file's order, except that pauses end last, so
    // a pause that begins as another ends continues it (the member answers nothing between).
    timeline.sort_by_key(|(at, change, _)| (*at, matches!(change, Change::Resume)));
    timeline
}
