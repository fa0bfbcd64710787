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
use crate::report::{Latency, Little, RunReport, ShareOverTime, QUANTILES};
use crate::scenario::{Action, LoadPoint, Scenario, Service};

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

/// What a member does in one moment of the timeline.
#[derive(Debug, Clone, Copy)]
enum Change {
    Pause,
    Resume,
    Slow(f64),
    Fail(f64),
    Join { warm_factor: f64 },
    WarmEnd,
    Leave,
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

/// The faulty member's picks per 100 ms window while its fault lasts.
struct Fault {
    member: u32,
    start: u64,
    end: u64,
    members_present: usize,
    /// (every pick, the faulty member's picks) per window.
    windows: Vec<(u64, u64)>,
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

    fn apply(&mut self, m: u32, change: Change) {
        let mi = m as usize;
        match change {
            Change::Pause => {
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
                if self.members[mi].paused_since.take().is_some() {
                    self.members[mi].busy_last = self.now;
                    let in_service = self.members[mi].in_service.clone();
                    for call in in_service {
                        let c = &mut self.calls[call as usize];
                        c.end = self.now + c.remaining;
                        let generation = c.generation;
                        self.queue.push(c.end, Ev::ServiceDone { call, generation });
                    }
                    self.start_queued(mi);
                }
            }
            Change::Slow(factor) => self.members[mi].slow = factor,
            Change::Fail(fraction) => self.members[mi].fail = fraction,
            Change::Join { warm_factor } => {
                self.members[mi].warm = warm_factor;
                if !self.members[mi].present {
                    self.members[mi].present = true;
                    self.present_changed();
                    for c in 0..self.callers.len() {
                        self.sync_clock(c as u32);
                        let node = self.members[mi].node.clone();
                        if let Some(kit) = &mut self.callers[c].kit {
                            kit.join([node]);
                        }
                    }
                }
            }
            Change::WarmEnd => self.members[mi].warm = 1.0,
            Change::Leave => {
                if self.members[mi].present {
                    self.members[mi].present = false;
                    self.present_changed();
                    for c in 0..self.callers.len() {
                        self.sync_clock(c as u32);
                        let node = self.members[mi].node.clone();
                        if let Some(kit) = &mut self.callers[c].kit {
                            kit.leave([node]);
                        }
                    }
                }
            }
        }
    }

    fn present_changed(&mut self) {
        self.present = (0..self.members.len() as u32)
            .filter(|&m| self.members[m as usize].present)
            .collect();
    }

    /// A caller's heartbeat round: a watched member silent for the timeout leaves this
    /// caller's members; one that answers again comes back.
    fn heartbeat_round(&mut self, caller: u32) {
        let Some((interval, timeout)) = self.heartbeat else {
            return;
        };
        self.sync_clock(caller);
        let phase = self.callers[caller as usize].heartbeat_phase;
        for i in 0..self.watched.len() {
            let m = self.watched[i];
            let member = &self.members[m as usize];
            if !member.present {
                continue;
            }
            let node = member.node.clone();
            let c = &mut self.callers[caller as usize];
            let removed = c.removed.contains(&m);
            match member.paused_since {
                Some(since) => {
                    // Its last answer: this caller's last round at or before the pause.
                    let last_answer = if since >= phase {
                        phase + (since - phase) / interval * interval
                    } else {
                        since
                    };
                    if !removed && self.now - last_answer >= timeout {
                        c.removed.push(m);
                        if let Some(kit) = &mut c.kit {
                            kit.leave([node]);
                        }
                    }
                }
                None if removed => {
                    c.removed.retain(|&r| r != m);
                    if let Some(kit) = &mut c.kit {
                        kit.join([node]);
                    }
                }
                None => {}
            }
        }
        if self.running() {
            self.queue.push(self.now + interval, Ev::Heartbeat(caller));
        }
    }

    /// A member's node samples its utilization over the last sampling interval (busy ÷
    /// capacity, %): the reading LeastCpu's pollers fetch.
    fn sample(&mut self, m: u32) {
        let mi = m as usize;
        self.account_busy(mi);
        let member = &mut self.members[mi];
        let busy = member.busy_area - member.area_at_sample;
        member.area_at_sample = member.busy_area;
        let utilization = busy as f64 / (CPU_SAMPLE_NS as f64 * member.capacity as f64) * 100.0;
        member.sample = Some((utilization.min(100.0), self.now));
        if self.running() {
            self.queue.push(self.now + CPU_SAMPLE_NS, Ev::Sample(m));
        }
    }

