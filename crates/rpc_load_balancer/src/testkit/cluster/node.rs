//! One running child node: its names, its address and its process.

use std::process::ExitStatus;
use std::time::Duration;

use super::{ChildProcess, ClusterError};

/// A running child node of a [`TestCluster`](super::TestCluster). Dropping it SIGKILLs and
/// reaps the child.
#[derive(Debug)]
pub struct ChildNode {
    process: ChildProcess,
    name: String,
    address: String,
}

impl ChildNode {
    pub(super) fn new(process: ChildProcess, name: String, address: String) -> Self {
        Self {
            process,
            name,
            address,
        }
    }

    /// The child's full node name, e.g. `n1@127.0.0.1` (what [`Node::call`](crate::Node::call)
    /// takes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `ip:port` the child listens on (the real port).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILLs the child (a crash: no drain, sessions cut) and reaps it (≤ 5 s). Returns its
    /// exit status, `None` if it was not reaped in time.
    pub async fn kill(&mut self) -> Option<ExitStatus> {
        self.process.kill().await
    }

    /// Stops the child gracefully: SIGTERM, then waits at most `timeout` while it shuts its
    /// node down (balancers drain); past it, SIGKILLs it.
    ///
    /// Errors: [`ClusterError::Timeout`] (it was killed), [`ClusterError::Io`].
    pub async fn terminate(&mut self, timeout: Duration) -> Result<ExitStatus, ClusterError> {
        self.process.terminate(timeout).await
    }

    /// Stops the child (SIGSTOP), as a hung process: its sessions stay open but nothing is
    /// answered, so heartbeats and calls to it time out.
    ///
    /// Errors: the `kill(2)` error.
    pub fn pause(&self) -> std::io::Result<()> {
        self.process.pause()
    }

    /// Continues a paused child (SIGCONT).
    ///
    /// Errors: the `kill(2)` error.
    pub fn resume(&self) -> std::io::Result<()> {
        self.process.resume()
    }

    /// What the child wrote to stderr so far (also echoed to this process's stderr with a
    /// `[n1] ` prefix).
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }

    /// The child's process, for what the handle does not offer (other signals, its stdout
    /// lines after the ready line, closing its stdin).
    pub fn process_mut(&mut self) -> &mut ChildProcess {
        &mut self.process
    }
}
