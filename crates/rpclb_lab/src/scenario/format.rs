//! The scenario format: what a TOML file says (serde types; absent fields take the defaults
//! of `defaults.rs`).

use serde::{Deserialize, Serialize};

use super::defaults;

/// A scenario as its file says it, defaults filled in. Check it with
/// [`Scenario::validate`] ([`Scenario::parse`] does).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Its name (`uniform`, ...): lowercase letters, digits and `-`.
    pub name: String,
    /// What it shows, one sentence.
    #[serde(default)]
    pub description: String,
    /// Members (member `i` is node `m{i:05}@lab`), counting those that join later.
    #[serde(default = "defaults::members")]
    pub members: usize,
    /// Caller nodes, each with its own selector (default 4).
    #[serde(default = "defaults::callers")]
    pub callers: usize,
    /// Calls a member serves at once (default 8); more wait in its FIFO queue.
    #[serde(default = "defaults::capacity")]
    pub capacity: u32,
    /// The service time of a call on a healthy member.
    #[serde(default)]
    pub service: Service,
    /// Network delay each way between a caller and a member, µs (default 50).
    #[serde(default = "defaults::network_delay_us")]
    pub network_delay_us: f64,
    /// The call timeout, ms (default 1,000): past it the call is an error for its caller,
    /// which cancels it (the member drops it when the cancel arrives).
    #[serde(default = "defaults::timeout_ms")]
    pub timeout_ms: f64,
    /// Simulated seconds before measuring (default 10).
    #[serde(default = "defaults::warmup_s")]
    pub warmup_s: f64,
    /// Simulated seconds measured (default 60).
    #[serde(default = "defaults::measure_s")]
    pub measure_s: f64,
    /// How callers notice a member that answers nothing.
    #[serde(default)]
    pub heartbeat: Heartbeat,
    /// How often each member's node samples its utilization, the reading LeastCpu's pollers
    /// fetch, ms (default 1,000: the library's `cpu_sample_interval`; `rpclb demo`'s nodes
    /// sample every 200). Left out of a report's scenario when it is the default.
    #[serde(
        default = "defaults::cpu_sample_interval_ms",
        skip_serializing_if = "defaults::is_cpu_sample_interval_ms"
    )]
    pub cpu_sample_interval_ms: f64,
    /// The loads each algorithm runs under.
    #[serde(default)]
    pub load: Load,
    /// Routing keys: absent, calls carry none (HashRing then routes at random).
    #[serde(default)]
    pub keys: Option<Keys>,
    /// A share of every member's calls that take longer.
    #[serde(default)]
    pub stragglers: Option<Stragglers>,
    /// `true`: every member and caller starts at the run's start, so LeastCpu's first readings
    /// come after its `poll_startup_jitter`; `false` (default): the cluster has run for long,
    /// each caller's polls are at a random phase of `poll_interval`.
    #[serde(default)]
    pub cold_start: bool,
    /// Deterministic subsetting: each caller balances over only this many members (`K`,
    /// at least 1), its subset of the members present, recomputed whenever one joins or
    /// leaves (caller index: its index among the callers; caller count: `callers`). Absent
    /// (default): every caller balances over every member. Not for HashRing nor CallDirect
    /// (the run fails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset: Option<usize>,
    /// How the subsets are chosen (needs `subset`): `"aperture"` (default), `"rounds"` or
    /// `"rendezvous"` (`rpc_load_balancer::routing::SubsetScheme`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset_scheme: Option<SubsetScheme>,
    /// Members that differ from the others.
    #[serde(default)]
    pub member: Vec<MemberSpec>,
    /// Faults and joins, in simulated time.
    #[serde(default)]
    pub event: Vec<Event>,
    /// Retries of idempotent calls under a budget (issue 22); absent (default): no call is
    /// sent twice. Left out of a report's scenario when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<super::Retries>,
    /// Hedged calls (issue 22); absent (default): no call is sent twice for being slow. Left
    /// out of a report's scenario when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedging: Option<super::Hedging>,
}

/// A subsetting scheme, by its name in a scenario file (see
/// `rpc_load_balancer::routing::SubsetScheme` for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubsetScheme {
    /// Finagle's deterministic aperture (ring coordinates): the library's default.
    #[default]
    Aperture,
    /// The Google SRE book's rounds of callers over per-round shuffles.
    Rounds,
    /// gRFC A68's rendezvous ranking.
    Rendezvous,
}

impl SubsetScheme {
    /// Every scheme, the default first.
    pub const ALL: [SubsetScheme; 3] = [
        SubsetScheme::Aperture,
        SubsetScheme::Rounds,
        SubsetScheme::Rendezvous,
    ];

