//! Bringing a node up: the process's one node slot ([`Node::current`]), the work of
//! [`Node::start`] (a NodeServer of its own) and [`Node::attach`] (the app's NodeServer), both
//! assembling the same parts in the order the module docs of `node` give. The public entry
//! points themselves are the facade's (`entry.rs`): they give the node the balancer layer's
//! admin handler.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorRef};
use ractor_cluster::NodeServerMessage;
use tokio::task::JoinHandle;

use super::cluster::{ClusterArgs, ClusterManager};
use super::shared::NodeShared;
use super::{
    gossip, heartbeat, keep_peer, listener, preauth, subset_dial, tls, Node, NodeConfig, NodeInner,
};
use crate::endpoint::{RpcEndpoint, Serving};
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
    /// [`Node::start`] with `admin` answering the control requests about balancers (the
    /// balancer layer's handler, given by the facade).
    ///
    /// Errors: as [`Node::start`].
    pub(crate) async fn start_with(
        config: NodeConfig,
        admin: super::shared::BalancerAdmin,
    ) -> Result<Node, Error> {
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
        let node =
            Self::assemble(server, Some(handshakes), addrs, &config, tls, claim, admin).await;
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

    /// [`Node::attach`] with `admin` answering the control requests about balancers (the
    /// balancer layer's handler, given by the facade).
    ///
    /// Errors: as [`Node::attach`].
    pub(crate) async fn attach_with(
        server: ActorRef<NodeServerMessage>,
        config: NodeConfig,
        admin: super::shared::BalancerAdmin,
    ) -> Result<Node, Error> {
        let valid = config.validate(true)?;
        let tls = load_tls(&config)?;
        if let Some(tls) = &tls {
            tls.check_own_certificate(&valid.host)?;
        }
        let claim = Claim::take()?;
        let addrs = (String::new(), None);
        Self::assemble(server, None, addrs, &config, tls, claim, admin).await
    }

    /// Builds the node around `server`; `own_listener` is set when the node started the
    /// server (and its listener) itself, unset when attached.
    async fn assemble(
        server: ActorRef<NodeServerMessage>,
        own_listener: Option<Arc<preauth::Handshakes>>,
        (listen_addr, connection_string): (String, Option<String>),
        config: &NodeConfig,
        tls: Option<Arc<tls::TlsSetup>>,
        claim: Claim,
        admin: super::shared::BalancerAdmin,
    ) -> Result<Node, Error> {
        let name = config.full_name();
        crate::wire::set_local_version(config.wire_version);
        let owns_server = own_listener.is_some();
        let shared = Arc::new(
            NodeShared::new(name.clone(), listen_addr, connection_string, config)
                .with_tls(tls)
                .with_handshakes(own_listener)
                .with_balancer_admin(admin),
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
            Arc::clone(&shared) as Arc<dyn Serving>,
        )
        .await
        {
            Ok((endpoint, _)) => endpoint,
            Err(e) => {
                stop_server(&server);
                return Err(startup("rpc endpoint", &e));
            }
        };
        let _ = shared.transport.own_endpoint.set(endpoint.clone());
        // Before any session can be ready: peers read it at their ready event.
        super::incarnation::publish(&endpoint.get_cell(), shared.incarnation);
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
        if config.sparse_mesh {
            dialers.push(tokio::spawn(gossip::run(Arc::clone(&shared))));
            dialers.push(tokio::spawn(subset_dial::run(
                Arc::clone(&shared),
                server.clone(),
            )));
        }
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
