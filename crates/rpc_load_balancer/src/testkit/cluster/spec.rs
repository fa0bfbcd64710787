//! How to start a cluster of child nodes, and starting it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::child::parse_ready_line;
use super::{
    random_cookie, ChildNode, ChildProcess, ClusterError, StderrMode, TestCluster, ENV_COOKIE,
    ENV_LISTEN, ENV_NAME, ENV_PEERS, READY_TIMEOUT,
};

/// How to start a cluster of child nodes: which command, how many, how long to wait for each.
///
/// Child `i` is named `n<i>` (full name `n<i>@127.0.0.1`) and listens on `127.0.0.1:0`; `n0`
/// starts first, then the others at once, each dialling `n0` (the nodes' mesh connects the
/// rest). Every cluster gets a fresh random cookie, so clusters of concurrent tests never
/// join each other.
#[derive(Debug)]
pub struct ClusterSpec {
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, Option<OsString>)>,
    current_dir: Option<PathBuf>,
    nodes: usize,
    ready_timeout: Duration,
}

impl ClusterSpec {
    /// Children that re-run the current test executable to run only the test `test_name` (its
    /// path within the test binary, e.g. `child` or `tests::child`), with the libtest
    /// arguments `<test_name> --exact --nocapture --include-ignored` — mark that test
    /// `#[ignore]` so ordinary runs skip it, and make its body [`run_child`](super::run_child).
    ///
    /// Errors: [`ClusterError::Io`] when the executable's path cannot be read.
    pub fn test(test_name: &str) -> Result<Self, ClusterError> {
        let exe = std::env::current_exe().map_err(|source| ClusterError::Io {
            what: "finding the current executable",
            source,
        })?;
        let mut command = Command::new(exe);
        command.args([test_name, "--exact", "--nocapture", "--include-ignored"]);
        Ok(Self::command(command))
    }

    /// Children run from `command`, e.g. your service binary (`env!("CARGO_BIN_EXE_<name>")`
    /// in its package's integration tests) or an example. Its program, arguments, environment
    /// and working directory are copied for each child (not its stdio, which the harness
    /// sets). The program must serve as [`serve_child`](super::serve_child) does.
    pub fn command(command: Command) -> Self {
        Self {
            program: command.get_program().to_os_string(),
            args: command.get_args().map(|a| a.to_os_string()).collect(),
            envs: command
                .get_envs()
                .map(|(k, v)| (k.to_os_string(), v.map(|v| v.to_os_string())))
                .collect(),
            current_dir: command.get_current_dir().map(|d| d.to_path_buf()),
            nodes: 1,
            ready_timeout: READY_TIMEOUT,
        }
    }

    /// How many children (default 1).
    pub fn nodes(mut self, count: usize) -> Self {
        self.nodes = count;
        self
    }

    /// How long each child may take to print its ready line (default [`READY_TIMEOUT`], 30
    /// s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// One more environment variable for every child.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.envs.push((key.into(), Some(value.into())));
        self
    }

    /// The command for child `name`.
    fn command_for(&self, name: &str, cookie: &str, peers: &str) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        for (key, value) in &self.envs {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        if let Some(dir) = &self.current_dir {
            command.current_dir(dir);
        }
        command
            .env(ENV_NAME, name)
            .env(ENV_COOKIE, cookie)
            .env(ENV_LISTEN, "127.0.0.1:0")
            .env(ENV_PEERS, peers);
        command
    }

    /// Starts every child and waits for each ready line (≤ the ready timeout each). Must be
    /// called inside a Tokio runtime. On an error, the children already started are killed.
    ///
    /// Errors: [`ClusterError::Spawn`]; [`ClusterError::Exited`] (a child exited before its
    /// ready line: its status and stderr tail); [`ClusterError::Timeout`].
    pub async fn start(self) -> Result<TestCluster, ClusterError> {
        let cookie = random_cookie();
        let mut children = Vec::with_capacity(self.nodes);
        if self.nodes == 0 {
            return Ok(TestCluster::new(cookie, children));
        }
        let first = self.spawn("n0", &cookie, "")?;
        children.push(self.ready(first).await?);
        let peer = children[0].address().to_string();
        let mut starting = Vec::with_capacity(self.nodes - 1);
        for i in 1..self.nodes {
            starting.push(self.spawn(&format!("n{i}"), &cookie, &peer)?);
        }
        for process in starting {
            children.push(self.ready(process).await?);
        }
        Ok(TestCluster::new(cookie, children))
    }

    fn spawn(&self, name: &str, cookie: &str, peers: &str) -> Result<ChildProcess, ClusterError> {
        ChildProcess::spawn(
            self.command_for(name, cookie, peers),
            name,
            StderrMode::Echo,
        )
    }

    async fn ready(&self, mut process: ChildProcess) -> Result<ChildNode, ClusterError> {
        let (name, address) = process
            .wait_line("its ready line", self.ready_timeout, parse_ready_line)
            .await?;
        Ok(ChildNode::new(process, name, address))
    }
}
