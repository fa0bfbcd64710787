//! The event loop: the next event or timeout in time order, handed to what it concerns.

use std::time::Duration;

use rpc_load_balancer::routing::OutcomeKind;

use super::{Ev, Sim, NO_TASK};

impl Sim<'_> {
    pub(super) fn next_gap(&mut self) -> u64 {
        (libm::round(self.arrivals.exponential(self.interarrival_ns)) as u64).max(1)
    }

    pub(super) fn running(&self) -> bool {
        self.now < self.window_end
    }

    pub(super) fn run(&mut self) {
        loop {
            let next_timeout = self.next_timeout();
            let next_event = self.queue.next_time();
            let timeout_first = match (next_timeout, next_event) {
                (Some((t, _)), Some(e)) => t <= e,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if timeout_first {
                let (at, call) = next_timeout.expect("a timeout");
                self.now = at;
                self.end_call(call, OutcomeKind::Timeout, None);
            } else {
                let (at, event) = self.queue.pop().expect("an event");
                self.now = at;
                self.handle(event);
            }
            if self.overflow
                || self.simulated_calls >= super::MAX_SIMULATED_CALLS
                || (!self.running() && self.in_flight == 0)
            {
                break;
            }
        }
        self.account_in_flight();
    }

    fn handle(&mut self, event: Ev) {
        match event {
            Ev::Arrival(caller) => {
                if self.running() {
                    self.issue(caller, NO_TASK);
                    let gap = self.next_gap();
                    self.queue.push(self.now + gap, Ev::Arrival(caller));
                }
            }
            Ev::Issue { caller, task } => {
                if self.running() {
                    self.issue(caller, task);
                }
            }
            Ev::AtMember(call) => self.at_member(call),
            Ev::ServiceDone { call, generation } => {
                if self.calls[call as usize].generation == generation {
                    self.service_done(call);
                }
            }
            Ev::Reply(call) => self.reply(call),
            Ev::Cancel(call) => self.cancel(call),
            Ev::Timeline(i) => {
                let (_, change, member) = self.timeline[i as usize];
                self.apply(member, change);
            }
            Ev::Heartbeat(caller) => self.heartbeat_round(caller),
            Ev::PingTimeout { caller, member } => self.ping_timeout(caller, member),
            Ev::Sample(member) => self.sample(member),
            Ev::Poll(caller) => self.poll(caller),
            Ev::Hedge { call, at } => self.hedge(call, at),
        }
    }

    /// Moves a caller's selector clock to now.
    pub(super) fn sync_clock(&mut self, caller: u32) {
        let c = &mut self.callers[caller as usize];
        if let Some(kit) = &c.kit {
            if self.now > c.kit_time {
                kit.clock()
                    .advance(Duration::from_nanos(self.now - c.kit_time));
                c.kit_time = self.now;
            }
        }
    }
}
