//! The simulator: one run of one algorithm on one scenario under one load and seed, in
//! virtual time (integer nanoseconds), driving the algorithm's real selectors through the
//! test kit (`rpc_load_balancer::testkit::SelectorKit`, one per caller, each on a manual
//! clock moved to virtual time).
//!
//! A call's life: its caller picks a member (its own selector: it counts only its own calls
//! in flight and learns only its own outcomes), the request takes the network delay, waits
//! in the member's FIFO queue while the member serves `capacity` calls, is served, and the
//! reply takes the network delay back. A call not answered within the timeout ends as a
//! timeout for its caller, which releases the pick; the member still serves it.
//!
//! Events are handled from an [`EventQueue`] ordered by `(time, seq)`, except timeouts: every
//! call has the same timeout, so their deadlines come in issue order and a FIFO queue holds
//! them (one push and one pop a call instead of two heap operations).

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;
use rpc_load_balancer::routing::{Algorithm, OutcomeKind};
use rpc_load_balancer::testkit::{Picked, SelectorKit};
use rpc_load_balancer::ErrorCode;

use crate::queue::EventQueue;
use crate::random::{Stream, StreamId, Zipf};
use crate::report::RunReport;
use crate::scenario::{Action, LoadPoint, Scenario, Service};

mod measure;
mod members;
mod schedule;

use schedule::{expand_timeline, find_fault, Change, Fault};

const NS_PER_S: f64 = 1e9;
const NS_PER_MS: f64 = 1e6;
/// The width of the windows the shed time is measured in.
const SHED_WINDOW_NS: u64 = 100_000_000;
/// The width of the share-over-time buckets.
const BUCKET_NS: u64 = 1_000_000_000;
/// Most members whose shares over time a report carries.
const MAX_BUCKET_MEMBERS: usize = 64;
/// How long a closed-loop task waits after a call that could not pick any member.
const NO_MEMBER_BACKOFF_NS: u64 = 1_000_000;
/// Most calls a run holds at once (in flight, queued, or served after their caller gave up):
/// about 1.5 GB. A member overloaded for long (its queue grows by the excess rate) reaches it
/// only far beyond the built-in scenarios (which hold under 1 million).
pub const MAX_CALLS_HELD: usize = 10_000_000;
/// The CPU sampling interval of a member's node (the library's default `cpu_sample_interval`).
const CPU_SAMPLE_NS: u64 = 1_000_000_000;

/// One run to make.
#[derive(Clone, Copy)]
pub struct RunSpec<'a> {
    /// The scenario (checked: [`Scenario::validate`]).
    pub scenario: &'a Scenario,
    /// The load.
    pub load: LoadPoint,
    /// The algorithm; each caller builds its own selector from it.
    pub algorithm: &'a dyn Algorithm,
    /// The seed of every random number of the run (traffic, faults, the selectors').
    pub seed: u64,
}

/// A run that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The algorithm's options are invalid (its `build` failed).
    #[error("algorithm {algorithm}: {source}")]
    Algorithm {
        /// The algorithm's name.
        algorithm: String,
        /// The error `build` returned.
        source: rpc_load_balancer::Error,
    },
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] crate::scenario::ScenarioError),
    /// The run would hold more than [`MAX_CALLS_HELD`] calls at once (members overloaded for
    /// long): stopped at that point.
    #[error("the run held {limit} calls at once (members overloaded for too long): stopped at {at_s:.3} s of simulated time; shorten it or lower the load")]
    TooManyCalls {
        /// [`MAX_CALLS_HELD`].
        limit: usize,
        /// When it stopped, simulated s.
        at_s: f64,
    },
}

/// Makes one run and returns what it measured. Deterministic: the same spec gives the same
/// report, on any machine.
///
/// Errors: [`RunError::Scenario`] when the scenario is invalid, [`RunError::Algorithm`] when
/// a selector cannot be built.
pub fn run(spec: &RunSpec<'_>) -> Result<RunReport, RunError> {
    run_with_call_limit(spec, MAX_CALLS_HELD)
}

