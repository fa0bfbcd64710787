//! State shared by a node's actors and handles. [`NodeShared`] composes one part per concern,
//! each in its own module: the [`PeerTable`] (connected peers, read lock-free on the call
//! path, and the peers being dialled, refused or leaving), the [`CallTable`] (calls served
//! here, for cancellation), the [`BalancerRegistry`], and the node's [`NodeConfig`] shared by
//! `Arc`; beside them the function registry, the node's stage of life and its event channels.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

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
    /// Answers the control requests about those balancers for the serving side.
    pub(crate) balancer_admin: crate::endpoint::BalancerAdmin,
    /// The CPU readings the serving side answers with: the process's cache (`cpu`).
    pub(crate) cpu_readings: crate::endpoint::CpuReadings,
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
            config: Arc::new(config.clone()),
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
            balancer_admin: super::balancer_registry::no_balancer_admin,
            cpu_readings: crate::endpoint::CpuReadings {
                own: |node| crate::cpu::cache().get(node),
                all: crate::cpu::readings,
            },
            tls: None,
            handshakes: None,
        }
    }

    /// Makes the control requests about balancers go to `admin` (given by the balancer layer;
    /// without it they are answered with [`Error::BadRequest`]).
    pub(crate) fn with_balancer_admin(mut self, admin: crate::endpoint::BalancerAdmin) -> Self {
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
        self.config.peers.iter().any(|peer| {
            peer == addr
                || (parsed.is_some() && peer.parse::<std::net::SocketAddr>().ok() == parsed)
        })
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
            (shared.cpu_readings.own)(&shared.name),
            None,
            "no reading yet"
        );
        crate::cpu::cache().store(&shared.name, 37.5, 20);
        let own = (shared.cpu_readings.own)(&shared.name).expect("the stored reading");
        assert_eq!(own.cpu, 37.5);
        assert!(own.age_ms >= 20, "{own:?}");
        let all = (shared.cpu_readings.all)();
        let held = all.iter().find(|(node, _)| *node == shared.name);
        assert_eq!(held.map(|(_, r)| r.cpu), Some(37.5), "{all:?}");
    }
}
