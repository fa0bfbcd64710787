//! The kind of failure a failing `work` node's calls end with (`WorkFault::fail_kind`,
//! `rpclb demo --fail-kind`): an error reply of the function (never retried, the lab's `fail`
//! without `[retries]`), or a failure of the retryable kind (the lab's `fail` with
//! `[retries]`), played through the library's `test-hooks` hook
//! `read_failures_as_lost_connections`: the node fails the call with [`LOST_CONNECTION`] and
//! a caller that set the hook to that message reads it as a connection lost after the send
//! (`ServiceUnavailable`, `ConnectionLost`), which a balancer retries for an idempotent
//! function as its retry budget allows. Both fail at once, before the call takes a slot.

use serde::{Deserialize, Serialize};

/// The message of a `work` call failed with the retryable kind: what the twin's callers set
/// the library's hook to.
pub const LOST_CONNECTION: &str =
    "work: failed with the retryable kind (the node's failing fraction): read as a lost connection";

/// How a failing `work` node fails its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum FailKind {
    /// An error reply of the function (`Error::Remote`): it ran, and is never sent again.
    #[default]
    Application,
    /// A failure of the retryable kind: the caller reads it as a lost connection (with the
    /// library's `test-hooks` hook set to [`LOST_CONNECTION`]; without it, as an error reply
    /// of that message).
    Retryable,
}

impl FailKind {
    /// Its name (`application`, `retryable`), as `--fail-kind` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Application => "application",
            Self::Retryable => "retryable",
        }
    }
}
