//! Scenarios: a cluster, its traffic and a schedule of faults, read from TOML (serde) and
//! checked. The built-in ones are the files of `lab/scenarios/`, compiled in.
//!
//! Every field has the default, so a file says only what differs from the baseline
//! cluster (4 members of capacity 8, lognormal service with median 1 ms and σ 0.5, 50 µs
//! network delay each way, 4 callers, call timeout 1 s, heartbeat every 1 s with a 3 s
//! timeout, 10 s warm-up then 60 s measured, open loop at 50 % and 85 % of the cluster's
//! capacity plus a closed loop of 16 tasks). See `docs/explanation/lab.md` for the format.

use serde::{Deserialize, Serialize};

mod validate;

/// The built-in scenarios, by name, in report order (the files of `lab/scenarios/`).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "uniform",
        include_str!("../../../../lab/scenarios/uniform.toml"),
    ),
    (
        "slow-member",
        include_str!("../../../../lab/scenarios/slow-member.toml"),
    ),
    (
        "two-slow",
        include_str!("../../../../lab/scenarios/two-slow.toml"),
    ),
    (
        "uneven-capacity",
        include_str!("../../../../lab/scenarios/uneven-capacity.toml"),
    ),
    (
        "paused-member",
        include_str!("../../../../lab/scenarios/paused-member.toml"),
    ),
    (
        "failing-member",
        include_str!("../../../../lab/scenarios/failing-member.toml"),
    ),
    (
        "stragglers",
        include_str!("../../../../lab/scenarios/stragglers.toml"),
    ),
    (
        "oscillating",
        include_str!("../../../../lab/scenarios/oscillating.toml"),
    ),
    (
        "cold-start",
        include_str!("../../../../lab/scenarios/cold-start.toml"),
    ),
    (
        "new-member",
        include_str!("../../../../lab/scenarios/new-member.toml"),
    ),
    (
        "hot-keys",
        include_str!("../../../../lab/scenarios/hot-keys.toml"),
    ),
    (
        "large",
        include_str!("../../../../lab/scenarios/large.toml"),
    ),
];

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
    /// The call timeout, ms (default 1,000): past it the call is an error for its caller (the
    /// member still serves it).
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
    /// Members that differ from the others.
    #[serde(default)]
    pub member: Vec<MemberSpec>,
    /// Faults and joins, in simulated time.
    #[serde(default)]
    pub event: Vec<Event>,
}

mod defaults {
    pub(super) fn members() -> usize {
        4
    }
    pub(super) fn callers() -> usize {
        4
    }
    pub(super) fn capacity() -> u32 {
        8
    }
    pub(super) fn network_delay_us() -> f64 {
        50.0
    }
    pub(super) fn timeout_ms() -> f64 {
        1_000.0
    }
    pub(super) fn warmup_s() -> f64 {
        10.0
    }
    pub(super) fn measure_s() -> f64 {
        60.0
    }
    pub(super) fn open_loop() -> Vec<f64> {
        vec![0.5, 0.85]
    }
    pub(super) fn closed_loop_tasks() -> Option<usize> {
        Some(16)
    }
    pub(super) fn zipf_s() -> f64 {
        1.0
    }
    pub(super) fn key_count() -> u64 {
        100_000
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

/// Heartbeats: every caller asks every member every `interval_ms`; a member that has not
/// answered for `timeout_ms` is removed from that caller's members, and comes back at its
/// first answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// Period, ms (default 1,000).
    pub interval_ms: f64,
    /// Silence after which a member is removed, ms (default 3,000).
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

/// A scenario that cannot be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not TOML, an unknown field, or a value of the wrong type (toml's message names the
    /// field and the line).
    #[error("scenario {origin}: {message}")]
    Parse {
        /// The file or built-in name.
        origin: String,
        /// toml's message.
        message: String,
    },
    /// A field's value is out of range.
    #[error("scenario {scenario}: {field} {reason}")]
    Invalid {
        /// The scenario's name.
        scenario: String,
        /// The field, as in the file (e.g. `event[1].for_s`).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// No built-in scenario has this name (and no such file exists).
    #[error("unknown scenario {name:?}: neither a file nor one of {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: String,
    },
}

impl Scenario {
    /// Reads a scenario from TOML `text`; `origin` names it in errors.
    ///
    /// Errors: [`ScenarioError::Parse`] for bad TOML, an unknown field or a wrong type;
    /// [`ScenarioError::Invalid`] naming the field for a value out of range.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        scenario.validate()?;
        Ok(scenario)
    }

