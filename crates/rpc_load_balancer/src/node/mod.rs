//! The node: one per OS process. It runs (or attaches to) a ractor_cluster `NodeServer`,
//! serves the remote functions registered on it, keeps a table of connected peers, and makes
//! direct calls to a node by name.
//!
//! Start order: the NodeServer listens, the rpc endpoint joins the `@endpoints` pg group, the
//! ClusterManager subscribes to session events and pg changes, then configured peers are
//! dialled in the background. A peer being down never fails [`Node::start`].

mod balancer_registry;
mod call_table;
mod cluster;
mod config;
mod connect;
mod event;
mod heartbeat;
mod keep_peer;
mod listener;
mod mesh;
mod peer_table;
mod preauth;
mod reconnect;
mod refusals;
pub(crate) mod shared;
mod stream;
mod tls;
mod version;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::NodeServerMessage;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

pub use config::{NodeConfig, DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_CAP_BYTES};
pub use event::NodeEvent;
pub use preauth::{DEFAULT_HANDSHAKE_FRAME_LIMIT, DEFAULT_MAX_HANDSHAKES};
pub use tls::TlsConfig;

pub(crate) use mesh::on_joined;

use crate::call::{self, Call};
use crate::control::{ControlReply, ControlRequest};
use crate::endpoint::RpcEndpoint;
use crate::function::RemoteFunction;
use crate::wire::{endpoint_name, RpcMessage};
use crate::Error;
use cluster::{ClusterArgs, ClusterManager, ClusterMsg, SUBSCRIPTION_ID};
use shared::{Lifecycle, NodeShared};

/// Set while a `Node` runs in this process: pg membership is process-wide, so a process is
/// one node.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// The running node, for [`Node::current`].
static CURRENT: std::sync::RwLock<Option<Node>> = std::sync::RwLock::new(None);

/// Holds the process's node slot; gives it back when dropped unless kept.
struct Claim(bool);

