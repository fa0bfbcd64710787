//! A run's measurements: picks and calls in flight counted as the run goes, and turned into
//! its [`RunReport`] at the end.

use super::{RunSpec, Sim, BUCKET_NS, NS_PER_MS, NS_PER_S, SHED_WINDOW_NS};
use crate::report::{
    HedgeCounts, Latency, Little, RetryCounts, RunReport, ShareOverTime, QUANTILES,
};

impl Sim<'_> {
    pub(super) fn account_in_flight(&mut self) {
        let clamp = |t: u64| t.clamp(self.window_start, self.window_end);
        let span = clamp(self.now) - clamp(self.in_flight_last);
        self.in_flight_area += u128::from(self.in_flight) * u128::from(span);
        self.run_area += u128::from(self.in_flight) * u128::from(self.now - self.in_flight_last);
        self.in_flight_last = self.now;
    }

    /// A call reaches member `m` (`arrives`) or leaves it (served, failed, or dropped on a
    /// cancel): its held calls change by one, their time-integral over the window accounted
    /// first.
    pub(super) fn account_held(&mut self, m: usize, arrives: bool) {
        let (start, end) = (self.window_start, self.window_end);
        let clamp = |t: u64| t.clamp(start, end);
        let member = &mut self.members[m];
        let span = clamp(self.now) - clamp(member.held_last);
        member.held_area += u128::from(member.held) * u128::from(span);
        member.held_last = self.now;
        if arrives {
            member.held += 1;
        } else {
            member.held = member.held.saturating_sub(1);
        }
    }

    pub(super) fn count_pick(&mut self, member: u32, caller: u32) {
        let m = member as usize;
        if self.now >= self.window_start && self.now < self.window_end {
            self.picks[m] += 1;
            if let Some(buckets) = &mut self.buckets {
                let b = ((self.now - self.window_start) / BUCKET_NS) as usize;
                if let Some(bucket) = buckets.get_mut(b) {
                    bucket[m] += 1;
                }
            }
        }
        if let Some(fault) = &mut self.fault {
            fault.count_caller_pick(caller, member, self.now);
            if self.now >= fault.start && self.now < fault.end {
                let w = ((self.now - fault.start) / SHED_WINDOW_NS) as usize;
                if let Some(window) = fault.windows.get_mut(w) {
                    window.0 += 1;
                    window.1 += u64::from(member == fault.member);
                }
            }
        }
    }

    pub(super) fn report(&self, spec: &RunSpec<'_>) -> RunReport {
        let s = self.scenario;
        // An overloaded run stopped early: its window is the part measured before the stop.
        let window_end = if self.overflow {
            self.now.clamp(self.window_start, self.window_end)
        } else {
            self.window_end
        };
        let window_s = (window_end - self.window_start) as f64 / NS_PER_S;
        let ms = |v: u64| v as f64 / NS_PER_MS;
        let h = &self.histogram;
        let finished = self.ok + self.errors;
        let latency_ms = if h.is_empty() {
            None
        } else {
            Some(Latency {
                p50: ms(h.value_at_quantile(0.5)),
                p99: ms(h.value_at_quantile(0.99)),
                p999: ms(h.value_at_quantile(0.999)),
                mean: if finished == 0 {
                    0.0
                } else {
                    self.latency_sum_ns as f64 / finished as f64 / NS_PER_MS
                },
                max: ms(h.max()),
            })
        };
        let total_picks: u64 = self.picks.iter().sum();
        let share = |count: u64, total: u64| {
            if total == 0 {
                0.0
            } else {
                count as f64 / total as f64
            }
        };
        let shares = self.picks.iter().map(|&p| share(p, total_picks)).collect();
        let window_ns = (window_end - self.window_start) as f64;
        let member_in_flight = if window_ns > 0.0 {
            let clamp = |t: u64| t.clamp(self.window_start, window_end);
            self.members
                .iter()
                .map(|m| {
                    let tail = u128::from(m.held) * u128::from(window_end - clamp(m.held_last));
                    (m.held_area + tail) as f64 / window_ns
                })
                .collect()
        } else {
            Vec::new()
        };
        let share_over_time = self.buckets.as_ref().map(|buckets| ShareOverTime {
            bucket_s: BUCKET_NS as f64 / NS_PER_S,
            shares: buckets
                .iter()
                .map(|b| {
                    let total: u64 = b.iter().sum();
                    b.iter().map(|&p| share(p, total)).collect()
                })
                .collect(),
        });
        let per_s = |count: u64| {
            if window_s > 0.0 {
                count as f64 / window_s
            } else {
                0.0
            }
        };
        let arrival_rate = per_s(self.calls_in_window);
        let mean_latency_s = if finished == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / finished as f64 / NS_PER_S
        };
        let mean_in_flight = if window_s > 0.0 {
            self.in_flight_area as f64 / (window_s * NS_PER_S)
        } else {
            0.0
        };
        let relative_error = if mean_in_flight > 0.0 {
            (mean_in_flight - arrival_rate * mean_latency_s).abs() / mean_in_flight
        } else {
            0.0
        };
        let run_error = if self.run_area > 0 {
            self.run_area.abs_diff(self.run_latency_ns) as f64 / self.run_area as f64
        } else {
            0.0
        };
        RunReport {
            scenario: s.name.clone(),
            load: spec.load.label(),
            algorithm: spec.algorithm.name().to_string(),
            seed: spec.seed,
            calls: self.calls_in_window,
            ok: self.ok,
            errors: self.errors,
            timeouts: self.timeouts_seen,
            error_rate: share(self.errors, self.calls_in_window),
            goodput_per_s: per_s(self.ok),
            latency_ms,
            latency_quantiles_ms: if h.is_empty() {
                Vec::new()
            } else {
                QUANTILES
                    .iter()
                    .map(|&q| [q, ms(h.value_at_quantile(q))])
                    .collect()
            },
            shares,
            share_over_time,
            faulty_member: self.fault.as_ref().map(|f| f.member as usize),
            shed_ms: if self.overflow {
                None
            } else {
                self.fault.as_ref().and_then(|f| f.shed_ms())
            },
            fault_goodput_ratio: if self.overflow {
                None
            } else {
                self.fault.as_ref().and_then(|f| f.goodput_ratio())
            },
            faulty_picks_per_caller: self.fault.as_ref().map(|f| f.most_picks_by_a_caller()),
            last_faulty_pick_ms: self.fault.as_ref().and_then(|f| f.last_pick_ms()),
            member_in_flight,
            calls_moved_from_home: (self.home.is_some() && self.keyed_calls > 0)
                .then(|| share(self.moved_from_home, self.keyed_calls)),
            retries: (!self.budgets.is_empty()).then(|| RetryCounts {
                retries: self.retries_in_window,
                extra_share: share(self.retries_in_window, self.calls_in_window),
                refused_by_budget: self.refused_in_window,
            }),
            hedges: (!self.hedges.is_empty()).then(|| HedgeCounts {
                hedges: self.hedged_in_window,
                extra_share: share(self.hedged_in_window, self.calls_in_window),
                won: self.hedges_won_in_window,
                refused_by_budget: self.hedges_refused_in_window,
            }),
            little: Little {
                mean_in_flight,
                arrival_rate_per_s: arrival_rate,
                mean_latency_s,
                relative_error,
                run_relative_error: run_error,
            },
            simulated_calls: self.simulated_calls,
            overloaded_at_s: self.overflow.then(|| self.now as f64 / NS_PER_S),
        }
    }
}
