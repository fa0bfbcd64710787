//! What can go wrong starting or watching a child.

use std::time::Duration;

/// What went wrong starting or watching a child.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The binary could not be started.
    #[error("cannot start {bin}: {source}")]
    Spawn {
        /// The binary's path.
        bin: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The child exited or closed stdout before the awaited line.
    #[error("node {name} exited before {waiting_for}")]
    Exited {
        /// The node's name.
        name: String,
        /// What was awaited.
        waiting_for: String,
    },
    /// The awaited line did not come in time.
    #[error("node {name}: no {waiting_for} within {} ms", timeout.as_millis())]
    Timeout {
        /// The node's name.
        name: String,
        /// What was awaited.
        waiting_for: String,
        /// The bound.
        timeout: Duration,
    },
    /// The node in this process failed.
    #[error(transparent)]
    Node(#[from] rpc_load_balancer::Error),
}
