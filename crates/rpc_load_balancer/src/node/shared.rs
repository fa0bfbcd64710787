//! State shared by a node's actors and handles. [`NodeShared`] composes one part per concern,
//! each in its own module: the [`PeerTable`] (connected peers, read lock-free on the call
//! path, and the peers being dialled, refused or leaving), the [`CallTable`] (calls served
//! here, for cancellation) and the [`BalancerRegistry`]; beside them the node's settings, the
//! function registry, the node's stage of life and its event channels.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::broadcast;

use super::balancer_registry::BalancerRegistry;
use super::call_table::{CallTable, ServedStats};
use super::event::{NodeEvent, SessionEvent};
use super::peer_table::{Peer, PeerTable};
use super::NodeConfig;
use crate::function::Registry;
use crate::wire::RpcMessage;
use crate::{Error, Unavailable};

/// A node's stage of life (see `NodeShared::lifecycle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Running,
    ShuttingDown,
    Stopped,
}

/// Everything a node's parts share.
pub(crate) struct NodeShared {
    pub(crate) name: String,
    pub(crate) listen_addr: String,
    /// The `host:port` this node advertises (what peers record for it); `None` when attached.
    pub(crate) connection_string: Option<String>,
    pub(crate) max_payload: usize,
    pub(crate) call_timeout: Duration,
    /// Default retry of routed calls and casts on an empty pool.
    pub(crate) retry: crate::Retry,
    /// `NodeConfig::client`: this node is a client node.
    pub(crate) client: bool,
    /// `NodeConfig::peers`: kept connected by their own dial loops.
    pub(crate) configured_peers: Vec<String>,
    /// `NodeConfig::reconnect_give_up`.
    pub(crate) reconnect_give_up: Duration,
    /// Default of routed calls: run on this node.
    pub(crate) call_directly: bool,
    pub(crate) connect_timeout: Duration,
    pub(crate) dial_backoff_max: Duration,
    pub(crate) remote_admin: bool,
    /// `NodeConfig::cpu_sample_interval`.
    pub(crate) cpu_sample_interval: Duration,
    /// `NodeConfig::cpu_reply_garbage`: answer CPU-reading requests with undecodable bytes.
    pub(crate) cpu_reply_garbage: bool,
    /// `NodeConfig::cpu_reply_error`: answer CPU-reading requests with an error.
    pub(crate) cpu_reply_error: bool,
    /// `NodeConfig::excluded_node_patterns`: applied to balancers' `node_match_list` here.
    pub(crate) excluded_node_patterns: Vec<String>,
    /// Where the node is in its life: waits end when it starts shutting down, and a second
    /// `shutdown` waits for the first.
    pub(crate) lifecycle: tokio::sync::watch::Sender<Lifecycle>,
    /// Set once this node's join notice has been handed to a peer (`mesh.rs`).
    pub(crate) announced: AtomicBool,
    /// The NodeServer, for dials made outside the node's own tasks (a client node dials the
    /// node of a join notice from its endpoint).
    pub(crate) server: OnceLock<ActorRef<ractor_cluster::NodeServerMessage>>,
    /// The functions this node serves.
    pub(crate) registry: Registry,
    /// Connected peers, and the peers being dialled, refused or leaving.
    pub(crate) peers: PeerTable,
    pub(crate) self_endpoint: OnceLock<ActorRef<RpcMessage>>,
    pub(crate) events: broadcast::Sender<NodeEvent>,
    pub(crate) sessions: broadcast::Sender<SessionEvent>,
    /// Calls running here and calls cancelled before they started.
    pub(crate) calls: CallTable,
    pub(crate) served: ServedStats,
    /// Fired when the node's shutdown gives up on the calls made to it directly that are
    /// still running: their [`CallContext`](crate::CallContext)s are cancelled.
    pub(crate) abandoned: Arc<crate::function::Signal>,
    pub(crate) stopped: AtomicBool,
    /// Balancers started on this node.
    pub(crate) balancers: BalancerRegistry,
    /// `NodeConfig::tls`, loaded: every dial uses it (`tls::dial`).
    pub(crate) tls: Option<Arc<super::tls::TlsSetup>>,
    /// The node's own listener's connections not authenticated yet (`None` when attached).
    pub(crate) handshakes: Option<Arc<super::preauth::Handshakes>>,
}

