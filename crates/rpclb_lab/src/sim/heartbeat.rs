//! The callers' heartbeats, as a node runs them (`node/heartbeat.rs` of the library): every
//! interval a caller pings each member it has no ping pending to. A member answers at once
//! unless it is paused; a ping unanswered for the heartbeat timeout stops that caller's
//! session to the member: the member leaves the caller's members and the caller's calls in
//! flight to it fail at once (`ServiceUnavailable`). When the member resumes, it answers the
//! pings waiting on it, and a caller that removed it gets it back at once (the redial,
//! pending while the member was paused, completes).
//!
//! So a paused member is removed between one timeout and one timeout plus one interval after
//! its pause, from the first round that finds it paused; a member that resumes before its
//! ping times out is never removed. (A ping sent within the network's round trip before a
//! pause is taken as answered.)

use rpc_load_balancer::routing::OutcomeKind;
use rpc_load_balancer::ErrorCode;

use super::{Ev, Sim, NIL};

impl Sim<'_> {
    /// A caller's heartbeat round: a ping to each watched member that is paused and has none
    /// pending (the others answer at once).
    pub(super) fn heartbeat_round(&mut self, caller: u32) {
        let Some((interval, timeout)) = self.heartbeat else {
            return;
        };
        for i in 0..self.watched.len() {
            let m = self.watched[i];
            let member = &self.members[m as usize];
            // With subsetting, the caller has sessions to its subset's members only.
            if !member.present || member.paused_since.is_none() || !self.dials(caller, m) {
                continue;
            }
            let c = &mut self.callers[caller as usize];
            if c.removed.contains(&m) || c.pinging.iter().any(|&(p, _)| p == m) {
                continue;
            }
            c.pinging.push((m, self.now));
            self.queue
                .push(self.now + timeout, Ev::PingTimeout { caller, member: m });
        }
        if self.running() {
            self.queue.push(self.now + interval, Ev::Heartbeat(caller));
        }
    }

    /// `caller`'s ping to `member`, sent one timeout ago, is still unanswered (unless the
    /// member answered it when it resumed): the caller stops its session to the member.
    pub(super) fn ping_timeout(&mut self, caller: u32, member: u32) {
        let Some((_, timeout)) = self.heartbeat else {
            return;
        };
        let sent = self.now - timeout;
        let c = &mut self.callers[caller as usize];
        let Some(i) = c.pinging.iter().position(|&p| p == (member, sent)) else {
            return;
        };
        c.pinging.swap_remove(i);
        // Gone, already removed, or out of the caller's subset since the ping: no session
        // to stop.
        if !self.members[member as usize].present
            || c.removed.contains(&member)
            || !self.dials(caller, member)
        {
            return;
        }
        self.callers[caller as usize].removed.push(member);
        let node = self.members[member as usize].node.clone();
        self.sync_clock(caller);
        if let Some(kit) = &mut self.callers[caller as usize].kit {
            kit.leave([node]);
        }
        // The session's calls in flight fail at once.
        let mut failed = Vec::new();
        let mut call = self.open_oldest;
        while call != NIL {
            let c = &self.calls[call as usize];
            if c.caller == caller && c.member == member {
                failed.push(call);
            }
            call = c.newer;
        }
        for call in failed {
            self.end_call(
                call,
                OutcomeKind::Error(ErrorCode::ServiceUnavailable),
                None,
            );
        }
    }

    /// `member` resumed: it answers the pings waiting on it, and the callers that removed it
    /// get it back.
    pub(super) fn answered_again(&mut self, member: u32) {
        let present = self.members[member as usize].present;
        for caller in 0..self.callers.len() as u32 {
            let c = &mut self.callers[caller as usize];
            c.pinging.retain(|&(p, _)| p != member);
            let Some(i) = c.removed.iter().position(|&r| r == member) else {
                continue;
            };
            c.removed.swap_remove(i);
            if present && self.dials(caller, member) {
                let node = self.members[member as usize].node.clone();
                self.sync_clock(caller);
                if let Some(kit) = &mut self.callers[caller as usize].kit {
                    kit.join([node]);
                }
            }
        }
    }
}
