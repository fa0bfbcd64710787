//! What can go wrong starting, watching or being a child node.

use std::process::ExitStatus;
use std::time::Duration;

/// What went wrong starting or watching a child process, or running as one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// The program could not be started (not found, not executable...).
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program's path, as given.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The child exited, or closed its stdout, before the awaited line.
    #[error(
        "{name} exited ({}) before {waiting_for}{}; the end of its stderr:\n{stderr_tail}",
        status.map_or_else(|| "status unknown".to_string(), |s| s.to_string()),
        if status.is_some_and(|s| s.success()) && stderr_tail.trim().is_empty() {
            " (a child test run that matched no test exits 0 like this: check the child test's \
             name, and that it is marked #[ignore])"
        } else {
            ""
        }
    )]
    Exited {
        /// The child's label (its node name, e.g. `n1`).
        name: String,
        /// What was awaited, e.g. `its ready line`.
        waiting_for: String,
        /// Its exit status; `None` when it closed its stdout but did not exit within 5 s.
        status: Option<ExitStatus>,
        /// The last lines it wrote to stderr (at most 4 KiB), empty when its stderr was not
        /// captured ([`StderrMode::Inherit`](super::StderrMode::Inherit)).
        stderr_tail: String,
    },
    /// The awaited line did not come in time.
    #[error("{name}: no {waiting_for} within {} ms", timeout.as_millis())]
    Timeout {
        /// The child's label (its node name, e.g. `n1`).
        name: String,
        /// What was awaited.
        waiting_for: String,
        /// The bound.
        timeout: Duration,
    },
    /// The process was not started by the harness: an environment variable the harness sets
    /// is missing or not Unicode.
    #[error(
        "not started by the testkit cluster harness: environment variable {var} is missing or \
         not Unicode (run this child through testkit::cluster::ClusterSpec, not directly)"
    )]
    NotAChild {
        /// The variable, e.g. [`ENV_NAME`](super::ENV_NAME).
        var: &'static str,
    },
    /// An OS call failed: `what` says which (e.g. `current_exe`, `SIGTERM handler`).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The setup function of [`run_child`](super::run_child) failed.
    #[error("the child's setup failed: {0}")]
    Setup(Box<dyn std::error::Error + Send + Sync>),
    /// The node in this process failed (start, connect, waiting for peers).
    #[error(transparent)]
    Node(#[from] crate::Error),
}
