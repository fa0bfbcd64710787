//! What one call of a load run ended with: the serving node or a [`Failure`].

use std::sync::Arc;

use rpc_load_balancer::Error;

/// Why one call failed, as a report counts it: the error's kind and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind, e.g. `request_timeout` ([`Error::kind`] for the library's errors).
    pub kind: String,
    /// The message (the first one of each kind is kept as a sample).
    pub message: String,
}

impl Failure {
    /// A failure of `kind` with `message`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Self::new(error.kind(), error.to_string())
    }
}

/// What one call ended with: the node that served it, or why it failed.
pub type Outcome = Result<Arc<str>, Failure>;
