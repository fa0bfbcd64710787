//! The transport's state on a node: what the client side of a call (`call`) and the serving
//! side (`endpoint`) share — the node's name and the limits they apply, the functions it
//! serves, the calls it is serving ([`CallTable`], for cancellation), the deadlines of the
//! calls it waits on ([`Deadlines`]), the served-call counters and concurrency caps
//! ([`Admission`]), whether the node is stopped, its own endpoint, and what the node above gives it:
//! where a peer's endpoint is ([`PeerEndpoints`]) and the CPU readings it answers with.
//!
//! The node (`node::shared::NodeShared`) holds one [`Transport`] and passes it down; the
//! transport never names the node. What the serving side asks of the node (peer requests,
//! balancer admin) goes up through `endpoint::Serving`, which the node implements.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use ractor::ActorRef;

use crate::control::CpuReading;
use crate::function::{Registry, Signal};
use crate::wire::RpcMessage;
use crate::{Error, Unavailable};

mod admission;
mod call_table;
mod deadlines;
mod serving_load;

pub(crate) use admission::{Admission, Refused};
pub(crate) use call_table::{CallTable, ServedStats};
pub(crate) use deadlines::{Deadlines, Elapsed};
pub(crate) use serving_load::ServingLoad;

/// The settings of a node that the transport applies, copied from its validated config.
#[derive(Debug, Clone)]
pub(crate) struct TransportConfig {
    /// The cap in bytes on one encoded call or reply (`NodeConfig::max_payload_bytes`).
    pub(crate) max_payload_bytes: usize,
    /// Whether the node is a client node (its endpoint also joins the `@clients` group).
    pub(crate) client: bool,
    /// Whether admin control requests from other nodes are carried out.
    pub(crate) remote_admin: bool,
    /// Test hook: answer every CPU-reading request with an error.
    pub(crate) cpu_reply_error: bool,
    /// Test hook: answer every CPU-reading request with bytes that do not decode.
    pub(crate) cpu_reply_garbage: bool,
    /// Most calls served at once (`NodeConfig::max_concurrent_calls`; `None`: no cap).
    pub(crate) max_concurrent_calls: Option<usize>,
    /// Most calls of a function served at once, by name
    /// (`NodeConfig::function_max_concurrent_calls`).
    pub(crate) function_max_concurrent_calls: Vec<(String, usize)>,
}

impl Default for TransportConfig {
    /// `NodeConfig`'s defaults: 8 MiB, every flag off, no concurrency cap.
    fn default() -> Self {
        Self {
            max_payload_bytes: 8 * 1024 * 1024,
            client: false,
            remote_admin: false,
            cpu_reply_error: false,
            cpu_reply_garbage: false,
            max_concurrent_calls: None,
            function_max_concurrent_calls: Vec::new(),
        }
    }
}

/// Where the endpoints of a node's connected peers are: the node's peer table, given to the
/// transport (which does not know peers) by the node.
pub(crate) trait PeerEndpoints: Send + Sync {
    /// The endpoint of the connected peer of full name `node`: `Err(NoEndpoint)` for a peer
    /// whose endpoint is not known yet, `Err(UnknownNode)` for no connected peer of that name.
    fn endpoint(&self, node: &str) -> Result<ActorRef<RpcMessage>, Unavailable>;
}

/// No peers at all: a transport not attached to a node (unit tests).
#[cfg(test)]
pub(crate) struct NoPeers;

#[cfg(test)]
impl PeerEndpoints for NoPeers {
    fn endpoint(&self, _node: &str) -> Result<ActorRef<RpcMessage>, Unavailable> {
        Err(Unavailable::UnknownNode)
    }
}

/// The CPU readings a node answers `CpuReading` and `CpuReadings` with, given by the node
/// (its sampler's cache), which the transport does not know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuReadings {
    /// The reading of the node of this full name, with its age now; `None` while it has none.
    pub(crate) own: fn(&str) -> Option<CpuReading>,
    /// Every reading held, `(node, reading)` sorted by node, with their ages now.
    pub(crate) all: fn() -> Vec<(String, CpuReading)>,
}

/// No CPU reading at all (a transport whose node gave it none).
pub(crate) const NO_CPU_READINGS: CpuReadings = CpuReadings {
    own: |_| None,
    all: Vec::new,
};

