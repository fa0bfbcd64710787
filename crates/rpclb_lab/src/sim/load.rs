//! The load a member's replies report, as a serving node's do (`rpc_load_balancer::LoadReport`):
//! its calls held, its calls finished and failed in the last whole second of virtual time,
//! and its latest utilization sample as its CPU.

use rpc_load_balancer::LoadReport;

use super::{Sim, NS_PER_S};

/// What a member's reply reports, made when the member sends it (kept with the call until
/// it reaches its caller: 16 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Load {
    in_flight: u32,
    qps: u32,
    eps: u32,
    /// CPU %, NaN for none.
    cpu: f32,
}

impl Load {
    /// The report a reply carries: calls in flight for the balancer and on the node are the
    /// same (one balancer, one function per member), no application utilization.
    pub(super) fn report(&self) -> LoadReport {
        let mut report = LoadReport::default();
        report.in_flight = self.in_flight;
        report.node_in_flight = self.in_flight;
        report.qps = self.qps;
        report.eps = self.eps;
        report.cpu = (!self.cpu.is_nan()).then_some(f64::from(self.cpu));
        report
    }
}

/// A member's finished calls per whole second of virtual time: the current second's count
/// and the last whole second's.
#[derive(Debug, Default)]
pub(super) struct Rates {
    /// The current second (virtual time ÷ 1 s).
    second: u64,
    finished: u32,
    failed: u32,
    last_finished: u32,
    last_failed: u32,
}

impl Rates {
    /// Moves to `second`: the counts of the second before it become the last whole
    /// second's (none if that was not the current one).
    fn roll(&mut self, second: u64) {
        if second == self.second {
            return;
        }
        (self.last_finished, self.last_failed) = if second == self.second + 1 {
            (self.finished, self.failed)
        } else {
            (0, 0)
        };
        (self.finished, self.failed) = (0, 0);
        self.second = second;
    }
}

impl Sim<'_> {
    fn second(&self) -> u64 {
        self.now / NS_PER_S as u64
    }

    /// Member `m` finished a call now (served, or `failed` at once), and sends its reply:
    /// the load that reply reports (the call itself no longer counted in flight).
    pub(super) fn finish(&mut self, m: usize, failed: bool) -> Load {
        let second = self.second();
        let member = &mut self.members[m];
        let rates = &mut member.rates;
        rates.roll(second);
        rates.finished = rates.finished.saturating_add(1);
        rates.failed = rates.failed.saturating_add(u32::from(failed));
        let held = member.in_service.len() + member.queue.len();
        Load {
            in_flight: u32::try_from(held).unwrap_or(u32::MAX),
            qps: rates.last_finished,
            eps: rates.last_failed,
            cpu: member.sample.map_or(f32::NAN, |(cpu, _)| cpu as f32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_whole_second_is_reported() {
        let mut rates = Rates::default();
        for _ in 0..3 {
            rates.roll(0);
            rates.finished += 1;
        }
        rates.roll(1);
        assert_eq!((rates.last_finished, rates.finished), (3, 0));
        rates.finished += 1;
        rates.failed += 1;
        rates.roll(3);
        assert_eq!(
            (rates.last_finished, rates.last_failed),
            (0, 0),
            "second 2 was idle"
        );
        let load = Load {
            in_flight: 2,
            qps: 10,
            eps: 1,
            cpu: f32::NAN,
        };
        let report = load.report();
        assert_eq!(
            (
                report.in_flight,
                report.node_in_flight,
                report.qps,
                report.eps
            ),
            (2, 2, 10, 1)
        );
        assert_eq!((report.cpu, report.utilization), (None, None));
    }
}
