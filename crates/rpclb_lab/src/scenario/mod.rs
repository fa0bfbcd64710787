//! Scenarios: a cluster, its traffic and a schedule of faults, read from TOML (serde) and
//! checked. The built-in ones are the files of `lab/scenarios/`, compiled in.
//!
//! Every field has the default, so a file says only what differs from the baseline
//! cluster (4 members of capacity 8, lognormal service with median 1 ms and σ 0.5, 50 µs
//! network delay each way, 4 callers, call timeout 1 s, heartbeat every 1 s with a 3 s
//! timeout, 10 s warm-up then 60 s measured, open loop at 50 % and 85 % of the cluster's
//! capacity plus a closed loop of 16 tasks). See `docs/explanation/lab.md` for the format.

mod budget;
mod built_in;
mod defaults;
mod format;
mod hedging;
mod load;
mod loads;
mod retries;
mod validate;

pub use budget::{MAX_RUN_CALLS, MAX_SLOTS};
pub use built_in::BUILT_IN;
pub use format::{
    Action, Event, Heartbeat, Keys, Load, MemberSpec, Scenario, Service, Stragglers, SubsetScheme,
};
pub use hedging::Hedging;
pub use loads::LoadPoint;
pub use retries::Retries;

/// A scenario that cannot be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read (not found, not readable, not UTF-8).
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
    /// No built-in scenario has this name (and no such file exists; a name that looks like a
    /// path is [`ScenarioError::Read`] instead).
    #[error("unknown scenario {name:?}: no file of that name, and not one of {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The built-in names.
        known: String,
    },
}
