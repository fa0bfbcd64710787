//! A running `rpclb node` child: its JSON event lines, signals and exit.

use std::process::ExitStatus;
use std::time::Duration;

use rpc_load_balancer::testkit::cluster::ChildProcess;
use serde_json::Value;

use super::HarnessError;

/// A running `rpclb node` child. Dropping it SIGKILLs and reaps the child.
#[derive(Debug)]
pub struct NodeProcess {
    pub(super) process: ChildProcess,
    pub(super) node: String,
    pub(super) listen: String,
    pub(super) ready: Value,
}

/// `line` as a JSON event line whose `"event"` is `event`.
fn event_line(line: &str, event: &str) -> Option<Value> {
    serde_json::from_str::<Value>(line)
        .ok()
        .filter(|value| value["event"] == event)
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
        self.process.pid()
    }

    /// What the child wrote to stderr so far, when started with
    /// [`NodeSpec::capture_stderr`](super::NodeSpec::capture_stderr) (else empty).
    pub fn stderr(&self) -> String {
        self.process.stderr()
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
        self.process
            .wait_line(&format!("{event:?} event"), timeout, |line| {
                event_line(line, event)
            })
            .await
    }

    /// Every stdout event line not yet consumed, and those arriving within `window` (all of
    /// them, in order; fewer if the child's stdout closes first).
    pub async fn events_within(&mut self, window: Duration) -> Vec<Value> {
        let mut lines = Vec::new();
        let deadline = tokio::time::Instant::now() + window;
        while let Ok(Some(line)) = tokio::time::timeout_at(deadline, self.process.next_line()).await
        {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                lines.push(value);
            }
        }
        lines
    }

    /// SIGKILLs the child now (no cleanup on its side), and reaps it.
    pub async fn kill(&mut self) {
        self.process.kill().await;
    }

    /// Sends SIGKILL without waiting (reap it with [`NodeProcess::kill`]).
    pub(super) fn start_kill(&mut self) {
        self.process.start_kill();
    }

    /// Sends `signal` (e.g. `libc::SIGTERM`, `libc::SIGSTOP`) to the child, unless it was
    /// reaped.
    pub fn signal(&self, signal: i32) {
        let _ = self.process.signal(signal);
    }

    /// Closes the child's stdin, as the kernel does when the process that started it dies;
    /// the child (started with `--exit-with-stdin`) then shuts down.
    pub fn close_stdin(&mut self) {
        self.process.close_stdin();
    }

    /// Waits at most `timeout` for the child to exit.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.process.wait_exit(timeout).await
    }
}