    /// The library's scheme.
    pub fn library(self) -> rpc_load_balancer::routing::SubsetScheme {
        use rpc_load_balancer::routing::SubsetScheme as S;
        match self {
            SubsetScheme::Aperture => S::Aperture,
            SubsetScheme::Rounds => S::Rounds,
            SubsetScheme::Rendezvous => S::Rendezvous,
        }
    }

    /// Its name: `aperture`, `rounds` or `rendezvous`.
    pub fn name(self) -> &'static str {
        self.library().name()
    }

    /// The scheme of that [name](Self::name), or `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A service-time distribution (`kind = "lognormal"` or `"exponential"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Service {
    /// Lognormal: `median_ms · e^(σ·Z)`, Z standard normal.
    Lognormal {
        /// The median, ms (> 0).
        median_ms: f64,
        /// The shape σ (≥ 0).
        sigma: f64,
    },
    /// Exponential with mean `mean_ms` (> 0) (for the queueing-theory checks).
    Exponential {
        /// The mean, ms.
        mean_ms: f64,
    },
}

impl Default for Service {
    fn default() -> Self {
        Service::Lognormal {
            median_ms: 1.0,
            sigma: 0.5,
        }
    }
}

impl Service {
    /// The mean service time, ms.
    pub fn mean_ms(&self) -> f64 {
        match *self {
            Service::Lognormal { median_ms, sigma } => median_ms * libm::exp(sigma * sigma / 2.0),
            Service::Exponential { mean_ms } => mean_ms,
        }
    }
}

/// Heartbeats: every caller pings every member every `interval_ms`; a ping unanswered for
/// `timeout_ms` removes the member from that caller's members (and fails that caller's calls
/// in flight to it), and it comes back when it answers again.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// Period, ms (default 1,000).
    pub interval_ms: f64,
    /// How long a ping may go unanswered before the member is removed, ms (default 3,000).
    pub timeout_ms: f64,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Self {
            interval_ms: 1_000.0,
            timeout_ms: 3_000.0,
        }
    }
}

/// The loads of a scenario: each open-loop fraction, then the closed loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Poisson arrivals at these fractions of the capacity of a uniform cluster of the
    /// members present at the start (members × capacity ÷ mean service time), split evenly
    /// over the callers (default `[0.5, 0.85]`).
    #[serde(default = "defaults::open_loop")]
    pub open_loop: Vec<f64>,
    /// Closed loop: this many tasks spread over the callers, each making one call at a time
    /// and the next as soon as it ends (default 16; absent: no closed-loop run).
    #[serde(default = "defaults::closed_loop_tasks")]
    pub closed_loop_tasks: Option<usize>,
}

impl Default for Load {
    fn default() -> Self {
        Self {
            open_loop: defaults::open_loop(),
            closed_loop_tasks: defaults::closed_loop_tasks(),
        }
    }
}

/// Routing keys: each call's key is drawn from Zipf's law over `count` keys.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Keys {
    /// The exponent s (≥ 0; default 1.0; 0 is uniform).
    #[serde(default = "defaults::zipf_s")]
    pub zipf_s: f64,
    /// How many distinct keys (default 100,000).
    #[serde(default = "defaults::key_count")]
    pub count: u64,
}

/// A share of calls on every member that take `factor` × their service time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stragglers {
    /// The share of calls, 0–1.
    pub fraction: f64,
    /// Their service-time multiplier (> 0).
    pub factor: f64,
}

/// A member that differs from the others from the start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberSpec {
    /// Which member (0-based, below `members`).
    pub index: usize,
    /// Its capacity, instead of the scenario's.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Its service-time multiplier (default 1).
    #[serde(default)]
    pub slow_factor: Option<f64>,
}

/// Something that happens to a member at `at_s` (simulated seconds from the start, warm-up
/// included), for `for_s` seconds if given (else for good), again every `every_s` if given.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// When, s from the start (≥ 0).
    pub at_s: f64,
    /// Which member.
    pub member: usize,
    /// What happens.
    pub action: Action,
    /// How long it lasts, s (> 0); absent: to the end. Not for `leave`.
    #[serde(default)]
    pub for_s: Option<f64>,
    /// Repeats with this period, s (> `for_s`); absent: once.
    #[serde(default)]
    pub every_s: Option<f64>,
    /// `slow`: the service-time multiplier (required); `join`: the multiplier for its first
    /// `for_s` seconds (default 1).
    #[serde(default)]
    pub factor: Option<f64>,
    /// `fail`: the share of calls that fail at once (required, 0–1).
    #[serde(default)]
    pub fraction: Option<f64>,
}

/// What an [`Event`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The member answers nothing (calls and heartbeats wait; service stands still).
    Pause,
    /// Its service times are `factor` × the normal ones.
    Slow,
    /// It fails a `fraction` of its calls at once (an error reply, no service).
    Fail,
    /// It joins the cluster (it is no member before); `factor`, `for_s`: slower at first.
    Join,
    /// It leaves the cluster (calls in flight on it still end).
    Leave,
}
