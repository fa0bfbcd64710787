//! A started cluster of child nodes, a [`TestCluster`], and joining it from the test's process.

use std::time::Duration;

use super::{ChildNode, ClusterError};
use crate::{Node, NodeConfig};

/// Child nodes started by [`ClusterSpec::start`](super::ClusterSpec::start), all ready.
/// Dropping it SIGKILLs every child still running and reaps them (no zombie, no orphan).
#[derive(Debug)]
pub struct TestCluster {
    cookie: String,
    children: Vec<ChildNode>,
}

impl TestCluster {
    pub(super) fn new(cookie: String, children: Vec<ChildNode>) -> Self {
        Self { cookie, children }
    }

    /// The cluster's cookie (random, `test-` and 16 hex digits).
    pub fn cookie(&self) -> &str {
        &self.cookie
    }

    /// The children, `n0` first.
    pub fn children(&self) -> &[ChildNode] {
        &self.children
    }

    /// The children, to kill, terminate or pause one.
    pub fn children_mut(&mut self) -> &mut [ChildNode] {
        &mut self.children
    }

    /// Child `i` (`n<i>`). Panics when `i` is out of range, as indexing does.
    pub fn child(&mut self, i: usize) -> &mut ChildNode {
        &mut self.children[i]
    }

    /// The children's full node names, `n0@127.0.0.1` first.
    pub fn names(&self) -> Vec<String> {
        self.children.iter().map(|c| c.name().to_string()).collect()
    }

    /// Starts this process's node from `config` (its cookie set to the cluster's), dials `n0`
    /// and waits at most `timeout` until every child is connected. The node is an ordinary
    /// [`Node`]: call a child with [`Node::call`], or start balancers.
    ///
    /// Errors: [`ClusterError::Node`] when the node cannot start
    /// ([`crate::Error::NodeAlreadyRunning`] if one runs in this process), connect, or see
    /// every child in time ([`crate::Error::PeersNotReady`]).
    pub async fn join(&self, config: NodeConfig, timeout: Duration) -> Result<Node, ClusterError> {
        let node = Node::start(config.cookie(&self.cookie)).await?;
        if let Some(first) = self.children.first() {
            node.connect(first.address()).await?;
        }
        node.wait_for_peers(self.children.len(), timeout).await?;
        Ok(node)
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // All at once, then each reaped as it is dropped.
        for child in &mut self.children {
            child.process_mut().start_kill();
        }
    }
}
