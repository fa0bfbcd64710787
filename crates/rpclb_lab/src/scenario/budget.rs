//! What one run may cost: bounds on the calls a run simulates and on the slots its members
//! serve in, checked before it starts (with [`Scenario::validate`]) so that an enormous
//! scenario is refused at once, naming the field, instead of growing for minutes.
//!
//! Memory: a run holds its calls in flight (a call its caller gave up on is cancelled and
//! leaves its member a network delay later); the simulator stops a run that holds more than
//! [`crate::MAX_CALLS_HELD`] as overloaded (calls arriving faster than one timeout's worth
//! fits). The slots bound keeps a healthy run well below that: in steady state a run holds
//! at most about its slots plus the calls on the network.
//! CPU: the simulated calls bound keeps one run to minutes, and so does the bound on CPU
//! samples (members × run length ÷ `cpu_sample_interval_ms`).

use super::{Action, LoadPoint, Scenario};

/// Most calls one run may simulate (warm-up included), as estimated by
/// [`Scenario::estimated_calls`]: 200 million, a few minutes of one core.
pub const MAX_RUN_CALLS: f64 = 200_000_000.0;

/// Most slots (calls served at once, summed over the members) a scenario may have.
pub const MAX_SLOTS: u64 = 1_000_000;

impl Scenario {
    /// Calls served at once by every member together (each member's `capacity`, or the
    /// scenario's), members that join later included.
    pub fn slots(&self) -> u64 {
        (0..self.members)
            .map(|i| {
                let own = self.member.iter().find(|m| m.index == i);
                u64::from(own.and_then(|m| m.capacity).unwrap_or(self.capacity))
            })
            .sum()
    }

    /// The calls one run of `load` simulates, estimated (warm-up and measured time): open
    /// loop, its rate × the run's length; closed loop, `min(tasks, slots)` calls at a time,
    /// each taking the network delay both ways plus the mean service time × the smallest
    /// slow factor of the scenario, or the timeout if that is shorter, and the tasks beyond
    /// the slots each a call per timeout at most (a failing member's quick errors can make
    /// more: the simulator then stops at [`MAX_RUN_CALLS`] × 2 with an error).
    pub fn estimated_calls(&self, load: LoadPoint) -> f64 {
        let length_s = self.warmup_s + self.measure_s;
        match load {
            LoadPoint::Open { fraction } => fraction * self.uniform_capacity_per_s() * length_s,
            LoadPoint::Closed { tasks } => {
                let fastest = self
                    .member
                    .iter()
                    .filter_map(|m| m.slow_factor)
                    .chain(
                        self.event
                            .iter()
                            .filter(|e| matches!(e.action, Action::Slow | Action::Join))
                            .filter_map(|e| e.factor),
                    )
                    .fold(1.0f64, f64::min);
                let call_s = (2.0 * self.network_delay_us / 1e6
                    + self.service.mean_ms() / 1e3 * fastest)
                    .max(1e-9);
                // A call ends for its task at its timeout at the latest (and is cancelled).
                let timeout_s = (self.timeout_ms / 1e3).max(1e-12);
                let at_once = (tasks as u64).min(self.slots()) as f64;
                let waiting = tasks as f64 - at_once;
                (at_once / call_s.min(timeout_s) + waiting / timeout_s) * length_s
            }
        }
    }
}
