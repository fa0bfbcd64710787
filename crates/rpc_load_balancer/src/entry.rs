//! The node's public entry points, [`Node::start`] and [`Node::attach`]: the node layer
//! builds the node; these give it what the layers above it answer for — the balancer layer's
//! handler of the control requests about balancers (`balancer::admin`) — so that the node never
//! names a higher layer.

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;

use crate::{Error, Node, NodeConfig};

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
        Node::start_with(config, crate::balancer::admin::answer).await
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
        Node::attach_with(server, config, crate::balancer::admin::answer).await
    }
}