    /// A caller's poller fetches the latest reading of every member that answers.
    fn poll(&mut self, caller: u32) {
        let Some((interval, _)) = self.polling else {
            return;
        };
        self.sync_clock(caller);
        let now = self.now;
        let c = &mut self.callers[caller as usize];
        if let Some(kit) = &mut c.kit {
            for member in &self.members {
                if !member.present || member.paused_since.is_some() {
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

    fn report(&self, spec: &RunSpec<'_>) -> RunReport {
        let s = self.scenario;
        let window_s = (self.window_end - self.window_start) as f64 / NS_PER_S;
        let ms = |v: u64| v as f64 / NS_PER_MS;
        let h = &self.histogram;
        let finished = self.ok + self.errors;
        let latency_ms = if h.is_empty() {
            Latency::default()
        } else {
            Latency {
                p50: ms(h.value_at_quantile(0.5)),
                p99: ms(h.value_at_quantile(0.99)),
                p999: ms(h.value_at_quantile(0.999)),
                mean: if finished == 0 {
                    0.0
                } else {
                    self.latency_sum_ns as f64 / finished as f64 / NS_PER_MS
                },
                max: ms(h.max()),
            }
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
        let arrival_rate = self.calls_in_window as f64 / window_s;
        let mean_latency_s = if finished == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / finished as f64 / NS_PER_S
        };
        let mean_in_flight = self.in_flight_area as f64 / (window_s * NS_PER_S);
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
            goodput_per_s: self.ok as f64 / window_s,
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
            shed_ms: self.fault.as_ref().and_then(|f| f.shed_ms()),
            little: Little {
                mean_in_flight,
                arrival_rate_per_s: arrival_rate,
                mean_latency_s,
                relative_error,
                run_relative_error: run_error,
            },
            simulated_calls: self.simulated_calls,
        }
    }
}

impl Fault {
    fn shed_ms(&self) -> Option<f64> {
        let fair = 1.0 / self.members_present.max(1) as f64;
        let last_picked = self
            .windows
            .iter()
            .rposition(|&(total, faulty)| total > 0 && faulty as f64 >= fair / 2.0 * total as f64);
        match last_picked {
            None => Some(0.0),
            Some(w) if w + 1 == self.windows.len() => None,
            Some(w) => Some(((w as u64 + 1) * SHED_WINDOW_NS) as f64 / NS_PER_MS),
        }
    }
}

/// The faulty member and its fault's span (see [`RunReport::faulty_member`]).
fn find_fault(s: &Scenario, run_end: u64, joins_later: &[bool]) -> Option<Fault> {
    let initial = joins_later.iter().filter(|j| !**j).count();
    let (member, start, end, present) = if let Some(e) = s.event.iter().find(|e| {
        matches!(e.action, Action::Pause | Action::Slow | Action::Fail)
            || (e.action == Action::Join && e.factor.is_some_and(|f| f > 1.0))
    }) {
        let start = ns(e.at_s);
        let end = e.for_s.map_or(run_end, |f| start + ns(f)).min(run_end);
        let present = initial + usize::from(e.action == Action::Join);
        (e.member, start, end, present)
    } else {
        let m = s
            .member
            .iter()
            .find(|m| m.slow_factor.is_some_and(|f| f > 1.0))?;
        (m.index, 0, run_end, initial)
    };
    if start >= end {
        return None;
    }
    let windows = (end - start).div_ceil(SHED_WINDOW_NS) as usize;
    Some(Fault {
        member: member as u32,
        start,
        end,
        members_present: present,
        windows: vec![(0, 0); windows],
    })
}

/// The scenario's events as a timeline of changes, in time order.
fn expand_timeline(s: &Scenario) -> Vec<(u64, Change, u32)> {
    let end = ns(s.warmup_s + s.measure_s);
    let mut timeline = Vec::new();
    for e in &s.event {
        let m = e.member as u32;
        let (on, off) = match e.action {
            Action::Pause => (Change::Pause, Some(Change::Resume)),
            Action::Slow => (
                Change::Slow(e.factor.unwrap_or(1.0)),
                Some(Change::Slow(1.0)),
            ),
            Action::Fail => (
                Change::Fail(e.fraction.unwrap_or(0.0)),
                Some(Change::Fail(0.0)),
            ),
            Action::Join => (
                Change::Join {
                    warm_factor: e.factor.unwrap_or(1.0),
                },
                Some(Change::WarmEnd),
            ),
            Action::Leave => (Change::Leave, None),
        };
        let mut at = ns(e.at_s);
        loop {
            if at > end {
                break;
            }
            timeline.push((at, on, m));
            if let (Some(f), Some(off)) = (e.for_s, off) {
                timeline.push((at + ns(f), off, m));
            }
            match e.every_s {
                Some(every) => at += ns(every),
                None => break,
            }
        }
    }
    // Stable: changes at one instant keep the file's order.
    timeline.sort_by_key(|(at, _, _)| *at);
    timeline
}
