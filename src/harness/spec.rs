//! How to start one `rpclb node` child, and starting it.

use std::path::Path;
use std::process::Command;

use rpc_load_balancer::testkit::cluster::{ChildProcess, StderrMode};
use serde_json::Value;

use super::{HarnessError, NodeProcess, READY_TIMEOUT};

/// How to start one `rpclb node` child.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    capture_stderr: bool,
    /// `RUST_LOG` of the child (else this process's, else [`crate::DEFAULT_LOG_FILTER`]).
    log_filter: Option<String>,
    name: String,
    cookie: String,
    peers: Vec<String>,
    listen: String,
    args: Vec<String>,
}

impl NodeSpec {
    /// A node called `name` (full name `name@127.0.0.1`) using `cookie`.
    pub fn new(name: impl Into<String>, cookie: impl Into<String>) -> Self {
        Self {
            capture_stderr: false,
            log_filter: None,
            name: name.into(),
            cookie: cookie.into(),
            peers: Vec::new(),
            listen: "127.0.0.1:0".to_string(),
            args: Vec::new(),
        }
    }

    /// Listen on `addr` (`ip:port`) instead of a free loopback port, e.g. to restart a node on
    /// the port it had.
    pub fn listen(mut self, addr: impl Into<String>) -> Self {
        self.listen = addr.into();
        self
    }

    /// Dial `addr` at start (`--peer`).
    pub fn peer(mut self, addr: impl Into<String>) -> Self {
        self.peers.push(addr.into());
        self
    }

    /// How the node samples its CPU (`--cpu-sampler SPEC`): `system`, `process`, `runtime`,
    /// `const:N`, `panic` or `const-then-panic:N:AFTER_MS`.
    pub fn cpu_sampler(self, spec: impl Into<String>) -> Self {
        self.arg("--cpu-sampler").arg(spec)
    }

    /// How often the node samples its CPU, in ms (`--cpu-sample-interval-ms`).
    pub fn cpu_sample_interval_ms(self, ms: u64) -> Self {
        self.arg("--cpu-sample-interval-ms").arg(ms.to_string())
    }

    /// The node answers CPU-reading requests with bytes that don't decode
    /// (`--cpu-reply garbage`).
    pub fn cpu_reply_garbage(self) -> Self {
        self.arg("--cpu-reply").arg("garbage")
    }

    /// The node answers CPU-reading requests with an error (`--cpu-reply error`).
    pub fn cpu_reply_error(self) -> Self {
        self.arg("--cpu-reply").arg("error")
    }

    /// `threads` threads spin in the node for its whole life (`--burn-threads`).
    pub fn burn_threads(self, threads: usize) -> Self {
        self.arg("--burn-threads").arg(threads.to_string())
    }

    /// Mutual TLS with the PEM files `cert` (certificate chain), `key` and `ca` (the
    /// `--tls-cert`, `--tls-key` and `--tls-ca` flags).
    pub fn tls(self, cert: impl AsRef<Path>, key: impl AsRef<Path>, ca: impl AsRef<Path>) -> Self {
        let path = |p: &dyn AsRef<Path>| p.as_ref().display().to_string();
        self.arg("--tls-cert")
            .arg(path(&cert))
            .arg("--tls-key")
            .arg(path(&key))
            .arg("--tls-ca")
            .arg(path(&ca))
    }

    /// Any further `rpclb node` argument, e.g. `.arg("--delay-ms").arg("50")`.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Keeps the child's stderr (its log) for [`NodeProcess::stderr`] instead of passing it
    /// through to this process's stderr.
    pub fn capture_stderr(mut self) -> Self {
        self.capture_stderr = true;
        self
    }

    /// Runs the child with `RUST_LOG` set to `filter` (e.g. `warn,rpc_load_balancer=info`)
    /// instead of this process's `RUST_LOG` (or, without one, [`crate::DEFAULT_LOG_FILTER`]):
    /// with [`capture_stderr`](Self::capture_stderr), to read a log line in a test.
    pub fn log_filter(mut self, filter: impl Into<String>) -> Self {
        self.log_filter = Some(filter.into());
        self
    }

    /// Starts the child from the `rpclb` binary at `bin` and waits (≤ [`READY_TIMEOUT`]) for
    /// its ready line.
    ///
    /// Errors: [`HarnessError::Spawn`], [`HarnessError::Exited`], [`HarnessError::Timeout`].
    pub async fn start(self, bin: impl AsRef<Path>) -> Result<NodeProcess, HarnessError> {
        let mut command = Command::new(bin.as_ref());
        command
            .arg("node")
            .args([
                "--name",
                &self.name,
                "--listen",
                &self.listen,
                "--cookie",
                &self.cookie,
                "--exit-with-stdin",
            ])
            .args(self.peers.iter().flat_map(|p| ["--peer", p.as_str()]))
            .args(&self.args);
        if let Some(filter) = &self.log_filter {
            command.env("RUST_LOG", filter);
        } else if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", crate::DEFAULT_LOG_FILTER);
        }
        let stderr = if self.capture_stderr {
            StderrMode::Capture
        } else {
            StderrMode::Inherit
        };
        let mut process = NodeProcess {
            process: ChildProcess::spawn(command, self.name, stderr)?,
            node: String::new(),
            listen: String::new(),
            ready: Value::Null,
        };
        let ready = process.wait_event("ready", READY_TIMEOUT).await?;
        process.node = ready["node"].as_str().unwrap_or_default().to_string();
        process.listen = ready["listen"].as_str().unwrap_or_default().to_string();
        process.ready = ready;
        Ok(process)
    }
}
