//! State shared by a node's actors and handles. [`NodeShared`] composes one part per concern,
//! each in its own module: the [`PeerTable`] (connected peers, read lock-free on the call
//! path, and the peers being dialled, refused or leaving), the [`Transport`] state it passes
//! down to the client and serving sides of calls (the function registry, the call table, the
//! limits), the [`BalancerRegistry`], and the node's [`NodeConfig`] shared by `Arc`; beside
//! them the node's stage of life and its event channels. The node answers what the serving
//! side asks of it ([`Serving`], in `serving.rs`).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use futures_util::future::BoxFuture;
use ractor::ActorRef;
use tokio::sync::broadcast;

use super::balancer_registry::BalancerRegistry;
use super::event::{NodeEvent, SessionEvent};
use super::peer_table::{Peer, PeerTable};
use super::NodeConfig;
use crate::control::{ControlReply, ControlRequest};
use crate::transport::{CpuReadings, PeerEndpoints, Transport, TransportConfig};
use crate::wire::RpcMessage;
use crate::{Error, Unavailable};

/// Answers the control requests about a node's balancers (their members, calls in flight and
/// served, LeastCpu scores; start, stop, kill, a Poller crash) for the serving side, which
/// does not know balancers: the node is given one ([`NodeShared::with_balancer_admin`]) by the
/// layer that owns them. Takes the node's state and the request; returns the reply or the
/// error to send.
pub(crate) type BalancerAdmin =
    fn(Arc<NodeShared>, ControlRequest) -> BoxFuture<'static, Result<ControlReply, Error>>;

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
    /// The node's settings, as checked by `Node::start` (or `Node::attach`).
    pub(crate) config: Arc<NodeConfig>,
    /// Where the node is in its life: waits end when it starts shutting down, and a second
    /// `shutdown` waits for the first.
    pub(crate) lifecycle: tokio::sync::watch::Sender<Lifecycle>,
    /// Set once this node's join notice has been handed to a peer (`mesh.rs`).
    pub(crate) announced: AtomicBool,
    /// The NodeServer, for dials made outside the node's own tasks (a client node dials the
    /// node of a join notice from its endpoint).
    pub(crate) server: OnceLock<ActorRef<ractor_cluster::NodeServerMessage>>,
    /// Connected peers, and the peers being dialled, refused or leaving.
    pub(crate) peers: Arc<PeerTable>,
    /// What the client and serving sides of calls work with: the function registry, the
    /// call table, the served counts, the stopped flag, this node's own endpoint, the limits;
    /// it finds peers' endpoints in [`Self::peers`] and answers CPU-reading requests from the
    /// process's cache (`cpu`).
    pub(crate) transport: Arc<Transport>,
    pub(crate) events: broadcast::Sender<NodeEvent>,
    pub(crate) sessions: broadcast::Sender<SessionEvent>,
    /// Balancers started on this node.
    pub(crate) balancers: BalancerRegistry,
    /// Answers the control requests about those balancers for the serving side.
    pub(crate) balancer_admin: BalancerAdmin,
    /// `NodeConfig::tls`, loaded: every dial uses it (`tls::dial`).
    pub(crate) tls: Option<Arc<super::tls::TlsSetup>>,
    /// The node's own listener's connections not authenticated yet (`None` when attached).
    pub(crate) handshakes: Option<Arc<super::preauth::Handshakes>>,
    /// One permit per dial in its handshake (`NodeConfig::max_dials_in_flight`; see
    /// `connect.rs`).
    pub(crate) dial_permits: tokio::sync::Semaphore,
    /// What this node knows of every node of the cluster (`directory.rs`): exchanged and
    /// read in the sparse mesh only.
    pub(crate) directory: super::directory::Directory,
    /// The peers this node's subsetting balancers want sessions to (`subset_dial.rs`).
    pub(crate) wanted: super::subset_dial::WantedPeers,
    /// This run of the node (`incarnation.rs`): random, drawn at start, published to peers.
    pub(crate) incarnation: u64,
}

