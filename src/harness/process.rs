//! A running `rpclb node` child: its events, signals and exit.

use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use super::HarnessError;

/// A running `rpclb node` child. Dropping it SIGKILLs the child.
#[derive(Debug)]
pub struct NodeProcess {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    pub(super) lines: mpsc::UnboundedReceiver<Value>,
    pub(super) name: String,
    pub(super) node: String,
    pub(super) listen: String,
    pub(super) pid: u32,
    pub(super) ready: Value,
    pub(super) stderr: Arc<Mutex<String>>,
}

impl NodeProcess {
    /// The node's ready line, e.g. `{"event":"ready","node":..,"listen":..,"pid":..,
    /// "balancers":[..],"peers":[..]}`.
    pub fn ready_line(&self) -> &Value {
        &self.ready
    }

    /// The node's full name, e.g. `n1@127.0.0.1`.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The `ip:port` it listens on.
    pub fn addr(&self) -> &str {
        &self.listen
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// What the child wrote to stderr so far, when started with
    /// [`NodeSpec::capture_stderr`](super::NodeSpec::capture_stderr) (else empty).
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits for the next stdout event line whose `"event"` is `event` (earlier lines are
    /// consumed), at most `timeout`.
    ///
    /// Errors: [`HarnessError::Exited`], [`HarnessError::Timeout`].
    pub async fn wait_event(
        &mut self,
        event: &str,
        timeout: Duration,
    ) -> Result<Value, HarnessError> {
        let waiting_for = format!("{event:?} event");
        let found = tokio::time::timeout(timeout, async {
            while let Some(line) = self.lines.recv().await {
                if line["event"] == event {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(HarnessError::Exited {
                name: self.name.clone(),
                waiting_for,
            }),
            Err(_) => Err(HarnessError::Timeout {
                name: self.name.clone(),
                waiting_for,
                timeout,
            }),
        }
    }

    /// Every stdout event line not yet consumed, and those arriving within `window` (all of
    /// them, in order; fewer if the child's stdout closes first).
    pub async fn events_within(&mut self, window: Duration) -> Vec<Value> {
        let mut lines = Vec::new();
        let deadline = tokio::time::Instant::now() + window;
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, self.lines.recv()).await {
            lines.push(line);
        }
        lines
    }

    /// SIGKILLs the child now (no cleanup on its side), and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`, `libc::SIGSTOP`) to the child.
    pub fn signal(&self, signal: i32) {
        if self.pid != 0 {
            // SAFETY: kill(2) has no memory effects; the pid is our own child's.
            unsafe {
                libc::kill(self.pid as libc::pid_t, signal);
            }
        }
    }

    /// Closes the child's stdin, as the kernel does when the process that started it dies;
    /// the child (started with `--exit-with-stdin`) then shuts down.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits at most `timeout` for the child to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}
