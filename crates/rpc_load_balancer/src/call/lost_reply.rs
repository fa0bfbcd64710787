//! Test hook (feature `test-hooks`, hidden from the docs): a caller process reads a remote
//! function's failure carrying one set message as a lost connection, so that a test can make
//! a member fail a fraction of its calls with a failure of the retryable kind
//! ([`Unavailable::ConnectionLost`](crate::Unavailable::ConnectionLost): sent, then no reply;
//! the call may have run) without cutting real sessions. Off until set; a node built without
//! the feature has none of it. Not for production.

use std::sync::OnceLock;

use crate::error::RemoteFailure;
use crate::Error;

/// The message read as a lost connection, once set.
static MARKER: OnceLock<String> = OnceLock::new();

/// **Test hook** (feature `test-hooks`; hidden from the docs, not for production): from now
/// on, in this process, a call sent to another node whose function failed with exactly
/// `message` (an error reply, [`Error::Remote`] with the `Failed` kind) is read as if its
/// connection had been lost after the send: the call ends as
/// [`Error::ServiceUnavailable`] with [`Unavailable::ConnectionLost`](crate::Unavailable::ConnectionLost),
/// which a balancer retries for an idempotent function as its
/// [`RetryBudget`](crate::RetryBudget) allows, and the selector counts as the member's
/// failure. Process-wide and set once: returns `true` when `message` is the one in force
/// (set now or before), `false` when another was set before (nothing changes).
#[doc(hidden)]
pub fn read_failures_as_lost_connections(message: &str) -> bool {
    MARKER.get_or_init(|| message.to_string()) == message
}

/// Whether `result`, the decoded reply of a call sent to another node, is to be read as a
/// lost connection (the hook is set and the function failed with its message).
pub(crate) fn is_lost<T>(result: &Result<T, Error>) -> bool {
    // (A reply that is not a function's failure costs one branch: the marker is not read.)
    let Err(Error::Remote {
        failure: RemoteFailure::Failed,
        message,
        ..
    }) = result
    else {
        return false;
    };
    MARKER.get().is_some_and(|marker| message == marker)
}

#[cfg(test)]
mod tests;
