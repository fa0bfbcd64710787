//! The simulator: one run of one algorithm on one scenario under one load and seed, in
//! virtual time (integer nanoseconds), driving the algorithm's real selectors through the
//! test kit (`rpc_load_balancer::testkit::SelectorKit`, one per caller, each on a manual
//! clock moved to virtual time).
//!
//! A call's life: its caller picks a member (its own selector: it counts only its own calls
//! in flight and learns only its own outcomes), the request takes the network delay, waits
//! in the member's FIFO queue while the member serves `capacity` calls, is served, and the
//! reply takes the network delay back. A call not answered within the timeout ends as a
//! timeout for its caller, which releases the pick and cancels the call: the member drops it
//! when the cancel arrives.
//!
//! Events are handled from an [`EventQueue`] ordered by `(time, seq)`, except timeouts: every
//! call has the same timeout, so their deadlines come in issue order, and the next is the
//! oldest call still open for its caller (a list linked through the calls: `open`).

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use rpc_load_balancer::routing::{Algorithm, Subsetting};
use rpc_load_balancer::testkit::{Picked, SelectorKit};

use crate::queue::EventQueue;
use crate::random::{Stream, Zipf};
use crate::report::RunReport;
use crate::scenario::{LoadPoint, Scenario};

mod call;
mod events;
mod heartbeat;
mod hedge;
mod load;
mod measure;
mod members;
mod open;
mod retry;
mod schedule;
mod setup;

use schedule::{Change, Fault};

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
/// Most calls a run holds at once (on the network, queued or served; a call its caller gave
/// up on is cancelled and leaves its member a network delay later): about 145 bytes each, so
/// under 300 MB. A run that reaches it is *overloaded* (more calls arrive within one timeout
/// than it may hold: with the default 1 s timeout, over 2 million a second pile up): it stops
/// there and reports what it measured, flagged ([`RunReport::overloaded_at_s`]). Healthy runs
/// of the built-in scenarios hold far fewer.
pub const MAX_CALLS_HELD: usize = 2_000_000;
/// Most calls a run simulates before it stops with [`RunError::TooManyCalls`]: twice the
/// estimate's bound ([`crate::scenario::MAX_RUN_CALLS`]), for what the estimate misses (a
/// failing member's quick errors in a closed loop).
const MAX_SIMULATED_CALLS: u64 = 2 * crate::scenario::MAX_RUN_CALLS as u64;

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
    /// The run simulated more calls than one run may (far more than the scenario's estimate,
    /// [`Scenario::estimated_calls`](crate::Scenario::estimated_calls)): stopped at that
    /// point.
    #[error("the run simulated {limit} calls, more than one run may: stopped at {at_s:.3} s of simulated time; shorten it or lower the load")]
    TooManyCalls {
        /// The bound (400 million).
        limit: u64,
        /// When it stopped, simulated s.
        at_s: f64,
    },
}

/// Makes one run and returns what it measured. Deterministic: the same spec gives the same
/// report, on any machine. A run that would hold more than [`MAX_CALLS_HELD`] calls at once
/// is overloaded: it stops there, and its report says when
/// ([`RunReport::overloaded_at_s`]).
///
/// Errors: [`RunError::Scenario`] when the scenario is invalid, [`RunError::Algorithm`] when
/// a selector cannot be built, [`RunError::TooManyCalls`] when it simulates far more calls
/// than the scenario's estimate.
pub fn run(spec: &RunSpec<'_>) -> Result<RunReport, RunError> {
    run_with_call_limit(spec, MAX_CALLS_HELD)
}

