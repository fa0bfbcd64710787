//! A run's starting state: its members, its callers (each with its own selector), and the
//! first events.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;
use rpc_load_balancer::testkit::SelectorKit;
use rpc_load_balancer::HashRing;

use super::schedule::{expand_timeline, find_fault};
use super::{
    node_name, ns, Caller, Ev, Member, RunError, RunSpec, Sim, BUCKET_NS, MAX_BUCKET_MEMBERS,
    MAX_CALLS_HELD, NS_PER_MS, NS_PER_S,
};
use crate::queue::EventQueue;
use crate::random::{Stream, StreamId, Zipf};
use crate::scenario::{Action, LoadPoint};

impl<'a> Sim<'a> {
    pub(super) fn new(spec: &RunSpec<'a>) -> Result<Self, RunError> {
        let s = spec.scenario;
        let seed = spec.seed;
        let mut phases = Stream::new(seed, StreamId::Phases);
        let timeline = expand_timeline(s);
        let joins_later: Vec<bool> = (0..s.members)
            .map(|m| {
                s.event
                    .iter()
                    .any(|e| e.member == m && e.action == Action::Join)
            })
            .collect();
        let members: Vec<Member> = (0..s.members)
            .map(|i| {
                let spec = s.member.iter().rev().find(|m| m.index == i);
                Member {
                    node: node_name(i),
                    capacity: spec.and_then(|m| m.capacity).unwrap_or(s.capacity) as usize,
                    base_factor: spec.and_then(|m| m.slow_factor).unwrap_or(1.0),
                    slow: 1.0,
                    warm: 1.0,
                    fail: 0.0,
                    present: !joins_later[i],
                    paused_since: None,
                    pauses: 0,
                    in_service: Vec::new(),
                    queue: VecDeque::new(),
                    busy_area: 0,
                    busy_last: 0,
                    area_at_sample: 0,
                    sampled_at: None,
                    sample: None,
                    held: 0,
                    held_area: 0,
                    held_last: 0,
                    rates: Default::default(),
                }
            })
            .collect();
        let local = spec.algorithm.is_local();
        let initial: Vec<&str> = members
            .iter()
            .filter(|m| m.present)
            .map(|m| m.node.as_str())
            .collect();
        let subsetting = s.subsetting();
        if let Some(subsetting) = &subsetting {
            subsetting
                .check(spec.algorithm)
                .map_err(|source| RunError::Algorithm {
                    algorithm: spec.algorithm.name().to_string(),
                    source,
                })?;
        }
        let present: Vec<u32> = (0..members.len() as u32)
            .filter(|&m| members[m as usize].present)
            .collect();
        let mut callers = Vec::with_capacity(s.callers);
        let heartbeat_interval = ns(s.heartbeat.interval_ms / 1e3);
        let timeout_ns = libm::round(s.timeout_ms * NS_PER_MS).max(1.0) as u64;
        for c in 0..s.callers {
            // Its subset of the members present (indices into `initial` and `present`).
            let chosen = subsetting
                .as_ref()
                .map(|subsetting| subsetting.subset(&initial, c, s.callers));
            let kit = if local {
                None
            } else {
                let selector_seed = seed.wrapping_mul(1_000_003).wrapping_add(c as u64);
                let mut kit =
                    SelectorKit::seeded(spec.algorithm, selector_seed).map_err(|source| {
                        RunError::Algorithm {
                            algorithm: spec.algorithm.name().to_string(),
                            source,
                        }
                    })?;
                match &chosen {
                    Some(chosen) => kit.join(chosen.iter().map(|&j| initial[j])),
                    None => kit.join(initial.iter().copied()),
                }
                // Outcomes carry the call's timeout, as a balancer's do.
                kit.set_call_timeout(Some(Duration::from_nanos(timeout_ns)));
                Some(kit)
            };
            let subset = chosen.map_or_else(Vec::new, |chosen| {
                chosen.into_iter().map(|j| present[j]).collect()
            });
            callers.push(Caller {
                kit,
                subset,
                kit_time: 0,
                removed: Vec::new(),
                pinging: Vec::new(),
                heartbeat_phase: phases.below(heartbeat_interval.max(1)),
            });
        }
        let window_start = ns(s.warmup_s);
        let window_end = window_start + ns(s.measure_s);
        let interarrival_ns = match spec.load {
            LoadPoint::Open { fraction } => {
                let rate = fraction * s.uniform_capacity_per_s();
                s.callers as f64 * NS_PER_S / rate
            }
            LoadPoint::Closed { .. } => 0.0,
        };
        let polling = spec.algorithm.needs().cpu.map(|p| {
            (
                u64::try_from(p.poll_interval.as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1),
                u64::try_from(p.poll_startup_jitter.as_nanos()).unwrap_or(u64::MAX),
            )
        });
        let watched: Vec<u32> = {
            let mut w: Vec<u32> = s
                .event
                .iter()
                .filter(|e| e.action == Action::Pause)
                .map(|e| e.member as u32)
                .collect();
            w.sort_unstable();
            w.dedup();
            w
        };
        // CallDirect's calls are local: no session for a heartbeat to stop.
        let heartbeat = (!watched.is_empty() && !local)
            .then(|| (heartbeat_interval.max(1), ns(s.heartbeat.timeout_ms / 1e3)));
        // Scenarios that change, and cold starts (where readings arrive during the window).
        let buckets =
            ((s.changes() || s.cold_start) && s.members <= MAX_BUCKET_MEMBERS).then(|| {
                let n = (window_end - window_start).div_ceil(BUCKET_NS) as usize;
                vec![vec![0; s.members]; n]
            });
        let fault = find_fault(s, window_end, &joins_later);
        // Keyed calls' homes: the owners on a plain ring (not for CallDirect's local calls).
        let home = match s.keys {
            Some(_) if !local => {
                let mut kit =
                    SelectorKit::new(&HashRing::new()).map_err(|source| RunError::Algorithm {
                        algorithm: "hash_ring".to_string(),
                        source,
                    })?;
                kit.join(initial.iter().copied());
                Some(kit)
            }
            _ => None,
        };
        let mut sim = Sim {
            scenario: s,
            local,
            queue: EventQueue::new(),
            open_oldest: super::NIL,
            open_newest: super::NIL,
            timeline,
            present,
            members,
            callers,
            subsetting,
            calls: Vec::new(),
            free: Vec::new(),
            arrivals: Stream::new(seed, StreamId::Arrivals),
            service: Stream::new(seed, StreamId::Service),
            faults: Stream::new(seed, StreamId::Faults),
            keys: Stream::new(seed, StreamId::Keys),
            zipf: s.keys.map(|k| Zipf::new(k.count, k.zipf_s)),
            interarrival_ns,
            delay_ns: if local {
                0
            } else {
                libm::round(s.network_delay_us * 1e3) as u64
            },
            timeout_ns,
            window_start,
            window_end,
            heartbeat,
            watched,
            polling,
            cpu_sample_ns: ns(s.cpu_sample_interval_ms / 1e3).max(1),
            cold_start: s.cold_start,
            now: 0,
            limit: MAX_CALLS_HELD,
            overflow: false,
            histogram: Histogram::new_with_bounds(1_000, 100_000_000_000_000, 3)
                .expect("valid histogram bounds"),
            latency_sum_ns: 0,
            calls_in_window: 0,
            ok: 0,
            errors: 0,
            timeouts_seen: 0,
            open_in_window: 0,
            picks: vec![0; s.members],
            buckets,
            fault,
            home,
            keyed_calls: 0,
            moved_from_home: 0,
            in_flight: 0,
            in_flight_area: 0,
            in_flight_last: 0,
            run_area: 0,
            run_latency_ns: 0,
            simulated_calls: 0,
            budgets: match &s.retries {
                Some(retries) => (0..s.callers)
                    .map(|_| retries.kit().expect("a checked scenario"))
                    .collect(),
                None => Vec::new(),
            },
            fail_retryable: s.retries.is_some_and(|r| r.fail_retryable),
            tried: std::collections::HashMap::new(),
            retries_in_window: 0,
            refused_in_window: 0,
            hedges: match &s.hedging {
                Some(hedging) if !local => (0..s.callers)
                    .map(|_| hedging.kit().expect("a checked scenario"))
                    .collect(),
                _ => Vec::new(),
            },
            hedged_in_window: 0,
            hedges_won_in_window: 0,
            hedges_refused_in_window: 0,
        };
        // The first events.
        match spec.load {
            LoadPoint::Open { .. } => {
                for c in 0..s.callers {
                    let gap = sim.next_gap();
                    sim.queue.push(gap, Ev::Arrival(c as u32));
                }
            }
            LoadPoint::Closed { tasks } => {
                for task in 0..tasks {
                    // Staggered over the first millisecond, not all at one instant.
                    let at = phases.below(1_000_000);
                    let caller = (task % s.callers) as u32;
                    sim.queue.push(
                        at,
                        Ev::Issue {
                            caller,
                            task: task as u32,
                        },
                    );
                }
            }
        }
        for (i, (at, _, _)) in sim.timeline.iter().enumerate() {
            sim.queue.push(*at, Ev::Timeline(i as u32));
        }
        if let Some((interval, _)) = sim.heartbeat {
            for c in 0..s.callers {
                let phase = sim.callers[c].heartbeat_phase;
                sim.queue.push(phase.min(interval), Ev::Heartbeat(c as u32));
            }
        }
        // Every member's node samples its utilization (its replies report it; LeastCpu's
        // pollers fetch it), each at its own phase.
        for m in 0..s.members {
            let at = phases.below(sim.cpu_sample_ns);
            sim.queue.push(at, Ev::Sample(m as u32));
        }
        if let Some((interval, jitter)) = sim.polling {
            for c in 0..s.callers {
                // A cold start polls first after the startup jitter; a cluster that has run
                // for long polls at a random phase of the interval.
                let first = if s.cold_start {
                    phases.below(jitter.saturating_add(1))
                } else {
                    phases.below(interval)
                };
                sim.queue.push(first, Ev::Poll(c as u32));
            }
        }
        Ok(sim)
    }
}
