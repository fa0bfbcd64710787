//! A call's life: picked by its caller, queued and served by its member, replied to, or
//! timed out and cancelled; its outcome is fed back to the caller's selector.

use std::time::Duration;

use rpc_load_balancer::routing::OutcomeKind;
use rpc_load_balancer::{ErrorCode, LoadReport};

use super::{member_index, Call, Ev, Sim, Stage, NIL, NO_MEMBER_BACKOFF_NS, NO_TASK, NS_PER_MS};
use crate::scenario::Service;

impl Sim<'_> {
    pub(super) fn issue(&mut self, caller: u32, task: u32) {
        self.simulated_calls += 1;
        self.deposit(caller);
        let key = self
            .zipf
            .as_ref()
            .map(|z| z.draw(&mut self.keys).to_le_bytes());
        let in_window = self.now >= self.window_start;
        let chosen = if self.local {
            // The caller's own member: the `caller`-th present one.
            let present = &self.present;
            present
                .get(caller as usize % present.len().max(1))
                .map(|&m| (m, None))
        } else {
            self.sync_clock(caller);
            let kit = self.callers[caller as usize]
                .kit
                .as_ref()
                .expect("a selector");
            kit.pick(key.as_ref().map(|k| k.as_slice()))
                .ok()
                .map(|picked| (member_index(picked.node()), Some(picked)))
        };
        let Some((member, picked)) = chosen else {
            // No member to pick: an error at once.
            if in_window {
                self.calls_in_window += 1;
                self.errors += 1;
                let _ = self.histogram.record(1_000);
            }
            if task != NO_TASK {
                self.queue
                    .push(self.now + NO_MEMBER_BACKOFF_NS, Ev::Issue { caller, task });
            }
            return;
        };
        debug_assert!(
            self.local || self.dials(caller, member),
            "caller {caller} picked member {member}, outside its subset"
        );
        self.count_pick(member, caller);
        if in_window {
            if let (Some(key), Some(home)) = (&key, &self.home) {
                self.keyed_calls += 1;
                if let Ok(pick) = home.pick(Some(key)) {
                    self.moved_from_home += u64::from(member_index(pick.node()) != member);
                    home.release(pick);
                }
            }
        }
        self.account_in_flight();
        self.in_flight += 1;
        if in_window {
            self.calls_in_window += 1;
            self.open_in_window += 1;
        }
        let call = Call {
            caller,
            member,
            task,
            issued: self.now,
            older: NIL,
            newer: NIL,
            picked,
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
            copy: false,
            twin: NIL,
            hedge_at: 0,
        };
        let id = self.hold(call);
        self.open(id);
        self.queue
            .push_in_order(self.now + self.delay_ns, Ev::AtMember(id));
        self.schedule_hedge(id);
    }

    /// A slot for `call`: a free one, or a new one.
    pub(super) fn hold(&mut self, call: Call) -> u32 {
        match self.free.pop() {
            Some(id) => {
                // A new generation: a stale `ServiceDone` of the slot's last call is ignored.
                let generation = self.calls[id as usize].generation.wrapping_add(1);
                self.calls[id as usize] = Call { generation, ..call };
                id
            }
            None => {
                if self.calls.len() >= self.limit {
                    self.overflow = true;
                }
                self.calls.push(call);
                (self.calls.len() - 1) as u32
            }
        }
    }

    pub(super) fn at_member(&mut self, call: u32) {
        let m = self.calls[call as usize].member as usize;
        self.account_held(m, true);
        let member = &self.members[m];
        if member.paused_since.is_some() || member.in_service.len() >= member.capacity {
            self.calls[call as usize].stage = Stage::Queued;
            self.members[m].queue.push_back(call);
        } else {
            self.start(call);
        }
    }

    pub(super) fn account_busy(&mut self, m: usize) {
        let member = &mut self.members[m];
        if member.paused_since.is_none() {
            let span = self.now - member.busy_last;
            member.busy_area += member.in_service.len() as u128 * u128::from(span);
        }
        member.busy_last = self.now;
    }

    /// Starts serving `call` on its member (which has room), or fails it at once.
    fn start(&mut self, call: u32) {
        let m = self.calls[call as usize].member as usize;
        if self.faults.chance(self.members[m].fail) {
            self.account_held(m, false);
            self.calls[call as usize].load = self.finish(m, true);
            self.calls[call as usize].failed = true;
            self.calls[call as usize].stage = Stage::Replying;
            self.queue
                .push_in_order(self.now + self.delay_ns, Ev::Reply(call));
            return;
        }
        let s = self.scenario;
        let mut ms = match s.service {
            Service::Lognormal { median_ms, sigma } => self.service.lognormal(median_ms, sigma),
            Service::Exponential { mean_ms } => self.service.exponential(mean_ms),
        };
        if let Some(stragglers) = s.stragglers {
            if self.service.chance(stragglers.fraction) {
                ms *= stragglers.factor;
            }
        }
        let member = &self.members[m];
        ms *= member.base_factor * member.slow * member.warm;
        let service_ns = (libm::round(ms * NS_PER_MS) as u64).max(1);
        self.account_busy(m);
        self.members[m].in_service.push(call);
        let c = &mut self.calls[call as usize];
        c.stage = Stage::Serving;
        c.end = self.now + service_ns;
        let generation = c.generation;
        self.queue.push(c.end, Ev::ServiceDone { call, generation });
    }

    pub(super) fn service_done(&mut self, call: u32) {
        let m = self.calls[call as usize].member as usize;
        self.account_busy(m);
        self.account_held(m, false);
        let member = &mut self.members[m];
        if let Some(i) = member.in_service.iter().position(|&c| c == call) {
            member.in_service.swap_remove(i);
        }
        self.calls[call as usize].load = self.finish(m, false);
        self.calls[call as usize].stage = Stage::Replying;
        self.queue
            .push_in_order(self.now + self.delay_ns, Ev::Reply(call));
        self.start_queued(m);
    }

    /// Starts queued calls while the member has room and is not paused.
    pub(super) fn start_queued(&mut self, m: usize) {
        loop {
            let member = &mut self.members[m];
            if member.paused_since.is_some() || member.in_service.len() >= member.capacity {
                return;
            }
            let Some(next) = member.queue.pop_front() else {
                return;
            };
            self.start(next);
        }
    }

    pub(super) fn reply(&mut self, call: u32) {
        let c = &self.calls[call as usize];
        if c.copy {
            self.copy_reply(call);
            return;
        }
        if !c.caller_done && c.failed && self.retry(call) {
            return;
        }
        let c = &mut self.calls[call as usize];
        c.stage = Stage::Done;
        if !c.caller_done {
            let kind = if c.failed {
                OutcomeKind::Error(ErrorCode::ServiceUnavailable)
            } else {
                OutcomeKind::Ok
            };
            let report = c.load.report();
            self.end_call(call, kind, Some(&report));
        }
        let c = &self.calls[call as usize];
        if !c.cancel_sent || c.cancel_seen {
            self.free.push(call);
        }
    }

    /// A timed-out call's cancel reaches its member, which drops the call if it still holds
    /// it: out of its queue, or stopped in service (its slot goes to the next queued call).
    pub(super) fn cancel(&mut self, call: u32) {
        let c = &mut self.calls[call as usize];
        c.cancel_seen = true;
        let m = c.member as usize;
        match c.stage {
            // The request went first on the same path.
            Stage::ToMember => debug_assert!(false, "a cancel overtook its call"),
            // The reply on its way frees the slot.
            Stage::Replying => {}
            Stage::Done => self.free.push(call),
            Stage::Queued => {
                c.stage = Stage::Done;
                self.account_held(m, false);
                // Calls time out in issue order, so it is at or near the queue's front.
                let queue = &mut self.members[m].queue;
                if let Some(i) = queue.iter().position(|&q| q == call) {
                    queue.remove(i);
                }
                self.free.push(call);
            }
            Stage::Serving => {
                c.stage = Stage::Done;
                c.generation = c.generation.wrapping_add(1);
                self.account_busy(m);
                self.account_held(m, false);
                let member = &mut self.members[m];
                if let Some(i) = member.in_service.iter().position(|&s| s == call) {
                    member.in_service.swap_remove(i);
                }
                self.free.push(call);
                self.start_queued(m);
            }
        }
    }

    /// The call ends for its caller, with the load report of the reply that ended it (none
    /// for a timeout or a failed session).
    pub(super) fn end_call(&mut self, call: u32, kind: OutcomeKind, report: Option<&LoadReport>) {
        let now = self.now;
        let twin = std::mem::replace(&mut self.calls[call as usize].twin, NIL);
        if twin != NIL {
            // Its second copy is still running: the call's end cancels it.
            self.drop_copy(twin);
        }
        let c = &mut self.calls[call as usize];
        c.caller_done = true;
        let (caller, task, in_window) = (c.caller, c.task, c.in_window);
        let latency = now - c.issued;
        let picked = c.picked.take();
        if kind == OutcomeKind::Timeout {
            // The caller cancels the call (the library's serving node then drops it).
            c.cancel_sent = true;
            self.queue
                .push_in_order(now + self.delay_ns, Ev::Cancel(call));
        }
        self.close(call);
        if !self.tried.is_empty() {
            self.tried.remove(&call);
        }
        self.account_in_flight();
        self.in_flight -= 1;
        self.run_latency_ns += u128::from(latency);
        if kind == OutcomeKind::Ok {
            if let Some(fault) = &mut self.fault {
                fault.count_reply(now);
            }
            // The latency hedging's percentile follows: the winning copy's, from the call's
            // first send, as the library records it.
            if let Some(hedges) = self.hedges.get(caller as usize) {
                hedges.record(Duration::from_nanos(latency));
            }
        }
        if in_window {
            self.open_in_window -= 1;
            self.latency_sum_ns += u128::from(latency);
            let _ = self.histogram.record(latency.max(1_000));
            match kind {
                OutcomeKind::Ok => self.ok += 1,
                OutcomeKind::Timeout => {
                    self.errors += 1;
                    self.timeouts_seen += 1;
                }
                _ => self.errors += 1,
            }
        }
        if let Some(picked) = picked {
            self.sync_clock(caller);
            if let Some(kit) = &self.callers[caller as usize].kit {
                let latency = Duration::from_nanos(latency);
                match report {
                    Some(report) => kit.complete_with_report(picked, latency, kind, report),
                    None => kit.complete(picked, latency, kind),
                }
            }
        }
        if task != NO_TASK && self.running() {
            self.issue(caller, task);
        }
    }
}