/// As [`run`], holding at most `limit` calls at once instead of [`MAX_CALLS_HELD`] (for a
/// machine with less memory, or a test of the bound).
///
/// Errors: as [`run`]; [`RunError::TooManyCalls`] with this `limit`.
pub fn run_with_call_limit(spec: &RunSpec<'_>, limit: usize) -> Result<RunReport, RunError> {
    spec.scenario.validate()?;
    let mut sim = Sim::new(spec)?;
    sim.limit = limit;
    sim.run();
    if sim.overflow {
        return Err(RunError::TooManyCalls {
            limit,
            at_s: sim.now as f64 / NS_PER_S,
        });
    }
    Ok(sim.report(spec))
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    /// The next open-loop arrival at a caller.
    Arrival(u32),
    /// A closed-loop task issues its next call.
    Issue { caller: u32, task: u32 },
    /// A request reaches its member.
    AtMember(u32),
    /// A member finished serving a call (valid while the call's generation matches).
    ServiceDone { call: u32, generation: u32 },
    /// A reply (or an error reply) reaches the caller.
    Reply(u32),
    /// The `i`-th change of the timeline.
    Timeline(u32),
    /// A caller's heartbeat round.
    Heartbeat(u32),
    /// A member's node samples its utilization.
    Sample(u32),
    /// A caller's CPU poller fetches every member's reading.
    Poll(u32),
}

struct Member {
    node: String,
    capacity: usize,
    base_factor: f64,
    slow: f64,
    warm: f64,
    fail: f64,
    present: bool,
    paused_since: Option<u64>,
    in_service: Vec<u32>,
    queue: VecDeque<u32>,
    /// ∫ calls in service dt (ns), while not paused.
    busy_area: u128,
    busy_last: u64,
    area_at_sample: u128,
    /// The latest utilization sample: (%, when).
    sample: Option<(f64, u64)>,
}

struct Caller {
    kit: Option<SelectorKit>,
    kit_time: u64,
    /// Members this caller removed after heartbeat silence.
    removed: Vec<u32>,
    heartbeat_phase: u64,
}

struct Call {
    caller: u32,
    member: u32,
    task: u32,
    issued: u64,
    seq: u64,
    picked: Option<Picked>,
    caller_done: bool,
    in_window: bool,
    failed: bool,
    generation: u32,
    end: u64,
    remaining: u64,
}

const NO_TASK: u32 = u32::MAX;

struct Sim<'a> {
    scenario: &'a Scenario,
    local: bool,
    queue: EventQueue<Ev>,
    timeouts: VecDeque<(u64, u32, u64)>,
    timeline: Vec<(u64, Change, u32)>,
    members: Vec<Member>,
    /// The members present, by index (CallDirect's callers call the `i`-th).
    present: Vec<u32>,
    callers: Vec<Caller>,
    calls: Vec<Call>,
    free: Vec<u32>,
    next_seq: u64,
    arrivals: Stream,
    service: Stream,
    faults: Stream,
    keys: Stream,
    zipf: Option<Zipf>,
    /// Per caller, mean ns between its open-loop arrivals (0: closed loop).
    interarrival_ns: f64,
    delay_ns: u64,
    timeout_ns: u64,
    window_start: u64,
    window_end: u64,
    heartbeat: Option<(u64, u64)>,
    /// Members ever paused (the heartbeat watches only them).
    watched: Vec<u32>,
    polling: Option<(u64, u64)>,
    now: u64,
    /// Most calls held at once; reaching it sets `overflow` and the run stops.
    limit: usize,
    overflow: bool,
    // Measurements.
    histogram: Histogram<u64>,
    latency_sum_ns: u128,
    calls_in_window: u64,
    ok: u64,
    errors: u64,
    timeouts_seen: u64,
    open_in_window: u64,
    picks: Vec<u64>,
    buckets: Option<Vec<Vec<u64>>>,
    fault: Option<Fault>,
    in_flight: u64,
    in_flight_area: u128,
    in_flight_last: u64,
    /// ∫ calls in flight dt over the whole run, and the sum of every call's latency (ns).
    run_area: u128,
    run_latency_ns: u128,
    simulated_calls: u64,
}