impl Claim {
    fn take() -> Result<Self, Error> {
        RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Self(true))
            .map_err(|_| Error::NodeAlreadyRunning)
    }

    fn keep(mut self) {
        self.0 = false;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.0 {
            RUNNING.store(false, Ordering::Release);
        }
    }
}

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
    drains: Mutex<Vec<crate::DrainReport>>,
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
    /// Starts this process's node: binds `config`'s listen address (port 0 picks a free
    /// port), starts a `NodeServer` (isolated mode: the node dials the full mesh itself, one
    /// dial per address, over TLS when [`NodeConfig::tls`] is set and plain TCP otherwise),
    /// and dials `config`'s peers in the background. It starts sampling its CPU at once (see
    /// [`NodeConfig::cpu_sampler`]).
    ///
    /// Errors: [`Error::InvalidConfig`] naming the bad option (`tls.cert`, `tls.key`, `tls.ca`
    /// or `tls.server_name` for TLS files that are missing, unreadable or not valid PEM, a
    /// key that is not the certificate's, or a certificate that peers dialling this node would
    /// reject: not signed by the CA, expired or not yet valid, or not naming the advertised
    /// host (or `TlsConfig::server_name`)); [`Error::NodeAlreadyRunning`] if this process
    /// already runs a node; [`Error::Startup`] if the address cannot be bound.
    pub async fn start(config: NodeConfig) -> Result<Node, Error> {
        let valid = config.validate(false)?;
        let tls = load_tls(&config)?;
        if let Some(tls) = &tls {
            tls.check_own_certificate(&valid.host)?;
        }
        let claim = Claim::take()?;
        let acceptor = tls.as_ref().map(|tls| tls.acceptor.clone());
        let listener::Listening {
            server,
            port,
            accept_task,
            handshakes,
        } = listener::start(&config, &valid, acceptor).await?;
        let listen_addr = SocketAddr::new(valid.bind_ip, port).to_string();
        let addrs = (listen_addr, Some(format!("{}:{port}", valid.host)));
        let node = Self::assemble(
            server,
            Some(handshakes),
            config.full_name(),
            addrs,
            &config,
            tls,
            claim,
        )
        .await;
        if let Some(task) = accept_task {
            match &node {
                // Stopped with the dialers at shutdown.
                Ok(node) => node
                    .inner
                    .dialers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(task),
                Err(_) => task.abort(),
            }
        }
        node
    }

    /// Makes a node of a `NodeServer` the app already runs (`server`). `config.name` and the
    /// advertised host must be the `node_name` and `hostname` that server was built with (its
    /// full name is `node_name@hostname`); its listen address and cookie are the server's own
    /// and are ignored here. Run the server in `NodeConnectionMode::Isolated`: the node dials
    /// the full mesh itself (ractor_cluster does not relay pg groups between nodes).
    /// [`Node::shutdown`] leaves the server running.
    /// Like [`Node::start`], it starts sampling this process's CPU.
    ///
    /// With [`NodeConfig::tls`] the node's own dials use TLS; whether the server accepts only
    /// TLS is the server's encryption mode (see [`TlsConfig::acceptor`]).
    ///
    /// Errors: as [`Node::start`], without bind failures.
    pub async fn attach(
        server: ActorRef<NodeServerMessage>,
        config: NodeConfig,
    ) -> Result<Node, Error> {
        let valid = config.validate(true)?;
        let tls = load_tls(&config)?;
        if let Some(tls) = &tls {
            tls.check_own_certificate(&valid.host)?;
        }
        let claim = Claim::take()?;
        let addrs = (String::new(), None);
        Self::assemble(server, None, config.full_name(), addrs, &config, tls, claim).await
    }

    /// Builds the node around `server`; `own_listener` is set when the node started the
    /// server (and its listener) itself, unset when attached.
    async fn assemble(
        server: ActorRef<NodeServerMessage>,
        own_listener: Option<Arc<preauth::Handshakes>>,
        name: String,
        (listen_addr, connection_string): (String, Option<String>),
        config: &NodeConfig,
        tls: Option<Arc<tls::TlsSetup>>,
        claim: Claim,
    ) -> Result<Node, Error> {
        crate::wire::set_local_version(config.wire_version);
        let owns_server = own_listener.is_some();
        let shared = Arc::new(
            NodeShared::new(name.clone(), listen_addr, connection_string, config)
                .with_tls(tls)
                .with_handshakes(own_listener),
        );
        let _ = shared.server.set(server.clone());
        let startup = |what: &str, e: &dyn std::fmt::Display| Error::Startup {
            reason: format!("{what}: {e}"),
        };
        let stop_server = |server: &ActorRef<NodeServerMessage>| {
            if owns_server {
                server.stop(Some("rpc_load_balancer startup failed".into()));
            }
        };
        let endpoint = match Actor::spawn(
            Some(endpoint_name(&name)),
            RpcEndpoint,
            Arc::clone(&shared),
        )
        .await
        {
            Ok((endpoint, _)) => endpoint,
            Err(e) => {
                stop_server(&server);
                return Err(startup("rpc endpoint", &e));
            }
        };
        let _ = shared.self_endpoint.set(endpoint.clone());
        let args = ClusterArgs {
            shared: Arc::clone(&shared),
            server: server.clone(),
        };
        let manager = match Actor::spawn(None, ClusterManager, args).await {
            Ok((manager, _)) => manager,
            Err(e) => {
                endpoint.stop(None);
                stop_server(&server);
                return Err(startup("cluster manager", &e));
            }
        };
        let own = |addr: &String| {
            Some(addr) == shared.connection_string.as_ref() || *addr == shared.listen_addr
        };
        if let Some(addr) = config.peers.iter().find(|addr| own(addr)) {
            tracing::warn!(%addr, "not dialling this node's own address, listed among its peers");
        }
        let mut dialers: Vec<JoinHandle<()>> = config
            .peers
            .iter()
            .filter(|addr| !own(addr))
            .map(|addr| {
                tokio::spawn(keep_peer::keep_peer(
                    Arc::clone(&shared),
                    server.clone(),
                    addr.clone(),
                ))
            })
            .collect();
        dialers.push(tokio::spawn(heartbeat::run(
            Arc::clone(&shared),
            config.heartbeat_interval,
            config.heartbeat_timeout,
        )));
        let sampler = crate::cpu::sampler::spawn(
            config.cpu_sampler.clone(),
            name.clone(),
            config.cpu_sample_interval,
        );
        claim.keep();
        tracing::info!(node = %name, listen = %shared.listen_addr, "node started");
        let node = Node {
            inner: Arc::new(NodeInner {
                shared,
                server,
                owns_server,
                endpoint,
                manager,
                dialers: Mutex::new(dialers),
                drains: Mutex::new(Vec::new()),
                sampler: Mutex::new(Some(sampler)),
                shut_down: AtomicBool::new(false),
            }),
        };
        *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = Some(node.clone());
        Ok(node)
    }

    /// The node running in this process, if one was started (or attached) and not shut down.
    pub fn current() -> Option<Node> {
        CURRENT.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn shared(&self) -> Arc<NodeShared> {
        Arc::clone(&self.inner.shared)
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
            .registry
            .register(function)
            .map_err(|name| Error::DuplicateFunction {
                name: name.to_string(),
            })
    }

    /// A call of `F` with `args` on the node named `node` (full name; this node's own name
    /// calls itself). Await the returned [`Call`]; every call has a timeout (default
    /// `NodeConfig::call_timeout`).
    ///
    /// Errors when awaited: [`Error::ServiceUnavailable`] (unknown or disconnected node, node
    /// lost mid-call), [`Error::RequestTimeout`], [`Error::BadRequest`] (function not registered
    /// there, arguments not decodable), [`Error::Remote`] (the function failed or panicked),
    /// [`Error::PayloadTooLarge`], [`Error::Codec`], [`Error::WireVersion`];
    /// [`Error::InvalidConfig`] (`timeout`) for a zero [`Call::timeout`].
    pub fn call<F: RemoteFunction>(&self, node: impl Into<String>, args: F::Args) -> Call<F> {
        Call::new(Arc::clone(&self.inner.shared), node.into(), args)
    }

    /// Sends `F` with `args` to `node` without waiting for it to run. Returns once the cast is
    /// handed to the node's session; what happens there is only logged on that node.
    ///
    /// Errors: [`Error::ServiceUnavailable`] when the node is not connected (the original
    /// silently returned ok), [`Error::PayloadTooLarge`], [`Error::Codec`].
    pub async fn cast<F: RemoteFunction>(&self, node: &str, args: F::Args) -> Result<(), Error> {
        let mut telemetry = crate::telemetry::RpcTelemetry::start("cast", F::NAME, None);
        telemetry.target(&Arc::from(node));
        let outcome = telemetry
            .span()
            .in_scope(|| call::cast::<F>(&self.inner.shared, node, &args));
        telemetry.finish(&outcome);
        outcome
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
        call::control(shared, node, &request, shared.config.call_timeout).await
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

    /// Full names of the connected peers, sorted (this node not included).
    pub fn nodes(&self) -> Vec<String> {
        self.inner.shared.peers.node_list()
    }

    /// A watch of [`Node::nodes`]: changes whenever a peer comes up or goes down.
    pub fn watch_nodes(&self) -> watch::Receiver<Arc<[String]>> {
        self.inner.shared.peers.watch_node_list()
    }

    /// A stream of [`NodeEvent`]s from now on (a receiver that falls 256 events behind skips
    /// the oldest, see `tokio::sync::broadcast`).
    pub fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.inner.shared.events.subscribe()
    }

    /// Dials `addr` (`host:port`) now and waits until a session to it is ready, at most
    /// `NodeConfig::connect_timeout` (5 s). Returns the peer's full name; at once if it is
    /// already connected.
    ///
    /// Errors: [`Error::ConnectFailed`] with what was seen (TCP refused, TLS handshake failed,
    /// handshake rejected because of a wrong cookie, a duplicate node name or TLS on one side
    /// only, no answer); [`Error::WireVersion`] when the peer speaks another wire version (it is
    /// refused, see docs/reference/wire-compatibility.md).
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

    /// Stops the node: stops its balancers gracefully (all at once, each draining as
    /// [`Balancer::stop`](crate::Balancer::stop) does), tells its peers it is leaving, then
    /// stops dialling and CPU sampling, leaves pg, stops the endpoint and manager, and stops
    /// the NodeServer if [`Node::start`] created it (closing every session).
    ///
    /// Only balancers drain: direct calls ([`Node::call`], random-node calls not tracked by a
    /// balancer) that this node makes or serves when the sessions close fail with
    /// [`Error::ServiceUnavailable`] (`ConnectionLost`), and the
    /// [`CallContext`](crate::CallContext)s of those still running here are cancelled.
    /// Waiting random-node calls end at once with `NodeStopped`. Calls made afterwards fail
    /// with [`Error::ServiceUnavailable`]; a new node may then be started in this process. A
    /// second call while one runs returns when it is done.
    ///
    /// Returns the [`DrainReport`](crate::DrainReport) of each balancer it stopped, sorted by
    /// balancer name (empty when none ran); a second call returns the same.
    pub async fn shutdown(&self) -> Vec<crate::DrainReport> {
        let inner = &self.inner;
        let mut lifecycle = inner.shared.lifecycle.subscribe();
        if !inner.shut_down.swap(true, Ordering::AcqRel) {
            inner.shared.lifecycle.send_replace(Lifecycle::ShuttingDown);
            // The work runs on its own task: dropping this future does not abandon it.
            let node = self.clone();
            tokio::spawn(async move { node.shut_down().await });
        }
        let _ = lifecycle.wait_for(|l| *l == Lifecycle::Stopped).await;
        self.inner
            .drains
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The work of [`Node::shutdown`], once.
    async fn shut_down(&self) {
        let inner = &self.inner;
        // Every balancer drains at once (each bounded by its drain_timeout).
        let balancers = inner.shared.balancers.running();
        let mut drains = futures_util::future::join_all(balancers.iter().map(|b| b.stop())).await;
        drains.sort_by(|a, b| a.balancer.cmp(&b.balancer));
        *inner.drains.lock().unwrap_or_else(|p| p.into_inner()) = drains;
        // Drained: tell the peers this node is leaving (bounded; a peer that does not answer
        // learns it when the session closes).
        let leaving = ControlRequest::Leaving(inner.shared.name.clone());
        let peers = self.nodes();
        futures_util::future::join_all(peers.iter().map(|peer| {
            crate::call::control(&inner.shared, peer, &leaving, Duration::from_millis(500))
        }))
        .await;
        inner.shared.stopped.store(true, Ordering::Release);
        // Direct calls are not drained: those still running here are given up on now.
        inner.shared.abandoned.fire();
        let dialers = std::mem::take(&mut *inner.dialers.lock().unwrap_or_else(|p| p.into_inner()));
        for dialer in dialers {
            dialer.abort();
        }
        inner.stop_sampling();
        let _ = inner.server.cast(NodeServerMessage::UnsubscribeToEvents(
            SUBSCRIPTION_ID.to_string(),
        ));
        let wait = Some(Duration::from_secs(5));
        let _ = inner
            .manager
            .stop_and_wait(Some("node shutdown".into()), wait)
            .await;
        let _ = inner
            .endpoint
            .stop_and_wait(Some("node shutdown".into()), wait)
            .await;
        if inner.owns_server {
            let _ = inner
                .server
                .stop_and_wait(Some("node shutdown".into()), wait)
                .await;
        }
        *CURRENT.write().unwrap_or_else(|p| p.into_inner()) = None;
        RUNNING.store(false, Ordering::Release);
        inner.shared.lifecycle.send_replace(Lifecycle::Stopped);
        tracing::info!(node = %inner.shared.name, "node stopped");
    }
}

/// Reads and checks `config`'s TLS settings, if any.
fn load_tls(config: &NodeConfig) -> Result<Option<Arc<tls::TlsSetup>>, Error> {
    config
        .tls
        .as_ref()
        .map(|tls| tls.load().map(Arc::new))
        .transpose()
}
