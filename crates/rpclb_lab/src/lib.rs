//! The balancing lab: what each of rpc_load_balancer's algorithms does to latency, errors
//! and members' shares, measured in a deterministic discrete-event simulation that drives
//! the library's real selectors (the routing core, unchanged) in virtual time.
//!
//! A [`Scenario`] (a TOML file; the built-in ones are in `lab/scenarios/`) describes a
//! cluster, its traffic and its faults; [`run`] makes one run of one algorithm under one
//! load and seed and returns a [`RunReport`]. `rpclb lab` runs scenarios × loads ×
//! algorithms × seeds and prints the tables.
//!
//! ```
//! use rpclb_lab::{run, RunSpec, Scenario};
//! use rpc_load_balancer::RoundRobin;
//!
//! let mut scenario = Scenario::load("uniform")?;
//! scenario.warmup_s = 0.1;
//! scenario.measure_s = 0.5;
//! let load = scenario.loads()[0]; // open loop at 50 %
//! let algorithm = RoundRobin::new();
//! let report = run(&RunSpec { scenario: &scenario, load, algorithm: &algorithm, seed: 1 })?;
//! assert_eq!(report.errors, 0);
//! assert!(report.shares.iter().all(|s| (s - 0.25).abs() < 0.01));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The model and its assumptions
//!
//! - **Time** is integer nanoseconds of virtual time; nothing reads a real clock. Each
//!   caller's selector reads a manual clock moved to virtual time before every pick, outcome,
//!   membership change and CPU reading.
//! - **Random numbers** come from ChaCha8 (`rand_chacha`), one stream per concern (arrivals,
//!   service times, faults, keys, phases), so every algorithm meets the same traffic under a
//!   seed; the selectors get seeds derived from the run's seed; floating-point functions come
//!   from `libm`. A seed gives the same report on any machine.
//! - **Callers** are nodes apart from the members. Each has its own selector built from the
//!   algorithm, as each node's balancer has in a real cluster: it counts only its own calls in
//!   flight and learns only its own outcomes. CallDirect's caller *i* runs its calls on the
//!   *i*-th member present (no network delay), as a caller that is also a member would; as
//!   the caller itself is not paused with that member, it keeps calling it through a pause.
//! - **Subsetting** (a scenario's `subset = K`, `subset_scheme`): each caller's selector has
//!   only its subset of the members present (`rpc_load_balancer::routing::Subsetting`, with
//!   the caller's index among the callers and the caller count), recomputed when a member
//!   joins or leaves; its heartbeat and CPU poller watch only those members. Unset, every
//!   caller has every member.
//! - **Members** serve up to `capacity` calls at once; further calls wait in a FIFO queue.
//!   A service time is drawn when service starts (lognormal or exponential, × the member's
//!   slow factor, × a straggler factor if drawn) and does not depend on how many calls the
//!   member serves (no contention between a member's slots, no CPU sharing between members).
//! - **The network** adds a fixed delay each way, with no loss, no reordering and no
//!   bandwidth limit.
//! - **Open loop**: Poisson arrivals at each caller, at an equal share of the total rate; a
//!   call's issue does not wait for earlier calls. **Closed loop**: `tasks` tasks spread
//!   evenly over the callers, each issuing its next call as soon as the last ended.
//! - **Timeouts**: a call without a reply within the timeout is a timeout error for its
//!   caller (its pick is released with that outcome), and the caller cancels it, as the
//!   library does: the cancel takes the network delay, and the member then drops the call
//!   from its queue or stops serving it. There are no retries, unless the scenario has
//!   `[retries]` ([`scenario::Retries`], issue 22): then every call is idempotent, and one
//!   failed by a `fail` event (a failure of the retryable kind) goes to a member it has not
//!   tried, within its first deadline, as its caller's retry budget — the library's account,
//!   `rpc_load_balancer::testkit::RetryBudgetKit` — allows (picked without its key). No
//!   call is hedged, unless the scenario has `[hedging]` ([`scenario::Hedging`], issue 22):
//!   then a call with no reply when its caller's `HedgePolicy` says (the library's decisions,
//!   `rpc_load_balancer::testkit::HedgeKit`) is sent once more to another member as the
//!   caller's hedge budget allows; the first reply wins and the other copy is cancelled, as a
//!   timed-out call is (see the `sim::hedge` module for the model's simplifications).
//! - **Faults**: a paused member serves nothing (calls in service stand still, arrivals
//!   queue) and answers no heartbeat and no CPU poll; a failing member answers a share of its
//!   calls at once with an error (`ServiceUnavailable`), using no capacity; a slow member's
//!   new calls take `factor` × longer.
//! - **Heartbeats**, as a node runs them: each caller pings the members every interval (at
//!   its own phase), one ping pending per member at a time. A ping unanswered for the
//!   heartbeat timeout stops that caller's session to the member: the member leaves the
//!   caller's members and the caller's calls in flight to it fail at once
//!   (`ServiceUnavailable`; the member still serves them when it can). A paused member is so
//!   dropped 1 timeout to 1 timeout + 1 interval after its pause, and one that resumes within
//!   the timeout is not dropped. When it resumes, the callers that dropped it get it back at
//!   once (their redial, pending while it was paused, completes). Only members that a
//!   scenario pauses are watched (the others always answer). Joins and leaves of the
//!   schedule reach every caller at once.
//! - **CPU readings** (LeastCpu): a member's node samples its utilization (busy slots ÷
//!   capacity over the last sampling interval, as `rpclb demo`'s capacity-limited function
//!   reports it) every `cpu_sample_interval_ms` (default 1 s) at its own phase; each caller's poller fetches every answering member's
//!   latest sample every `poll_interval`, first at a random phase of it, or after the
//!   `poll_startup_jitter` in a cold start. Readings reach the selector as the CPU slot of the
//!   member's view with their age, exactly as the balancer's Poller stores them.
//! - **Load reports**: every reply (a result or a failure; not a timeout, a cancel or a
//!   call failed by a stopped session) carries the replying member's load as a serving node
//!   reports it (`rpc_load_balancer::LoadReport`), made when the member sends it: calls in
//!   flight (for the balancer and on the node alike: queued or in service, the replying call
//!   not counted), calls finished and of those failed in the last whole second of virtual
//!   time (its qps and eps), its latest utilization sample as its CPU (none before its first
//!   sample), and no application utilization. Every member's node samples, whatever the
//!   algorithm. The caller's selector gets it as a balancer's does (the test kit's
//!   `complete_with_report`: kept as the member's latest report, and its CPU as the member's
//!   CPU reading, sampled now as far as the caller can tell).
//! - **Keys** (when the scenario has them): each call's key is a Zipf-distributed index
//!   among `count`, as 8 little-endian bytes.
//! - **Measured**: calls issued in the window `[warm-up, warm-up + measure)`, followed to
//!   their end; the run then stops issuing and ends when they have all ended.

#![warn(missing_docs)]

mod queue;
mod random;
pub mod report;
pub mod scenario;
mod sim;
pub mod subsets;
pub mod svg;

pub use report::{
    holds, median, HedgeCounts, Latency, Little, RetryCounts, RunReport, ShareOverTime, Summary,
    QUANTILES,
};
pub use scenario::{LoadPoint, Scenario, ScenarioError, SubsetScheme};
pub use sim::{run, run_with_call_limit, RunError, RunSpec, MAX_CALLS_HELD};
