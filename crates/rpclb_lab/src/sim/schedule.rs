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
}

impl Fault {
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

/// The faulty member and its fault's span (see [`RunReport::faulty_member`]).
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
    if start >= end {
        return None;
    }
    let windows = (end - start).div_ceil(SHED_WINDOW_NS) as usize;
    Some(Fault {
        member: member as u32,
        start,
        end,
        members_present: present,
        windows: vec![(0, 0); windows],
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
