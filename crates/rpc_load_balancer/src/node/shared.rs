//! State shared by a node's actors and handles: the peer table (read lock-free on the call
//! path), the function registry, counters and event channels.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use ractor::{ActorId, ActorRef};
use tokio::sync::{broadcast, watch};

use super::balancer_registry::BalancerRegistry;
use super::call_table::{CallTable, ServedStats};
use super::event::{NodeEvent, SessionEvent};
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

/// One connected peer, as the call path sees it.
#[derive(Clone)]
pub(crate) struct Peer {
    /// The session actor currently carrying traffic to the peer.
    pub(crate) session_id: ActorId,
    /// That session actor (stopped when the peer stops answering heartbeats).
    pub(crate) session: ractor::ActorCell,
    /// The `host:port` the peer advertises.
    pub(crate) connection_string: String,
    /// The peer's rpc endpoint, once its pg membership is known.
    pub(crate) endpoint: Option<ActorRef<RpcMessage>>,
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
    /// Where the node is in its life: waits end when it starts shutting down, and a second
    /// `shutdown` waits for the first.
    pub(crate) lifecycle: tokio::sync::watch::Sender<Lifecycle>,
    /// Peers that announced they are leaving (shutting down after draining).
    pub(crate) left: std::sync::Mutex<std::collections::HashSet<String>>,
    /// When each peer in `left` went down (its last session closed), for [`Self::just_left`].
    pub(crate) left_down_at: Mutex<HashMap<String, std::time::Instant>>,
    /// Peers refused for speaking another wire version, with the error (until one passes the
    /// check).
    pub(crate) refused: Mutex<HashMap<String, (Error, std::time::Instant)>>,
    /// Peers lost uncleanly that a reconnect task is redialling (`reconnect.rs`).
    pub(crate) redialing: Mutex<HashSet<String>>,
    /// `NodeConfig::client`: this node is a client node.
    pub(crate) client: bool,
    /// Peers that are client nodes (seen in the `@clients` pg group): not redialled, not
    /// introduced to other nodes.
    pub(crate) clients: Mutex<HashSet<String>>,
    /// Set once this node's join notice has been handed to a peer (`mesh.rs`).
    pub(crate) announced: AtomicBool,
    /// The NodeServer, for dials made outside the node's own tasks (a client node dials the
    /// node of a join notice from its endpoint).
    pub(crate) server: OnceLock<ActorRef<ractor_cluster::NodeServerMessage>>,
    /// `NodeConfig::peers`: kept connected by their own dial loops.
    pub(crate) configured_peers: Vec<String>,
    /// Set while this node's name is known to be taken by another process (see
    /// `connect.rs`): (no dial before, current backoff).
    name_taken: Mutex<(Option<std::time::Instant>, Duration)>,
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
    pub(crate) registry: Registry,
    pub(crate) peers: ArcSwap<HashMap<String, Peer>>,
    pub(crate) self_endpoint: OnceLock<ActorRef<RpcMessage>>,
    pub(crate) node_list: watch::Sender<Arc<[String]>>,
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
    /// Addresses a dial is in flight to (one at a time per address).
    dialing: Mutex<HashSet<String>>,
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
        config: &super::NodeConfig,
    ) -> Self {
        Self {
            name,
            listen_addr,
            connection_string,
            max_payload: config.max_payload_bytes,
            call_timeout: config.call_timeout,
            retry: config.retry,
            left: Default::default(),
            left_down_at: Default::default(),
            refused: Default::default(),
            redialing: Default::default(),
            client: config.client,
            clients: Default::default(),
            announced: AtomicBool::new(false),
            server: OnceLock::new(),
            configured_peers: config.peers.clone(),
            reconnect_give_up: config.reconnect_give_up,
            name_taken: Mutex::new((None, Duration::ZERO)),
            lifecycle: tokio::sync::watch::channel(Lifecycle::Running).0,
            call_directly: config.call_directly,
            connect_timeout: config.connect_timeout,
            dial_backoff_max: config.dial_backoff_max,
            remote_admin: config.remote_admin,
            cpu_sample_interval: config.cpu_sample_interval,
            cpu_reply_garbage: config.cpu_reply_garbage,
            cpu_reply_error: config.cpu_reply_error,
            excluded_node_patterns: config.excluded_node_patterns.clone(),
            registry: Registry::default(),
            peers: ArcSwap::default(),
            self_endpoint: OnceLock::new(),
            node_list: watch::channel(Arc::from(Vec::new())).0,
            events: broadcast::channel(256).0,
            sessions: broadcast::channel(256).0,
            calls: CallTable::default(),
            served: ServedStats::default(),
            abandoned: Arc::default(),
            stopped: AtomicBool::new(false),
            balancers: BalancerRegistry::default(),
            dialing: Mutex::new(HashSet::new()),
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

    /// `(name, advertised address)` of connected peers other than client nodes, sorted by
    /// name (what a node joining through this one should dial).
    pub(crate) fn peer_addresses(&self) -> Vec<(String, String)> {
        let clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let mut peers: Vec<(String, String)> = self
            .peers
            .load()
            .iter()
            .filter(|(name, _)| !clients.contains(name.as_str()))
            .map(|(name, peer)| (name.clone(), peer.connection_string.clone()))
            .collect();
        peers.sort();
        peers
    }

    /// Names of the connected peers that are client nodes, sorted (the nodes a join notice is
    /// passed on to: see `mesh.rs`).
    pub(crate) fn client_peers(&self) -> Vec<String> {
        let clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let mut found: Vec<String> = self
            .peers
            .load()
            .keys()
            .filter(|name| clients.contains(name.as_str()))
            .cloned()
            .collect();
        found.sort();
        found
    }

    /// Forgets that `name` announced it was leaving: it is back.
    pub(crate) fn forget_left(&self, name: &str) {
        self.left
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
        self.left_down_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// Marks `addr` as being dialled; `false` if a dial to it is already in flight.
    pub(crate) fn begin_dial(&self, addr: &str) -> bool {
        self.dialing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(addr.to_string())
    }

    /// Ends a dial started with [`begin_dial`](Self::begin_dial).
    pub(crate) fn end_dial(&self, addr: &str) {
        self.dialing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(addr);
    }

    /// Why the peer `name` was refused, if it was (see `version.rs`).
    pub(crate) fn refusal(&self, name: &str) -> Option<Error> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .map(|(error, _)| error.clone())
    }

    /// Whether `name` was refused less than `within` ago.
    pub(crate) fn refused_within(&self, name: &str, within: Duration) -> bool {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .is_some_and(|(_, at)| at.elapsed() < within)
    }

    /// How much longer no dial is made because this node's name is taken, if it is.
    pub(crate) fn name_taken_for(&self) -> Option<Duration> {
        let taken = self.name_taken.lock().unwrap_or_else(|p| p.into_inner());
        let left = taken
            .0?
            .saturating_duration_since(std::time::Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Records that a peer has another node of this node's name: no dial for 5 s, doubling
    /// on each repeat up to 5 minutes — longer than the heartbeat timeout, so a hung
    /// predecessor is gone by the first retry. Returns the wait.
    pub(crate) fn note_name_taken(&self) -> Duration {
        let mut taken = self.name_taken.lock().unwrap_or_else(|p| p.into_inner());
        let backoff = (taken.1 * 2).clamp(NAME_TAKEN_FIRST, NAME_TAKEN_MAX);
        *taken = (Some(std::time::Instant::now() + backoff), backoff);
        backoff
    }

    /// A dial succeeded: the name is this node's again.
    pub(crate) fn name_free(&self) {
        *self.name_taken.lock().unwrap_or_else(|p| p.into_inner()) = (None, Duration::ZERO);
    }

    /// Whether `name` is in `set` (one of the name sets above).
    /// Whether `name` announced it was leaving and is still up, or went down less than
    /// `within` ago: a peer that has not seen it go yet may still list it. Past that, a peer
    /// that lists it has seen it come back (restarted under the same name).
    pub(crate) fn just_left(&self, name: &str, within: std::time::Duration) -> bool {
        if !Self::listed(&self.left, name) {
            return false;
        }
        self.left_down_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .is_none_or(|down| down.elapsed() < within)
    }

    pub(crate) fn listed(set: &Mutex<HashSet<String>>, name: &str) -> bool {
        set.lock().unwrap_or_else(|p| p.into_inner()).contains(name)
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

    /// Names of connected peers, sorted.
    pub(crate) fn peer_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.peers.load().keys().cloned().collect();
        names.sort();
        names
    }

    /// The connected peer advertising `connection_string`, if any.
    pub(crate) fn peer_at(&self, matches: impl Fn(&str) -> bool) -> Option<String> {
        self.peers
            .load()
            .iter()
            .find(|(_, peer)| matches(&peer.connection_string))
            .map(|(name, _)| name.clone())
    }

    /// The address this node has on record for the connected peer `name`.
    pub(crate) fn connection_of(&self, name: &str) -> Option<String> {
        self.peers
            .load()
            .get(name)
            .map(|peer| peer.connection_string.clone())
    }
}

/// First pause of all dials once this node's name is found taken.
const NAME_TAKEN_FIRST: Duration = Duration::from_secs(5);

/// Longest pause of all dials while this node's name stays taken.
const NAME_TAKEN_MAX: Duration = Duration::from_secs(300);