    /// The built-in scenario `name`, or else the file at path `name`.
    ///
    /// Errors: [`ScenarioError::Unknown`] when it is neither; else as [`Scenario::parse`]
    /// and [`ScenarioError::Read`].
    pub fn load(name: &str) -> Result<Scenario, ScenarioError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) {
            return Scenario::parse(text, name);
        }
        let path = std::path::Path::new(name);
        if !path.exists() {
            return Err(ScenarioError::Unknown {
                name: name.to_string(),
                known: BUILT_IN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: name.to_string(),
            source,
        })?;
        Scenario::parse(&text, name)
    }

    /// Every built-in scenario, parsed.
    ///
    /// Errors: none for the committed files (a test parses them all).
    pub fn built_in() -> Result<Vec<Scenario>, ScenarioError> {
        BUILT_IN
            .iter()
            .map(|(name, text)| Scenario::parse(text, name))
            .collect()
    }

    /// Members present at the start (those with no `join` event).
    pub fn initial_members(&self) -> usize {
        (0..self.members)
            .filter(|m| {
                !self
                    .event
                    .iter()
                    .any(|e| e.member == *m && e.action == Action::Join)
            })
            .count()
    }

    /// The capacity of a uniform cluster of the members present at the start, calls/s:
    /// members × capacity ÷ mean service time (the base of the open-loop fractions).
    pub fn uniform_capacity_per_s(&self) -> f64 {
        self.initial_members() as f64 * f64::from(self.capacity) / (self.service.mean_ms() / 1e3)
    }

    /// Whether the cluster changes during the run (events): its reports then carry shares
    /// per time bucket.
    pub fn changes(&self) -> bool {
        !self.event.is_empty()
    }

    /// The loads to run, in order: each open-loop fraction, then the closed loop.
    pub fn loads(&self) -> Vec<LoadPoint> {
        let mut loads: Vec<LoadPoint> = self
            .load
            .open_loop
            .iter()
            .map(|&fraction| LoadPoint::Open { fraction })
            .collect();
        if let Some(tasks) = self.load.closed_loop_tasks {
            loads.push(LoadPoint::Closed { tasks });
        }
        loads
    }
}

/// One load a scenario runs under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LoadPoint {
    /// Poisson arrivals at `fraction` of [`Scenario::uniform_capacity_per_s`].
    Open {
        /// The fraction (0.5 = 50 %).
        fraction: f64,
    },
    /// `tasks` tasks, each one call at a time.
    Closed {
        /// How many.
        tasks: usize,
    },
}

impl LoadPoint {
    /// A short label: `open 50%`, `closed 16`.
    pub fn label(&self) -> String {
        match self {
            LoadPoint::Open { fraction } => format!("open {}%", libm::round(fraction * 100.0)),
            LoadPoint::Closed { tasks } => format!("closed {tasks}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_scenario_parses_with_its_own_name() {
        let all = Scenario::built_in().unwrap();
        assert_eq!(all.len(), BUILT_IN.len());
        for (scenario, (name, _)) in all.iter().zip(BUILT_IN) {
            assert_eq!(scenario.name, *name);
        }
        let uniform = Scenario::load("uniform").unwrap();
        assert_eq!(uniform.members, 4);
        assert!((uniform.service.mean_ms() - 1.133).abs() < 0.001);
    }

    #[test]
    fn a_bad_field_is_named() {
        let error = Scenario::parse("name = \"x\"\ncapacity = 0\n", "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "capacity"),
            "{error}"
        );
        let error = Scenario::parse("name = \"x\"\ncapasity = 3\n", "t").unwrap_err();
        assert!(error.to_string().contains("capasity"), "{error}");
        let text = "name = \"x\"\n[[event]]\nat_s = 1\nmember = 9\naction = \"pause\"\n";
        let error = Scenario::parse(text, "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "event[0].member"),
            "{error}"
        );
        let text = "name = \"x\"\n[[event]]\nat_s = 1\nmember = 0\naction = \"slow\"\n";
        let error = Scenario::parse(text, "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "event[0].factor"),
            "{error}"
        );
        let error =
            Scenario::parse("name = \"x\"\nmembers = 100000\ncallers = 100\n", "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "callers"),
            "{error}"
        );
        assert!(matches!(
            Scenario::load("no-such-scenario"),
            Err(ScenarioError::Unknown { .. })
        ));
    }
}
