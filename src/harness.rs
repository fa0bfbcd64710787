//! A small kit for multi-process tests and the demo: start `rpclb node` children on free
//! loopback ports, wait for them to be ready (bounded), and kill them by handle.
//!
//! * Every child listens on `127.0.0.1:0` (unless told a port) and reports its real address in
//!   its ready line.
//! * A [`Cluster`] gets a random cookie, so concurrent clusters never join each other.
//! * A child is SIGKILLed when its [`NodeProcess`] is dropped, and it exits by itself when the
//!   process that started it dies (`--exit-with-stdin`: the harness holds the child's stdin,
//!   and the kernel closes it when the harness dies), so a crashed test leaves no orphans.
//! * A child runs in its own process group: a Ctrl-C at the terminal signals the process that
//!   started it (e.g. `rpclb demo`, which then stops its children), not the children.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::{Node, NodeConfig};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long a child may take to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

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

/// A random cookie for one test's cluster.
pub fn random_cookie() -> String {
    format!("test-{:016x}", rand::random::<u64>())
}

/// How to start one `rpclb node` child.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    capture_stderr: bool,
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

    /// Starts the child from the `rpclb` binary at `bin` and waits (≤ [`READY_TIMEOUT`]) for
    /// its ready line.
    ///
    /// Errors: [`HarnessError::Spawn`], [`HarnessError::Exited`], [`HarnessError::Timeout`].
    pub async fn start(self, bin: impl AsRef<Path>) -> Result<NodeProcess, HarnessError> {
        let bin = bin.as_ref();
        let mut command = Command::new(bin);
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
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if self.capture_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            // Its own process group: a Ctrl-C at the terminal reaches the process that
            // started it (which stops it), not the child directly.
            .process_group(0)
            .kill_on_drop(true);
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", crate::DEFAULT_LOG_FILTER);
        }
        let mut child = command.spawn().map_err(|source| HarnessError::Spawn {
            bin: bin.display().to_string(),
            source,
        })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (tx, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = stdout {
            tokio::spawn(async move {
                let mut reader = BufReader::new(stdout).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    if let Ok(value) = serde_json::from_str::<Value>(&line) {
                        if tx.send(value).is_err() {
                            break;
                        }
                    }
                }
            });
        }
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = child.stderr.take() {
            let stderr = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut reader = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let mut text = stderr.lock().unwrap_or_else(|p| p.into_inner());
                    text.push_str(&line);
                    text.push('\n');
                }
            });
        }
        let pid = child.id().unwrap_or_default();
        let mut process = NodeProcess {
            child,
            stdin,
            lines,
            name: self.name,
            node: String::new(),
            listen: String::new(),
            pid,
            ready: Value::Null,
            stderr,
        };
        let ready = process.wait_event("ready", READY_TIMEOUT).await?;
        process.node = ready["node"].as_str().unwrap_or_default().to_string();
        process.listen = ready["listen"].as_str().unwrap_or_default().to_string();
        process.ready = ready;
        Ok(process)
    }
}

/// A running `rpclb node` child. Dropping it SIGKILLs the child.
#[derive(Debug)]
pub struct NodeProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Value>,
    name: String,
    node: String,
    listen: String,
    pid: u32,
    ready: Value,
    stderr: Arc<Mutex<String>>,
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
    /// [`NodeSpec::capture_stderr`] (else empty).
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

/// Several `rpclb node` children forming one cluster: `n0` first, every other node dialling
/// it (the transitive mode completes the mesh).
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    cookie: String,
    /// The children, `n0`, `n1`, ...
    pub nodes: Vec<NodeProcess>,
}

impl Cluster {
    /// Starts `count` nodes with a fresh random cookie, each with `args` added.
    ///
    /// Errors: as [`NodeSpec::start`].
    pub async fn start(
        bin: impl AsRef<Path>,
        count: usize,
        args: &[&str],
    ) -> Result<Self, HarnessError> {
        let bin = bin.as_ref().to_path_buf();
        let cookie = random_cookie();
        let mut nodes: Vec<NodeProcess> = Vec::with_capacity(count);
        for i in 0..count {
            let mut spec = NodeSpec::new(format!("n{i}"), &cookie);
            if let Some(first) = nodes.first() {
                spec = spec.peer(first.addr());
            }
            for arg in args {
                spec = spec.arg(*arg);
            }
            nodes.push(spec.start(&bin).await?);
        }
        Ok(Self { bin, cookie, nodes })
    }