impl NodeShared {
    pub(crate) fn new(
        name: String,
        listen_addr: String,
        connection_string: Option<String>,
        config: &NodeConfig,
    ) -> Self {
        let peers = Arc::new(PeerTable::default());
        let mut transport = Transport::new(
            name.clone(),
            transport_config(config),
            Arc::clone(&peers) as Arc<dyn PeerEndpoints>,
        );
        transport.cpu_readings = CpuReadings {
            own: |node| crate::cpu::cache().get(node),
            all: crate::cpu::readings,
        };
        transport.serving_load = crate::transport::ServingLoad::new(
            Some(crate::cpu::cache().slot(&name)),
            config.cpu_sample_interval,
        );
        let directory = super::directory::Directory::new(
            &name,
            connection_string.as_deref().unwrap_or_default(),
            directory_incarnation(),
        );
        Self {
            name,
            listen_addr,
            connection_string,
            config: Arc::new(config.clone()),
            lifecycle: tokio::sync::watch::channel(Lifecycle::Running).0,
            announced: AtomicBool::new(false),
            server: OnceLock::new(),
            peers,
            transport: Arc::new(transport),
            events: broadcast::channel(256).0,
            sessions: broadcast::channel(256).0,
            balancers: BalancerRegistry::default(),
            balancer_admin: super::balancer_registry::no_balancer_admin,
            tls: None,
            handshakes: None,
            dial_permits: tokio::sync::Semaphore::new(config.max_dials_in_flight),
            directory,
            wanted: super::subset_dial::WantedPeers::default(),
            incarnation: super::incarnation::draw(),
        }
    }

    /// Makes the control requests about balancers go to `admin` (given by the balancer layer;
    /// without it they are answered with [`Error::BadRequest`]).
    pub(crate) fn with_balancer_admin(mut self, admin: BalancerAdmin) -> Self {
        self.balancer_admin = admin;
        self
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

    /// `Err(ServiceUnavailable { reason: NodeStopped })` (about `node`) once the node is shut
    /// down.
    pub(crate) fn check_running(&self, node: &str) -> Result<(), Error> {
        self.transport.check_running(node)
    }

    /// Whether `addr` (a peer's advertised `host:port`) is one of the configured peers, by
    /// string or, where both parse, by socket address.
    pub(crate) fn is_configured(&self, addr: &str) -> bool {
        let parsed = addr.parse::<std::net::SocketAddr>().ok();
        self.config.peers.iter().any(|peer| {
            peer == addr
                || (parsed.is_some() && peer.parse::<std::net::SocketAddr>().ok() == parsed)
        })
    }
}

/// This run's incarnation in the node directory: ms since the Unix epoch now (0 if the clock
/// reads before it). Ordered, unlike the session-handover `incarnation` (random, compared
/// only for equality): a restarted node's directory entry must win over its old one.
fn directory_incarnation() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The transport's settings out of the node's.
fn transport_config(config: &NodeConfig) -> TransportConfig {
    TransportConfig {
        max_payload_bytes: config.max_payload_bytes,
        client: config.client,
        remote_admin: config.remote_admin,
        cpu_reply_error: config.cpu_reply_error,
        cpu_reply_garbage: config.cpu_reply_garbage,
        max_concurrent_calls: config.max_concurrent_calls,
        function_max_concurrent_calls: config.function_max_concurrent_calls.clone(),
    }
}

impl PeerEndpoints for PeerTable {
    fn endpoint(&self, node: &str) -> Result<ActorRef<RpcMessage>, Unavailable> {
        match self.load().get(node) {
            Some(Peer {
                endpoint: Some(endpoint),
                ..
            }) => Ok(endpoint.clone()),
            Some(_) => Err(Unavailable::NoEndpoint),
            None => Err(Unavailable::UnknownNode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_side_answers_cpu_requests_from_the_process_cache() {
        let config = NodeConfig::new("cpu-source", "127.0.0.1:0").cookie("c");
        let shared = NodeShared::new("cpu-source@127.0.0.1".into(), String::new(), None, &config);
        assert_eq!(
            (shared.transport.cpu_readings.own)(&shared.name),
            None,
            "no reading yet"
        );
        crate::cpu::cache().store(&shared.name, 37.5, 20);
        let own = (shared.transport.cpu_readings.own)(&shared.name).expect("the stored reading");
        assert_eq!(own.cpu, 37.5);
        assert!(own.age_ms >= 20, "{own:?}");
        let all = (shared.transport.cpu_readings.all)();
        let held = all.iter().find(|(node, _)| *node == shared.name);
        assert_eq!(held.map(|(_, r)| r.cpu), Some(37.5), "{all:?}");
    }
}