fn ns(seconds: f64) -> u64 {
    libm::round(seconds * NS_PER_S) as u64
}

fn node_name(index: usize) -> String {
    format!("m{index:05}@lab")
}

fn member_index(node: &str) -> u32 {
    node.get(1..6).and_then(|d| d.parse().ok()).unwrap_or(0)
}

impl<'a> Sim<'a> {
    fn new(spec: &RunSpec<'a>) -> Result<Self, RunError> {
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
                    in_service: Vec::new(),
                    queue: VecDeque::new(),
                    busy_area: 0,
                    busy_last: 0,
                    area_at_sample: 0,
                    sample: None,
                }
            })
            .collect();
        let local = spec.algorithm.is_local();
        let initial: Vec<&str> = members
            .iter()
            .filter(|m| m.present)
            .map(|m| m.node.as_str())
            .collect();
        let mut callers = Vec::with_capacity(s.callers);
        let heartbeat_interval = ns(s.heartbeat.interval_ms / 1e3);
        for c in 0..s.callers {
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
                kit.join(initial.iter().copied());
                Some(kit)
            };
            callers.push(Caller {
                kit,
                kit_time: 0,
                removed: Vec::new(),
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
        let heartbeat = (!watched.is_empty())
            .then(|| (heartbeat_interval.max(1), ns(s.heartbeat.timeout_ms / 1e3)));
        let buckets = (s.changes() && s.members <= MAX_BUCKET_MEMBERS).then(|| {
            let n = (window_end - window_start).div_ceil(BUCKET_NS) as usize;
            vec![vec![0; s.members]; n]
        });
        let fault = find_fault(s, window_end, &joins_later);
        let mut sim = Sim {
            scenario: s,
            local,
            queue: EventQueue::new(),
            timeouts: VecDeque::new(),
            timeline,
            present: (0..members.len() as u32)
                .filter(|&m| members[m as usize].present)
                .collect(),
            members,
            callers,
            calls: Vec::new(),
            free: Vec::new(),
            next_seq: 0,
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
            timeout_ns: libm::round(s.timeout_ms * NS_PER_MS).max(1.0) as u64,
            window_start,
            window_end,
            heartbeat,
            watched,
            polling,
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
            in_flight: 0,
            in_flight_area: 0,
            in_flight_last: 0,
            run_area: 0,
            run_latency_ns: 0,
            simulated_calls: 0,
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
        if let Some((interval, jitter)) = sim.polling {
            for m in 0..s.members {
                let at = phases.below(CPU_SAMPLE_NS);
                sim.queue.push(at, Ev::Sample(m as u32));
            }
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

    fn next_gap(&mut self) -> u64 {
        (libm::round(self.arrivals.exponential(self.interarrival_ns)) as u64).max(1)
    }

    fn running(&self) -> bool {
        self.now < self.window_end
    }

    fn run(&mut self) {
        loop {
            let next_timeout = self.timeouts.front().map(|t| t.0);
            let next_event = self.queue.next_time();
            let timeout_first = match (next_timeout, next_event) {
                (Some(t), Some(e)) => t <= e,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if timeout_first {
                let (at, call, seq) = self.timeouts.pop_front().expect("a timeout");
                self.now = at;
                let c = &self.calls[call as usize];
                if c.seq == seq && !c.caller_done {
                    self.end_call(call, OutcomeKind::Timeout);
                }
            } else {
                let (at, event) = self.queue.pop().expect("an event");
                self.now = at;
                self.handle(event);
            }
            if self.overflow || (!self.running() && self.in_flight == 0) {
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
            Ev::Timeline(i) => {
                let (_, change, member) = self.timeline[i as usize];
                self.apply(member, change);
            }
            Ev::Heartbeat(caller) => self.heartbeat_round(caller),
            Ev::Sample(member) => self.sample(member),
            Ev::Poll(caller) => self.poll(caller),
        }
    }

    /// Moves a caller's selector clock to now.
    fn sync_clock(&mut self, caller: u32) {
        let c = &mut self.callers[caller as usize];
        if let Some(kit) = &c.kit {
            if self.now > c.kit_time {
                kit.clock()
                    .advance(Duration::from_nanos(self.now - c.kit_time));
                c.kit_time = self.now;
            }
        }
    }

    fn account_in_flight(&mut self) {
        let clamp = |t: u64| t.clamp(self.window_start, self.window_end);
        let span = clamp(self.now) - clamp(self.in_flight_last);
        self.in_flight_area += u128::from(self.in_flight) * u128::from(span);
        self.run_area += u128::from(self.in_flight) * u128::from(self.now - self.in_flight_last);
        self.in_flight_last = self.now;
    }

    fn issue(&mut self, caller: u32, task: u32) {
        self.simulated_calls += 1;
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
        self.count_pick(member);
        self.account_in_flight();
        self.in_flight += 1;
        if in_window {
            self.calls_in_window += 1;
            self.open_in_window += 1;
        }
        self.next_seq += 1;
        let call = Call {
            caller,
            member,
            task,
            issued: self.now,
            seq: self.next_seq,
            picked,
            caller_done: false,
            in_window,
            failed: false,
            generation: 0,
            end: 0,
            remaining: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.calls[id as usize] = call;
                id
            }
            None => {
                if self.calls.len() >= self.limit {
                    self.overflow = true;
                }
                self.calls.push(call);
                (self.calls.len() - 1) as u32
            }
        };
        self.timeouts
            .push_back((self.now + self.timeout_ns, id, self.next_seq));
        self.queue.push(self.now + self.delay_ns, Ev::AtMember(id));
    }

    fn count_pick(&mut self, member: u32) {
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
            if self.now >= fault.start && self.now < fault.end {
                let w = ((self.now - fault.start) / SHED_WINDOW_NS) as usize;
                if let Some(window) = fault.windows.get_mut(w) {
                    window.0 += 1;
                    window.1 += u64::from(member == fault.member);
                }
            }
        }
    }

    fn at_member(&mut self, call: u32) {
        let m = self.calls[call as usize].member as usize;
        let member = &self.members[m];
        if member.paused_since.is_some() || member.in_service.len() >= member.capacity {
            self.members[m].queue.push_back(call);
        } else {
            self.start(call);
        }
    }

    fn account_busy(&mut self, m: usize) {
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
            self.calls[call as usize].failed = true;
            self.queue.push(self.now + self.delay_ns, Ev::Reply(call));
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
        c.end = self.now + service_ns;
        let generation = c.generation;
        self.queue.push(c.end, Ev::ServiceDone { call, generation });
    }

    fn service_done(&mut self, call: u32) {
        let m = self.calls[call as usize].member as usize;
        self.account_busy(m);
        let member = &mut self.members[m];
        if let Some(i) = member.in_service.iter().position(|&c| c == call) {
            member.in_service.swap_remove(i);
        }
        self.queue.push(self.now + self.delay_ns, Ev::Reply(call));
        self.start_queued(m);
    }

    /// Starts queued calls while the member has room and is not paused.
    fn start_queued(&mut self, m: usize) {
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

    fn reply(&mut self, call: u32) {
        let c = &self.calls[call as usize];
        if !c.caller_done {
            let kind = if c.failed {
                OutcomeKind::Error(ErrorCode::ServiceUnavailable)
            } else {
                OutcomeKind::Ok
            };
            self.end_call(call, kind);
        }
        self.free.push(call);
    }

    /// The call ends for its caller.
    fn end_call(&mut self, call: u32, kind: OutcomeKind) {
        let now = self.now;
        let c = &mut self.calls[call as usize];
        c.caller_done = true;
        let (caller, task, in_window) = (c.caller, c.task, c.in_window);
        let latency = now - c.issued;
        let picked = c.picked.take();
        self.account_in_flight();
        self.in_flight -= 1;
        self.run_latency_ns += u128::from(latency);
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
                kit.complete(picked, Duration::from_nanos(latency), kind);
            }
        }
        if task != NO_TASK && self.running() {
            self.issue(caller, task);
        }
    }
}
