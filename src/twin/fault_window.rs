//! The calls around a twin's fault, as one caller process counts them: the lab's
//! `fault_goodput_ratio`, `faulty_picks_per_caller` and `last_faulty_pick_ms`
//! ([`rpclb_lab::RunReport`]) need to know which calls went to the faulty member after its
//! fault began, and which replies came before and during it.
//!
//! The demo tells each caller the fault's span ([`FaultWindow`]: the faulty member's node
//! name, and the span in µs from the run's agreed start, [`Plan::fault_span`]); the caller
//! counts, on its own monotonic clock measured from that agreed start, what it saw
//! ([`FaultCounts`]), and the demo sums the callers' counts ([`super::merge`]).
//!
//! How that differs from the lab, which has one virtual clock:
//! - **Clocks.** Each process has its own. The callers and the demo agree on the run's start
//!   as a Unix time in ms, each turning it into its own monotonic instant, so a caller's
//!   fault start is the demo's to about 1 ms. The demo plays the fault (SIGSTOP,
//!   `work_fault`, the new member's start) on its own timer at the planned instant; a demo
//!   delayed by a busy machine plays it later than the callers count from (not measured).
//! - **Picks.** The lab counts a pick when its selector picks. A caller learns which member
//!   a call went to when the call ends (the reply, or the error naming the member), and
//!   counts it by the time the call was issued. A call that ended naming no member is no
//!   pick, as a call with no member to pick is none in the lab; a call still running when
//!   the caller stops waiting (the call timeout + 2 s after the run's end) is not counted.
//! - **Replies.** Counted, as in the lab, by when the caller saw each successful reply,
//!   warm-up included; summed over the callers.

use serde::{Deserialize, Serialize};

use super::plan::Plan;

/// A fault's span as a caller is told it (`rpclb demo-caller --fault-member --fault-from-us
/// --fault-to-us`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    /// The faulty member's full node name (as the callers' outcomes name it).
    pub member: String,
    /// The fault's start, µs from the run's agreed start.
    pub from_us: u64,
    /// The fault's end (exclusive), µs from the run's agreed start.
    pub to_us: u64,
}

impl FaultWindow {
    /// The window of `plan`'s fault ([`Plan::fault_span`]), `members` being the full node
    /// names by lab index; `None` when the faulty member has no name there or the span is
    /// empty.
    pub fn of(plan: &Plan, members: &[String]) -> Option<FaultWindow> {
        let (from, to) = plan.fault_span();
        let window = FaultWindow {
            member: members.get(plan.fault.member()?)?.clone(),
            from_us: from.as_micros() as u64,
            to_us: to.as_micros() as u64,
        };
        (window.from_us < window.to_us).then_some(window)
    }

    /// The fault's length, µs.
    pub fn length_us(&self) -> u64 {
        self.to_us.saturating_sub(self.from_us)
    }

    /// The length of the span just before the fault whose replies it is compared with, µs:
    /// as long as the fault, or the time since the run's start when that is shorter (the
    /// lab's rule; 0 for a fault from the start).
    pub fn before_us(&self) -> u64 {
        self.length_us().min(self.from_us)
    }
}

/// What one caller counted around the fault (its report's `fault`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    /// Calls issued while the fault lasted that went to the faulty member.
    pub picks: u64,
    /// When the last of those was issued, µs after the fault's start; `None` without any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pick_us: Option<u64>,
    /// Successful replies that came while the fault lasted.
    pub ok_during: u64,
    /// Successful replies that came in the span just before it
    /// ([`FaultWindow::before_us`] long).
    pub ok_before: u64,
}

impl FaultCounts {
    /// Counts a call that ended: issued at `issued_us` and ended at `ended_us` (µs from the
    /// run's agreed start), sent to `node` (`None`: the outcome named no member), `ok` when
    /// it got a reply.
    pub fn count(
        &mut self,
        window: &FaultWindow,
        node: Option<&str>,
        ok: bool,
        issued_us: u64,
        ended_us: u64,
    ) {
        let during = |t: u64| (window.from_us..window.to_us).contains(&t);
        if node == Some(window.member.as_str()) && during(issued_us) {
            self.picks += 1;
            let after = issued_us - window.from_us;
            self.last_pick_us = Some(self.last_pick_us.map_or(after, |last| last.max(after)));
        }
        if ok {
            if during(ended_us) {
                self.ok_during += 1;
            } else if (window.from_us - window.before_us()..window.from_us).contains(&ended_us) {
                self.ok_before += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::Knobs;
    use super::*;

    fn window() -> FaultWindow {
        // A 5 s fault from 3 s: the span before is the first 3 s.
        FaultWindow {
            member: "m0@h".into(),
            from_us: 3_000_000,
            to_us: 8_000_000,
        }
    }

    #[test]
    fn a_plans_window_is_its_fault_span_in_microseconds() {
        let plan = Plan::new(
            "paused-member",
            Knobs {
                warmup_s: 2.0,
                measure_s: 12.0,
                service_ms: 10.0,
                capacity: 8,
                callers: 2,
                load: 0.5,
                hedge: None,
            },
        )
        .unwrap();
        let members: Vec<String> = (0..4).map(|i| format!("m{i}@h")).collect();
        let window = FaultWindow::of(&plan, &members).unwrap();
        assert_eq!(
            window,
            FaultWindow {
                member: "m0@h".into(),
                from_us: 4_000_000,
                to_us: 9_000_000,
            }
        );
        assert_eq!(
            (window.length_us(), window.before_us()),
            (5_000_000, 4_000_000)
        );
        assert_eq!(FaultWindow::of(&plan, &[]), None);
    }

    #[test]
    fn picks_count_by_issue_time_and_replies_by_when_they_came() {
        let w = window();
        let mut counts = FaultCounts::default();
        // Before the fault: not a pick of the fault; its reply is before it.
        counts.count(&w, Some("m0@h"), true, 2_990_000, 2_999_999);
        // Issued during it to the faulty member, failed: picks.
        counts.count(&w, Some("m0@h"), false, 3_000_000, 4_000_000);
        counts.count(&w, Some("m0@h"), false, 3_250_000, 4_250_000);
        // To another member, or naming none: no pick.
        counts.count(&w, Some("m1@h"), true, 3_500_000, 3_510_000);
        counts.count(&w, None, false, 3_600_000, 3_600_000);
        // After it: no pick; the reply after it counts nowhere.
        counts.count(&w, Some("m0@h"), true, 8_000_000, 8_010_000);
        // A reply at the run's start is in the span before (3 s long here).
        counts.count(&w, Some("m1@h"), true, 0, 0);
        assert_eq!(
            counts,
            FaultCounts {
                picks: 2,
                last_pick_us: Some(250_000),
                ok_during: 1,
                ok_before: 2,
            }
        );
    }

    #[test]
    fn replies_longer_before_than_the_fault_lasts_are_not_compared() {
        let w = FaultWindow {
            from_us: 10_000_000,
            to_us: 15_000_000,
            ..window()
        };
        assert_eq!(w.before_us(), 5_000_000);
        let mut counts = FaultCounts::default();
        counts.count(&w, None, true, 4_000_000, 4_999_999);
        counts.count(&w, None, true, 4_000_000, 5_000_000);
        assert_eq!(counts.ok_before, 1);
    }
}
