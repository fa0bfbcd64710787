//! What happens to members during a run: the timeline's changes (pause, slow, fail, join,
//! leave) and the CPU readings LeastCpu's pollers fetch. (Heartbeats: `heartbeat.rs`.)

use std::time::Duration;

use super::schedule::Change;
use super::{Ev, Sim};

impl Sim<'_> {
    pub(super) fn apply(&mut self, m: u32, change: Change) {
        let mi = m as usize;
        match change {
            Change::Pause => {
                self.members[mi].pauses += 1;
                if self.members[mi].paused_since.is_none() {
                    self.account_busy(mi);
                    self.members[mi].paused_since = Some(self.now);
                    for &call in &self.members[mi].in_service {
                        let c = &mut self.calls[call as usize];
                        c.remaining = c.end.saturating_sub(self.now);
                        c.generation = c.generation.wrapping_add(1);
                    }
                }
            }
            Change::Resume => {
                let member = &mut self.members[mi];
                member.pauses = member.pauses.saturating_sub(1);
                if member.pauses == 0 && member.paused_since.take().is_some() {
                    self.members[mi].busy_last = self.now;
                    let in_service = self.members[mi].in_service.clone();
                    for call in in_service {
                        let c = &mut self.calls[call as usize];
                        c.end = self.now + c.remaining;
                        let generation = c.generation;
                        self.queue.push(c.end, Ev::ServiceDone { call, generation });
                    }
                    self.start_queued(mi);
                    self.answered_again(m);
                }
            }
            Change::Slow(factor) => self.members[mi].slow = factor,
            Change::Fail(fraction) => self.members[mi].fail = fraction,
            Change::Join { warm_factor } => {
                self.members[mi].warm = warm_factor;
                if !self.members[mi].present {
                    self.members[mi].present = true;
                    self.present_changed();
                    if self.subsetting.is_some() {
                        self.resubset();
                    } else {
                        for c in 0..self.callers.len() {
                            self.sync_clock(c as u32);
                            let node = self.members[mi].node.clone();
                            if let Some(kit) = &mut self.callers[c].kit {
                                kit.join([node]);
                            }
                        }
                    }
                    if let Some(home) = &mut self.home {
                        home.join([self.members[mi].node.as_str()]);
                    }
                }
            }
            Change::WarmEnd => self.members[mi].warm = 1.0,
            Change::Leave => {
                if self.members[mi].present {
                    self.members[mi].present = false;
                    self.present_changed();
                    if self.subsetting.is_some() {
                        self.resubset();
                    } else {
                        for c in 0..self.callers.len() {
                            self.sync_clock(c as u32);
                            let node = self.members[mi].node.clone();
                            if let Some(kit) = &mut self.callers[c].kit {
                                kit.leave([node]);
                            }
                        }
                    }
                    if let Some(home) = &mut self.home {
                        home.leave([self.members[mi].node.as_str()]);
                    }
                }
            }
        }
    }

    /// With subsetting, after the members present changed: every caller's subset of them
    /// anew, and its selector's members brought in line (members out of the subset leave,
    /// members new to it join, except those its heartbeat removed: they join when they
    /// answer again).
    fn resubset(&mut self) {
        let Some(subsetting) = self.subsetting else {
            return;
        };
        let callers = self.callers.len();
        for c in 0..callers {
            let new: Vec<u32> = {
                let names: Vec<&str> = self
                    .present
                    .iter()
                    .map(|&m| self.members[m as usize].node.as_str())
                    .collect();
                subsetting
                    .subset(&names, c, callers)
                    .into_iter()
                    .map(|j| self.present[j])
                    .collect()
            };
            let old = std::mem::replace(&mut self.callers[c].subset, new);
            let caller = &self.callers[c];
            let node = |m: &u32| self.members[*m as usize].node.clone();
            let leaving: Vec<String> = old
                .iter()
                .filter(|m| caller.subset.binary_search(m).is_err())
                .map(node)
                .collect();
            let joining: Vec<String> = caller
                .subset
                .iter()
                .filter(|m| old.binary_search(m).is_err() && !caller.removed.contains(m))
                .map(node)
                .collect();
            if leaving.is_empty() && joining.is_empty() {
                continue;
            }
            self.sync_clock(c as u32);
            if let Some(kit) = &mut self.callers[c].kit {
                if !leaving.is_empty() {
                    kit.leave(leaving);
                }
                if !joining.is_empty() {
                    kit.join(joining);
                }
            }
        }
    }

    fn present_changed(&mut self) {
        self.present = (0..self.members.len() as u32)
            .filter(|&m| self.members[m as usize].present)
            .collect();
    }

    /// A member's node samples its utilization since its previous sample (busy ÷ capacity,
    /// %): the reading its replies carry and LeastCpu's pollers fetch. On a cold start the
    /// node's sampler starts at its first sample, which it withholds (as the real sampler
    /// does); otherwise the node has run for long and its first sample covers the run so far.
    pub(super) fn sample(&mut self, m: u32) {
        let mi = m as usize;
        self.account_busy(mi);
        let now = self.now;
        let cold_start = self.cold_start;
        let member = &mut self.members[mi];
        let busy = member.busy_area - member.area_at_sample;
        member.area_at_sample = member.busy_area;
        let from = member.sampled_at.replace(now);
        if from.is_some() || !cold_start {
            let span = now - from.unwrap_or(0);
            let utilization = busy as f64 / (span.max(1) as f64 * member.capacity as f64) * 100.0;
            member.sample = Some((utilization.min(100.0), now));
        }
        if self.running() {
            self.queue
                .push(self.now + self.cpu_sample_ns, Ev::Sample(m));
        }
    }

    /// A caller's poller fetches the latest reading of every member that answers.
    pub(super) fn poll(&mut self, caller: u32) {
        let Some((interval, _)) = self.polling else {
            return;
        };
        self.sync_clock(caller);
        let now = self.now;
        let c = &mut self.callers[caller as usize];
        let subsetting = self.subsetting.is_some();
        if let Some(kit) = &mut c.kit {
            for (m, member) in self.members.iter().enumerate() {
                if !member.present || member.paused_since.is_some() {
                    continue;
                }
                // A poller polls its balancer's members: with subsetting, its subset's.
                if subsetting && c.subset.binary_search(&(m as u32)).is_err() {
                    continue;
                }
                if let Some((utilization, at)) = member.sample {
                    kit.set_cpu(&member.node, utilization, Duration::from_nanos(now - at));
                }
            }
        }
        if self.running() {
            self.queue.push(self.now + interval, Ev::Poll(caller));
        }
    }
}
