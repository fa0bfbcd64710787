//! The node: one per OS process. It runs (or attaches to) a ractor_cluster `NodeServer`,
//! serves the remote functions registered on it, keeps a table of connected peers, and makes
//! direct calls to a node by name.
//!
//! Start order: the NodeServer listens, the rpc endpoint joins the `@endpoints` pg group, the
//! ClusterManager subscribes to session events and pg changes, then configured peers are
//! dialled in the background. A peer being down never fails [`Node::start`].

mod balancer_registry;
mod cluster;
mod config;
mod connect;
mod directory;
mod event;
pub(crate) mod forward;
mod gossip;
mod heartbeat;
mod incarnation;
mod keep_peer;
pub(crate) mod labels;
mod listener;
mod mesh;
mod peer_table;
mod preauth;
mod reconnect;
mod refusals;
mod serving;
pub(crate) mod shared;
mod shutdown;
mod start;
mod stream;
mod subset_dial;
mod tls;
mod version;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

pub use config::{
    NodeConfig, DEFAULT_MAX_DIALS_IN_FLIGHT, DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_CAP_BYTES,
};
pub use event::NodeEvent;
pub use forward::{ForwardedEvent, Forwarding, ForwardingEnd};
pub use labels::{Labels, MAX_LABELS, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES};
pub use preauth::{DEFAULT_HANDSHAKE_FRAME_LIMIT, DEFAULT_MAX_HANDSHAKES};
pub use tls::TlsConfig;

pub(crate) use balancer_registry::{BalancerRegistry, RegisteredBalancer};
pub(crate) use mesh::on_joined;

use crate::call;
use crate::control::{ControlReply, ControlRequest};
use crate::function::RemoteFunction;
use crate::wire::RpcMessage;
use crate::Error;
use cluster::ClusterMsg;
use shared::NodeShared;

/// A running node. Cheap to clone; all clones are the same node.
///
/// ```
/// use rpc_load_balancer::{FunctionError, Node, NodeConfig, RemoteFunction};
///
/// struct Greet;
/// impl RemoteFunction for Greet {
///     const NAME: &'static str = "greet";
///     type Args = String;
///     type Reply = String;
///     async fn call(&self, who: String) -> Result<String, FunctionError> {
///         Ok(format!("hello, {who}"))
///     }
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), rpc_load_balancer::Error> {
/// let node = Node::start(NodeConfig::new("docs", "127.0.0.1:0").cookie("secret")).await?;
/// node.register(Greet)?;
/// // Any node can now call `greet` here by name; this one calls itself.
/// let reply = node.call::<Greet>(node.name(), "ractor".to_string()).await?;
/// assert_eq!(reply, "hello, ractor");
/// node.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Node {
    inner: Arc<NodeInner>,
}

struct NodeInner {
    shared: Arc<NodeShared>,
    server: ActorRef<NodeServerMessage>,
    owns_server: bool,
    endpoint: ActorRef<RpcMessage>,
    manager: ActorRef<ClusterMsg>,
    dialers: Mutex<Vec<JoinHandle<()>>>,
    /// The CPU sampling task (`cpu::sampler`), aborted at shutdown.
    sampler: Mutex<Option<JoinHandle<()>>>,
    shut_down: AtomicBool,
    /// What the shutdown's stop of each balancer reported, sorted by balancer.
    drains: Mutex<Vec<crate::control::DrainReport>>,
}

impl NodeInner {
    /// Stops the CPU sampling task (the node's last reading then ages in the cache).
    fn stop_sampling(&self) {
        let task = self
            .sampler
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }
}

impl Drop for NodeInner {
    fn drop(&mut self) {
        // Normally done by `Node::shutdown`; a dropped node must not keep sampling.
        self.stop_sampling();
    }
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("name", &self.inner.shared.name)
            .field("listen_addr", &self.inner.shared.listen_addr)
            .finish_non_exhaustive()
    }
}

impl Node {
    pub(crate) fn shared(&self) -> Arc<NodeShared> {
        Arc::clone(&self.inner.shared)
    }

    /// The node's shared state, borrowed.
    pub(crate) fn state(&self) -> &Arc<NodeShared> {
        &self.inner.shared
    }

    /// This node's full name, `name@host`.
    pub fn name(&self) -> &str {
        &self.inner.shared.name
    }

    /// The `ip:port` this node listens on, with the real port when it was started on port 0;
    /// empty for an attached node.
    pub fn listen_addr(&self) -> &str {
        &self.inner.shared.listen_addr
    }

    /// The ractor_cluster `NodeServer` this node runs on.
    pub fn server(&self) -> &ActorRef<NodeServerMessage> {
        &self.inner.server
    }

    /// Serves `function` on this node from now on. Register before joining balancers, so this
    /// node is never picked for a function it does not have yet.
    ///
    /// Errors: [`Error::DuplicateFunction`] if a function of that `NAME` is registered.
    pub fn register<F: RemoteFunction>(&self, function: F) -> Result<(), Error> {
        self.inner
            .shared
            .transport
            .registry
            .register(function)
            .map_err(|name| Error::DuplicateFunction {
                name: name.to_string(),
            })
    }