/// As [`run`], holding at most `limit` calls at once instead of [`MAX_CALLS_HELD`] (for a
/// machine with less memory, or a test of the bound): a run that reaches it stops there as
/// overloaded.
///
/// Errors: as [`run`].
pub fn run_with_call_limit(spec: &RunSpec<'_>, limit: usize) -> Result<RunReport, RunError> {
    spec.scenario.validate()?;
    let mut sim = Sim::new(spec)?;
    sim.limit = limit;
    sim.run();
    if sim.simulated_calls >= MAX_SIMULATED_CALLS {
        return Err(RunError::TooManyCalls {
            limit: MAX_SIMULATED_CALLS,
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
    /// A timed-out call's cancel reaches its member.
    Cancel(u32),
    /// The `i`-th change of the timeline.
    Timeline(u32),
    /// A caller's heartbeat round.
    Heartbeat(u32),
    /// A caller's ping to a paused member, sent one heartbeat timeout ago, is unanswered.
    PingTimeout { caller: u32, member: u32 },
    /// A member's node samples its utilization.
    Sample(u32),
    /// A caller's CPU poller fetches every member's reading.
    Poll(u32),
    /// A call's second copy is due (valid while the call's `hedge_at` is `at`).
    Hedge { call: u32, at: u64 },
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
    /// Pauses begun and not yet ended (overlapping pauses of one member stack).
    pauses: u32,
    in_service: Vec<u32>,
    queue: VecDeque<u32>,
    /// ∫ calls in service dt (ns), while not paused.
    busy_area: u128,
    busy_last: u64,
    area_at_sample: u128,
    /// When its node's sampler last sampled (`None`: not yet; a cold start's first sample is
    /// withheld, as the real sampler's).
    sampled_at: Option<u64>,
    /// The latest utilization sample: (%, when).
    sample: Option<(f64, u64)>,
    /// Calls the member holds (queued or in service), ∫ of that over the window (ns), and
    /// when it was last accounted.
    held: u64,
    held_area: u128,
    held_last: u64,
    /// Calls it finished per whole second, for its replies' load reports.
    rates: load::Rates,
}

struct Caller {
    kit: Option<SelectorKit>,
    /// With subsetting: the members of its subset (indices, ascending), the only ones its
    /// selector may have and its heartbeat and poller watch. Empty without.
    subset: Vec<u32>,
    kit_time: u64,
    /// Members this caller removed after heartbeat silence.
    removed: Vec<u32>,
    /// Paused members this caller's unanswered ping waits on, and when it was sent.
    pinging: Vec<(u32, u64)>,
    heartbeat_phase: u64,
}

struct Call {
    caller: u32,
    member: u32,
    task: u32,
    issued: u64,
    /// The open calls' list (see `open.rs`): the next older and newer open call, or [`NIL`].
    older: u32,
    newer: u32,
    picked: Option<Picked>,
    caller_done: bool,
    in_window: bool,
    failed: bool,
    /// Where the call is on its member's side.
    stage: Stage,
    /// Its caller timed out and sent a cancel; and whether the cancel reached the member.
    cancel_sent: bool,
    cancel_seen: bool,
    generation: u32,
    end: u64,
    remaining: u64,
    /// The load its reply reports, made when the member sent it.
    load: load::Load,
    /// Hedging (`[hedging]`): whether this is a call's second copy (not open for its
    /// caller, never timed out itself: its call's end cancels it); the other copy while both
    /// run, or [`NIL`]; when its second copy is due (0: none).
    copy: bool,
    twin: u32,
    hedge_at: u64,
}

/// Where a call is on its member's side. Its slot is reused once neither a reply nor a
/// cancel is still on its way to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The request is on the network.
    ToMember,
    /// In its member's queue.
    Queued,
    /// Being served.
    Serving,
    /// Its reply is on the network.
    Replying,
    /// Its reply reached the caller, or the member dropped it (cancelled).
    Done,
}

const NO_TASK: u32 = u32::MAX;
/// No call (the end of the open calls' list).
const NIL: u32 = u32::MAX;

struct Sim<'a> {
    scenario: &'a Scenario,
    local: bool,
    queue: EventQueue<Ev>,
    /// The oldest and the newest call still open for its caller, or [`NIL`].
    open_oldest: u32,
    open_newest: u32,
    timeline: Vec<(u64, Change, u32)>,
    members: Vec<Member>,
    /// The members present, by index (CallDirect's callers call the `i`-th).
    present: Vec<u32>,
    callers: Vec<Caller>,
    /// Deterministic subsetting (the scenario's `subset`): each caller balances over its
    /// subset of the members present only.
    subsetting: Option<Subsetting>,
    calls: Vec<Call>,
    free: Vec<u32>,
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
    /// How often a member's node samples its utilization, ns.
    cpu_sample_ns: u64,
    /// Every member's node starts with the run (its sampler's first sample is withheld).
    cold_start: bool,
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
    /// Each keyed call's home (its owner on a plain ring over the members present), when
    /// the calls carry keys.
    home: Option<SelectorKit>,
    /// Keyed calls of the window that picked a member, and those not sent to their home.
    keyed_calls: u64,
    moved_from_home: u64,
    in_flight: u64,
    in_flight_area: u128,
    in_flight_last: u64,
    /// ∫ calls in flight dt over the whole run, and the sum of every call's latency (ns).
    run_area: u128,
    run_latency_ns: u128,
    simulated_calls: u64,
    /// Retries (`[retries]`): each caller's budget (empty: no retries), whether `fail`
    /// failures are of the retryable kind, the members each retried call has tried, and
    /// the window's retries and failures the budget refused.
    budgets: Vec<rpc_load_balancer::testkit::RetryBudgetKit>,
    fail_retryable: bool,
    tried: std::collections::HashMap<u32, Vec<u32>>,
    retries_in_window: u64,
    refused_in_window: u64,
    /// Hedging (`[hedging]`): each caller's decisions (empty: no hedging), and the window's
    /// second copies sent, those that won, and those the budget refused.
    hedges: Vec<rpc_load_balancer::testkit::HedgeKit>,
    hedged_in_window: u64,
    hedges_won_in_window: u64,
    hedges_refused_in_window: u64,
}

impl Sim<'_> {
    /// Whether `caller` dials `member`: every member without subsetting, else its subset's.
    fn dials(&self, caller: u32, member: u32) -> bool {
        self.subsetting.is_none()
            || self.callers[caller as usize]
                .subset
                .binary_search(&member)
                .is_ok()
    }
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
