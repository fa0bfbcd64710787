//! Retries of idempotent calls under each caller's retry budget (a scenario's `[retries]`,
//! issue 22), as the library's balancer makes them: a call failed by its member with a
//! failure of the retryable kind goes to a member it has not tried, within its first
//! deadline, while the caller's budget (`rpc_load_balancer::testkit::RetryBudgetKit`, the
//! library's account) allows; every call deposits into its caller's budget when issued.
//!
//! A retried call keeps its slot, its issue time (so its deadline, and its place among the
//! open calls) and its window; its failed attempt is reported to the caller's selector as
//! the failure it was, and the new attempt is picked, counted and sent as a new call is.

use std::time::Duration;

use rpc_load_balancer::routing::OutcomeKind;
use rpc_load_balancer::ErrorCode;

use super::{member_index, Ev, Sim, Stage};

impl Sim<'_> {
    /// A call issued now by `caller`: deposits into its budget.
    pub(super) fn deposit(&mut self, caller: u32) {
        if let Some(budget) = self.budgets.get(caller as usize) {
            budget.deposit(Duration::from_nanos(self.now));
        }
    }

    /// `call`'s member failed it (its failure reply reached the caller now): sends it again
    /// to another member if it may be. Returns whether it did (the call is then on its way
    /// to its new member, still open for its caller).
    pub(super) fn retry(&mut self, call: u32) -> bool {
        if self.budgets.is_empty() || !self.fail_retryable {
            return false;
        }
        let c = &self.calls[call as usize];
        let (caller, member, in_window) = (c.caller, c.member, c.in_window);
        // Within its first deadline only (a timeout at this instant comes first).
        if self.now >= c.issued + self.timeout_ns {
            return false;
        }
        let tried = self.tried.entry(call).or_default();
        tried.push(member);
        if tried.len() > self.budgets[caller as usize].max_per_call() as usize {
            return false;
        }
        let exclude: Vec<String> = tried
            .iter()
            .map(|&m| self.members[m as usize].node.clone())
            .collect();
        self.sync_clock(caller);
        let budget = &self.budgets[caller as usize];
        let Some(kit) = self.callers[caller as usize].kit.as_ref() else {
            return false;
        };
        let exclude: Vec<&str> = exclude.iter().map(String::as_str).collect();
        // Nobody else to take it: the failure is the call's.
        let Ok(next) = kit.pick_excluding(&exclude, None) else {
            return false;
        };
        if !budget.withdraw(Duration::from_nanos(self.now)) {
            kit.release(next);
            self.refused_in_window += u64::from(in_window);
            return false;
        }
        // The failed attempt's outcome, to the caller's selector.
        let c = &mut self.calls[call as usize];
        let report = c.load.report();
        if let Some(failed) = c.picked.take() {
            let latency = Duration::from_nanos(self.now - c.issued);
            let kind = OutcomeKind::Error(ErrorCode::ServiceUnavailable);
            kit.complete_with_report(failed, latency, kind, &report);
        }
        let to = member_index(next.node());
        let c = &mut self.calls[call as usize];
        c.picked = Some(next);
        c.member = to;
        c.failed = false;
        c.stage = Stage::ToMember;
        c.load = Default::default();
        self.simulated_calls += 1;
        self.retries_in_window += u64::from(in_window);
        self.count_pick(to, caller);
        self.queue
            .push_in_order(self.now + self.delay_ns, Ev::AtMember(call));
        true
    }
}