    /// Starts one node per entry of `args` (node `i` gets `args[i]`), with a fresh random
    /// cookie, `n0` first and the others dialling it.
    ///
    /// Errors: as [`NodeSpec::start`].
    pub async fn start_each(bin: impl AsRef<Path>, args: &[&[&str]]) -> Result<Self, HarnessError> {
        let bin = bin.as_ref().to_path_buf();
        let cookie = random_cookie();
        let mut nodes: Vec<NodeProcess> = Vec::with_capacity(args.len());
        for (i, node_args) in args.iter().enumerate() {
            let mut spec = NodeSpec::new(format!("n{i}"), &cookie);
            if let Some(first) = nodes.first() {
                spec = spec.peer(first.addr());
            }
            for arg in *node_args {
                spec = spec.arg(*arg);
            }
            nodes.push(spec.start(&bin).await?);
        }
        Ok(Self { bin, cookie, nodes })
    }

    /// SIGKILLs every child and reaps it (dropping the cluster kills them too, without waiting).
    pub async fn shutdown(mut self) {
        // All at once, so no survivor spends its last moments redialling the others.
        for node in &mut self.nodes {
            let _ = node.child.start_kill();
        }
        for node in &mut self.nodes {
            node.kill().await;
        }
    }

    /// The cluster's cookie.
    pub fn cookie(&self) -> &str {
        &self.cookie
    }

    /// The `rpclb` binary the cluster runs.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// Full names of the children.
    pub fn names(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.node().to_string()).collect()
    }

    /// Starts a node in this process named `name`, connects it to the cluster and waits
    /// (≤ `timeout`) until every child is connected.
    ///
    /// Errors: [`HarnessError::Node`] if the node cannot start, connect or see every child.
    pub async fn join(&self, name: &str, timeout: Duration) -> Result<Node, HarnessError> {
        self.join_with(NodeConfig::new(name, "127.0.0.1:0"), timeout)
            .await
    }

    /// [`Cluster::join`] with a node built from `config` (its cookie is set to the cluster's),
    /// e.g. to sample its CPU as often as the children do.
    ///
    /// Errors: as [`Cluster::join`].
    pub async fn join_with(
        &self,
        config: NodeConfig,
        timeout: Duration,
    ) -> Result<Node, HarnessError> {
        let node = Node::start(config.cookie(&self.cookie)).await?;
        if let Some(first) = self.nodes.first() {
            node.connect(first.addr()).await?;
        }
        node.wait_for_peers(self.nodes.len(), timeout).await?;
        Ok(node)
    }
}

/// An actor standing in for a member on another node, for single-process tests and benches
/// of selection: it is joined to a balancer's pg group under a member name
/// (`rpc_load_balancer/<balancer>/stand-in<i>@127.0.0.1`) and never expects a call.
#[derive(Debug)]
pub struct StandIn;

impl ractor::Actor for StandIn {
    type Msg = rpc_load_balancer::RpcMessage;
    type State = ();
    type Arguments = ();
    async fn pre_start(
        &self,
        _: ractor::ActorRef<rpc_load_balancer::RpcMessage>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

/// The full node name of stand-in `i`.
pub fn stand_in_node(i: usize) -> String {
    format!("stand-in{i}@127.0.0.1")
}

/// Spawns stand-in members `ids` of `balancer` and joins them to its group; stop an actor to
/// make its member leave.
///
/// Errors: the spawn error (e.g. a stand-in of that name already runs).
pub async fn join_stand_ins(
    balancer: &str,
    ids: impl IntoIterator<Item = usize>,
) -> Result<Vec<ractor::ActorRef<rpc_load_balancer::RpcMessage>>, ractor::SpawnErr> {
    let mut actors = Vec::new();
    for i in ids {
        let name = format!("rpc_load_balancer/{balancer}/{}", stand_in_node(i));
        let (actor, _) = ractor::Actor::spawn(Some(name), StandIn, ()).await?;
        ractor::pg::join_scoped(
            rpc_load_balancer::SCOPE.to_string(),
            balancer.to_string(),
            vec![actor.get_cell()],
        );
        actors.push(actor);
    }
    Ok(actors)
}
