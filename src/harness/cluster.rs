//! Several `rpclb node` children forming one cluster, and joining it from this process.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rpc_load_balancer::{Node, NodeConfig};

use super::{random_cookie, HarnessError, NodeProcess, NodeSpec};

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
        Self::start_each(bin, &vec![args; count]).await
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

    /// SIGKILLs every child and reaps it (dropping the cluster does too, one child at a time).
    pub async fn shutdown(mut self) {
        // All at once, so no survivor spends its last moments redialling the others.
        for node in &mut self.nodes {
            node.start_kill();
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