/// The transport's state on one node (see the module docs).
pub(crate) struct Transport {
    /// The node's full name.
    pub(crate) name: String,
    /// The same, shared: the name of every call to this node (no allocation per call).
    pub(crate) own_name: Arc<str>,
    /// The limits and flags it applies.
    pub(crate) config: TransportConfig,
    /// The functions this node serves.
    pub(crate) registry: Registry,
    /// Calls running here and calls cancelled before they started.
    pub(crate) calls: CallTable,
    /// The deadlines of the calls this node waits on (replies, runs here): one sweep task
    /// instead of a timer per call.
    pub(crate) deadlines: Deadlines,
    /// Counters of the calls served here (direct and routed, remote and local).
    pub(crate) served: ServedStats,
    /// Fired when the node's shutdown gives up on the calls made to it directly that are
    /// still running: their [`CallContext`](crate::CallContext)s are cancelled.
    pub(crate) abandoned: Arc<Signal>,
    /// Set once the node is shut down: calls are refused with `NodeStopped`.
    pub(crate) stopped: AtomicBool,
    /// This node's own endpoint, once started.
    pub(crate) own_endpoint: OnceLock<ActorRef<RpcMessage>>,
    /// Where peers' endpoints are.
    pub(crate) peers: Arc<dyn PeerEndpoints>,
    /// The CPU readings the serving side answers with.
    pub(crate) cpu_readings: CpuReadings,
    /// This node's load as the serving side measures it for the reports replies carry.
    pub(crate) serving_load: ServingLoad,
    /// The concurrency caps calls served here are admitted under (pushback).
    pub(crate) admission: Admission,
}

impl Transport {
    /// A transport for the node `name` (full name) applying `config`, finding peers' endpoints
    /// in `peers`; it answers CPU-reading requests with none until given `cpu_readings`.
    pub(crate) fn new(
        name: String,
        config: TransportConfig,
        peers: Arc<dyn PeerEndpoints>,
    ) -> Self {
        let admission = Admission::new(
            config.max_concurrent_calls,
            &config.function_max_concurrent_calls,
        );
        Self {
            own_name: Arc::from(name.as_str()),
            name,
            config,
            admission,
            registry: Registry::default(),
            calls: CallTable::default(),
            deadlines: Deadlines::default(),
            served: ServedStats::default(),
            abandoned: Arc::default(),
            stopped: AtomicBool::new(false),
            own_endpoint: OnceLock::new(),
            peers,
            cpu_readings: NO_CPU_READINGS,
            serving_load: ServingLoad::new(None, std::time::Duration::from_secs(1)),
        }
    }

    /// `node` (a full name) shared: this node's own name allocates nothing.
    pub(crate) fn node_name(&self, node: &str) -> Arc<str> {
        if node == &*self.own_name {
            return Arc::clone(&self.own_name);
        }
        Arc::from(node)
    }

    /// Whether the node is shut down.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// `Err(ServiceUnavailable { reason: NodeStopped })` (about `node`) once the node is shut
    /// down.
    pub(crate) fn check_running(&self, node: &str) -> Result<(), Error> {
        if self.is_stopped() {
            return Err(Error::ServiceUnavailable {
                node: node.to_string(),
                reason: Unavailable::NodeStopped,
            });
        }
        Ok(())
    }

    /// The endpoint to send a call for `node` to: our own for our name, else the peer's.
    ///
    /// Errors: [`Error::ServiceUnavailable`] — `NodeStopped` once this node is shut down (or
    /// before its endpoint started), `UnknownNode` / `NoEndpoint` from the peer lookup.
    pub(crate) fn endpoint_of(&self, node: &str) -> Result<ActorRef<RpcMessage>, Error> {
        let unavailable = |reason| Error::ServiceUnavailable {
            node: node.to_string(),
            reason,
        };
        if self.is_stopped() {
            return Err(unavailable(Unavailable::NodeStopped));
        }
        if node == self.name {
            return self
                .own_endpoint
                .get()
                .cloned()
                .ok_or_else(|| unavailable(Unavailable::NodeStopped));
        }
        self.peers.endpoint(node).map_err(unavailable)
    }
}
