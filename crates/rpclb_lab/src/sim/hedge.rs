//! Hedged calls (a scenario's `[hedging]`, issue 22), as the library's balancer makes them,
//! with its own decisions (`rpc_load_balancer::testkit::HedgeKit`, one per caller): every call
//! deposits into its caller's hedge budget when sent; if it has no reply when its second copy
//! is due (the set delay, or the caller's recent latency percentile), the copy is picked by
//! the caller's selector excluding the first copy's member, as the budget allows, and sent.
//! The first reply wins: the call ends for its caller with it (the winner's latency and load
//! report go to the selector), and the other copy is cancelled — its pick released as
//! cancelled, and a cancel sent to its member, which drops it from its queue or service when
//! the cancel arrives a network delay later (the model's assumption: a cancelled call on a
//! real node stops its handler at once, as the library's `ControlRequest::Cancel` does for a
//! handler that awaits).
//!
//! Simplifications (stated): a copy that fails does not wait for the other — a failed first
//! copy ends its call with the failure and cancels the second, a failed second copy is
//! dropped and the first runs on (the library waits for the other copy in both cases); the
//! scenarios hedging is measured in have no failures. Hedging and `[retries]` are not
//! modelled together. The heartbeat fails first copies only.

use std::time::Duration;

use rpc_load_balancer::routing::OutcomeKind;
use rpc_load_balancer::ErrorCode;

use super::{member_index, Call, Ev, Sim, Stage, NIL, NO_TASK};

impl Sim<'_> {
    /// Call `call` (a first copy, just sent) deposits into its caller's hedge budget, and its
    /// second copy is scheduled if one is due before its deadline.
    pub(super) fn schedule_hedge(&mut self, call: u32) {
        let c = &self.calls[call as usize];
        let (caller, issued) = (c.caller, c.issued);
        let Some(kit) = self.hedges.get(caller as usize) else {
            return;
        };
        kit.deposit(Duration::from_nanos(self.now));
        let Some(delay) = kit.delay() else {
            return;
        };
        let delay = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX).max(1);
        let at = issued.saturating_add(delay);
        if at >= issued.saturating_add(self.timeout_ns) {
            return;
        }
        self.calls[call as usize].hedge_at = at;
        self.queue.push(at, Ev::Hedge { call, at });
    }

    /// The second copy of `call` is due now (`at`): sends it to another member, as the
    /// caller's budget allows, if the call is still waiting for its first copy.
    pub(super) fn hedge(&mut self, call: u32, at: u64) {
        let c = &self.calls[call as usize];
        if c.hedge_at != at || c.copy || c.caller_done || c.twin != NIL {
            return;
        }
        let (caller, member, in_window) = (c.caller, c.member, c.in_window);
        self.sync_clock(caller);
        let Some(kit) = self.callers[caller as usize].kit.as_ref() else {
            return;
        };
        let first = self.members[member as usize].node.as_str();
        // In the library's order: nobody else, then the budget, then the pick (so a hedge the
        // budget refuses moves no selector state).
        if kit.nodes().iter().all(|node| node == first) {
            return;
        }
        let now = Duration::from_nanos(self.now);
        if !self.hedges[caller as usize].withdraw(now) {
            self.hedges_refused_in_window += u64::from(in_window);
            return;
        }
        let Ok(next) = kit.pick_excluding(&[first], None) else {
            self.hedges[caller as usize].refund(now);
            return;
        };
        let to = member_index(next.node());
        let copy = Call {
            caller,
            member: to,
            task: NO_TASK,
            issued: self.now,
            older: NIL,
            newer: NIL,
            picked: Some(next),
            caller_done: false,
            in_window,
            failed: false,
            stage: Stage::ToMember,
            cancel_sent: false,
            cancel_seen: false,
            generation: 0,
            end: 0,
            remaining: 0,
            load: Default::default(),
            copy: true,
            twin: call,
            hedge_at: 0,
        };
        let id = self.hold(copy);
        self.calls[call as usize].twin = id;
        self.simulated_calls += 1;
        self.hedged_in_window += u64::from(in_window);
        self.count_pick(to, caller);
        self.queue
            .push_in_order(self.now + self.delay_ns, Ev::AtMember(id));
    }

    /// A second copy's reply reaches its caller.
    pub(super) fn copy_reply(&mut self, copy: u32) {
        let d = &mut self.calls[copy as usize];
        if d.caller_done {
            // It lost: its call ended, and cancelled it (the cancel frees the slot if it
            // has not reached the member yet).
            d.stage = Stage::Done;
            if !d.cancel_sent || d.cancel_seen {
                self.free.push(copy);
            }
            return;
        }
        d.caller_done = true;
        d.stage = Stage::Done;
        let (caller, call, failed, in_window) = (d.caller, d.twin, d.failed, d.in_window);
        let latency = Duration::from_nanos(self.now - d.issued);
        let report = d.load.report();
        let picked = d.picked.take();
        self.free.push(copy);
        self.calls[call as usize].twin = NIL;
        self.sync_clock(caller);
        let kind = if failed {
            OutcomeKind::Error(ErrorCode::ServiceUnavailable)
        } else {
            OutcomeKind::Ok
        };
        if let (Some(picked), Some(kit)) = (picked, &self.callers[caller as usize].kit) {
            kit.complete_with_report(picked, latency, kind, &report);
        }
        if failed {
            // The first copy runs on.
            return;
        }
        // It won: the first copy is cancelled, and the call ends with this reply.
        self.hedges_won_in_window += u64::from(in_window);
        let first = &mut self.calls[call as usize];
        let (first_issued, first_picked) = (first.issued, first.picked.take());
        first.cancel_sent = true;
        if let (Some(picked), Some(kit)) = (first_picked, &self.callers[caller as usize].kit) {
            let latency = Duration::from_nanos(self.now - first_issued);
            kit.complete(picked, latency, OutcomeKind::Cancelled);
        }
        self.queue
            .push_in_order(self.now + self.delay_ns, Ev::Cancel(call));
        self.end_call(call, OutcomeKind::Ok, Some(&report));
    }

    /// The call of second copy `copy` ended without it (its first copy replied, or the call
    /// timed out or failed): its pick is released as cancelled and its member is sent a
    /// cancel, unless its reply already came.
    pub(super) fn drop_copy(&mut self, copy: u32) {
        let d = &mut self.calls[copy as usize];
        if d.caller_done {
            return;
        }
        d.caller_done = true;
        d.twin = NIL;
        let (caller, issued, picked) = (d.caller, d.issued, d.picked.take());
        d.cancel_sent = true;
        self.sync_clock(caller);
        if let (Some(picked), Some(kit)) = (picked, &self.callers[caller as usize].kit) {
            let latency = Duration::from_nanos(self.now - issued);
            kit.complete(picked, latency, OutcomeKind::Cancelled);
        }
        self.queue
            .push_in_order(self.now + self.delay_ns, Ev::Cancel(copy));
    }
}