impl NodeShared {
    pub(crate) fn new(
        name: String,
        listen_addr: String,
        connection_string: Option<String>,
        config: &NodeConfig,
    ) -> Self {
        Self {
            name,
            listen_addr,
            connection_string,
            max_payload: config.max_payload_bytes,
            call_timeout: config.call_timeout,
            retry: config.retry,
            client: config.client,
            configured_peers: config.peers.clone(),
            reconnect_give_up: config.reconnect_give_up,
            call_directly: config.call_directly,
            connect_timeout: config.connect_timeout,
            dial_backoff_max: config.dial_backoff_max,
            remote_admin: config.remote_admin,
            cpu_sample_interval: config.cpu_sample_interval,
            cpu_reply_garbage: config.cpu_reply_garbage,
            cpu_reply_error: config.cpu_reply_error,
            excluded_node_patterns: config.excluded_node_patterns.clone(),
            lifecycle: tokio::sync::watch::channel(Lifecycle::Running).0,
            announced: AtomicBool::new(false),
            server: OnceLock::new(),
            registry: Registry::default(),
            peers: PeerTable::default(),
            self_endpoint: OnceLock::new(),
            events: broadcast::channel(256).0,
            sessions: broadcast::channel(256).0,
            calls: CallTable::default(),
            served: ServedStats::default(),
            abandoned: Arc::default(),
            stopped: AtomicBool::new(false),
            balancers: BalancerRegistry::default(),
            tls: None,
            handshakes: None,
        }
    }

    /// Makes every dial of this node use `tls` (`None`: plain TCP).
    pub(crate) fn with_tls(mut self, tls: Option<Arc<super::tls::TlsSetup>>) -> Self {
        self.tls = tls;
        self
    }

    /// Sets the count of the node's own listener's unauthenticated connections.
    pub(crate) fn with_handshakes(
        mut self,
        handshakes: Option<Arc<super::preauth::Handshakes>>,
    ) -> Self {
        self.handshakes = handshakes;
        self
    }

    /// `Err(ServiceUnavailable { reason: NodeStopped })` once the node is shut down.
    pub(crate) fn check_running(&self, node: &str) -> Result<(), Error> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Error::ServiceUnavailable {
                node: node.to_string(),
                reason: Unavailable::NodeStopped,
            });
        }
        Ok(())
    }

    /// The endpoint to send a call for `node` to: our own for our name, else the peer's.
    pub(crate) fn endpoint_of(&self, node: &str) -> Result<ActorRef<RpcMessage>, Error> {
        let unavailable = |reason| Error::ServiceUnavailable {
            node: node.to_string(),
            reason,
        };
        if self.stopped.load(Ordering::Acquire) {
            return Err(unavailable(Unavailable::NodeStopped));
        }
        if node == self.name {
            return self
                .self_endpoint
                .get()
                .cloned()
                .ok_or(unavailable(Unavailable::NodeStopped));
        }
        match self.peers.load().get(node) {
            Some(Peer {
                endpoint: Some(endpoint),
                ..
            }) => Ok(endpoint.clone()),
            Some(_) => Err(unavailable(Unavailable::NoEndpoint)),
            None => Err(unavailable(Unavailable::UnknownNode)),
        }
    }

    /// Whether `addr` (a peer's advertised `host:port`) is one of the configured peers, by
    /// string or, where both parse, by socket address.
    pub(crate) fn is_configured(&self, addr: &str) -> bool {
        let parsed = addr.parse::<std::net::SocketAddr>().ok();
        self.configured_peers.iter().any(|peer| {
            peer == addr
                || (parsed.is_some() && peer.parse::<std::net::SocketAddr>().ok() == parsed)
        })
    }
}