    /// Sets the application utilization every reply of this node reports from now on
    /// ([`LoadReport::utilization`](crate::LoadReport::utilization), what gRPC's ORCA calls
    /// application utilization): a load figure of the service's own — 1.0 meaning fully used;
    /// it may exceed 1 — that balancers weighing members by load (`LoadWeighted`) prefer to
    /// the node's CPU. `None` clears it (reports then carry none, and CPU is used). Kept to
    /// 0.001, at most 16.382.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `application_utilization` for a negative or
    /// non-finite value; the figure reported does not change.
    pub fn set_application_utilization(&self, utilization: Option<f64>) -> Result<(), Error> {
        if let Some(u) = utilization {
            if !u.is_finite() || u < 0.0 {
                return Err(Error::InvalidConfig {
                    option: "application_utilization",
                    reason: format!("must be a finite number ≥ 0, got {u}"),
                });
            }
        }
        let load = &self.inner.shared.transport.serving_load;
        load.set_utilization(utilization);
        Ok(())
    }

    /// Sends a control request to `node` and waits at most `call_timeout` for the answer.
    ///
    /// Errors: as [`Node::call`].
    pub async fn control(
        &self,
        node: &str,
        request: ControlRequest,
    ) -> Result<ControlReply, Error> {
        let shared = &self.inner.shared;
        call::control(
            &shared.transport,
            node,
            &request,
            shared.config.call_timeout,
        )
        .await
    }

    /// The node-name patterns that keep nodes out of a balancer's members unless its filter
    /// names them (`NodeConfig::excluded_node_patterns`; see [`crate::filter::matches`]).
    pub fn excluded_node_patterns(&self) -> &[String] {
        &self.inner.shared.config.excluded_node_patterns
    }

    /// This node's cap in bytes on one encoded call or reply: its
    /// [`NodeConfig::max_payload_bytes`] (default 8 MiB). A function can refuse arguments that
    /// would make a reply over it with
    /// [`FunctionError::bad_request`](crate::FunctionError::bad_request) before doing the work.
    pub fn max_payload_bytes(&self) -> usize {
        self.inner.shared.config.max_payload_bytes
    }

    /// How often this node samples its CPU: its
    /// [`NodeConfig::cpu_sample_interval`] (default 1,000 ms).
    pub fn cpu_sample_interval(&self) -> Duration {
        self.inner.shared.config.cpu_sample_interval
    }

    /// This node's labels ([`NodeConfig::label`]), as every peer learns them.
    pub fn labels(&self) -> Labels {
        self.inner.shared.config.labels.clone()
    }

    /// The labels of the connected peer `node` (full name), once this node has learnt them
    /// (asked when its session came up; see [`Labels`]); `None` while they are not known, or
    /// when `node` is not a connected peer. A peer older than labels has none (empty).
    pub fn labels_of(&self, node: &str) -> Option<Labels> {
        self.inner.shared.peers.labels_of(node)
    }

    /// A watch bumped whenever a peer's labels become known or are forgotten (the value
    /// counts the changes).
    pub fn watch_labels(&self) -> watch::Receiver<u64> {
        self.inner.shared.peers.watch_labels()
    }

    /// Full names of the connected peers, sorted (this node not included).
    pub fn nodes(&self) -> Vec<String> {
        self.inner.shared.peers.node_list()
    }

    /// A watch of [`Node::nodes`]: changes whenever a peer comes up or goes down.
    pub fn watch_nodes(&self) -> watch::Receiver<Arc<[String]>> {
        self.inner.shared.peers.watch_node_list()
    }

    /// A stream of [`NodeEvent`]s from now on (a receiver that falls 256 events behind skips
    /// the oldest, see `tokio::sync::broadcast`). To an actor as messages:
    /// [`Node::forward_events_to`].
    pub fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.inner.shared.events.subscribe()
    }

    /// Dials `addr` (`host:port`) now and waits until a session to it is ready, at most
    /// `NodeConfig::connect_timeout` (5 s) — and before that, while the node has
    /// `NodeConfig::max_dials_in_flight` dials in their handshake, at most as long again for
    /// a free dial slot. Returns the peer's full name; at once if it is already connected.
    ///
    /// Errors: [`Error::ConnectFailed`] with what was seen (TCP refused, TLS handshake failed,
    /// handshake rejected because of a wrong cookie, a duplicate node name or TLS on one side
    /// only, no answer, no dial slot came free); [`Error::WireVersion`] when the peer speaks
    /// another wire version (it is refused, see docs/reference/wire-compatibility.md).
    pub async fn connect(&self, addr: &str) -> Result<String, Error> {
        let shared = &self.inner.shared;
        connect::connect(
            shared,
            &self.inner.server,
            addr,
            shared.config.connect_timeout,
        )
        .await
    }

    /// Waits until at least `count` peers are connected, at most `timeout`.
    ///
    /// Errors: [`Error::PeersNotReady`] with how many were connected at the deadline.
    pub async fn wait_for_peers(&self, count: usize, timeout: Duration) -> Result<(), Error> {
        let mut nodes = self.watch_nodes();
        let reached = tokio::time::timeout(timeout, nodes.wait_for(|n| n.len() >= count)).await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(Error::PeersNotReady {
                wanted: count,
                connected: self.nodes().len(),
                timeout,
            }),
        }
    }
}
