//! Bringing a node up: the process's one node slot ([`Node::current`]), [`Node::start`] (a
//! NodeServer of its own) and [`Node::attach`] (the app's NodeServer), both assembling the
//! same parts in the order the module docs of `node` give.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorRef};
use ractor_cluster::NodeServerMessage;
use tokio::task::JoinHandle;

use super::cluster::{ClusterArgs, ClusterManager};
use super::shared::NodeShared;
use super::{heartbeat, keep_peer, listener, preauth, tls, Node, NodeConfig, NodeInner};
use crate::endpoint::RpcEndpoint;
use crate::wire::endpoint_name;
use crate::Error;

/// Set while a `Node` runs in this process: pg membership is process-wide, so a process is
/// one node.
pub(super) static RUNNING: AtomicBool = AtomicBool::new(false);

/// The running node, for [`Node::current`].
pub(super) static CURRENT: std::sync::RwLock<Option<Node>> = std::sync::RwLock::new(None);

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
    /// [`TlsConfig::acceptor`]: crate::TlsConfig::acceptor
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
}

/// Reads and checks `config`'s TLS settings, if any.
fn load_tls(config: &NodeConfig) -> Result<Option<Arc<tls::TlsSetup>>, Error> {
    config
        .tls
        .as_ref()
        .map(|tls| tls.load().map(Arc::new))
        .transpose()
}
