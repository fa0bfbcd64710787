//! The node's listening socket and its NodeServer.
//!
//! **Plain TCP**: ractor_cluster's own listener accepts on the node's address and opens a
//! session per connection at once, so a client that connects and stalls holds only its own
//! session.
//!
//! **TLS**: ractor_cluster 0.16.5 runs each TLS handshake inside its accept loop, without a
//! timeout, so one client that connects and sends nothing would stop every later accept. A
//! TLS node therefore accepts on its own socket and runs each handshake on a task of its own,
//! bounded by `connect_timeout` and by [`MAX_HANDSHAKES`] at once, then hands the encrypted
//! stream to the NodeServer. The NodeServer still opens a listener of its own (it always
//! does): that one is bound to an ephemeral loopback port, accepts TLS only, and is never
//! advertised — the NodeServer is told the node's real port, which is what peers record and
//! redial.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{IncomingEncryptionMode, NetworkStream, NodeServer, NodeServerMessage};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::config::{NodeConfig, ValidConfig};
use crate::Error;

/// Most TLS handshakes in progress at once; connections beyond it are closed unanswered.
pub(crate) const MAX_HANDSHAKES: usize = 256;

/// A started NodeServer: the server, the port the node listens on, and (with TLS) the task
/// that accepts connections for it.
pub(crate) struct Listening {
    pub(crate) server: ActorRef<NodeServerMessage>,
    pub(crate) port: u16,
    pub(crate) accept_task: Option<JoinHandle<()>>,
}

/// Starts the NodeServer on `valid`'s address, accepting TLS only when `acceptor` is set.
///
/// Errors: [`Error::Startup`] when the address cannot be bound or the NodeServer not started.
pub(crate) async fn start(
    config: &NodeConfig,
    valid: &ValidConfig,
    acceptor: Option<TlsAcceptor>,
) -> Result<Listening, Error> {
    match acceptor {
        None => start_plain(config, valid).await,
        Some(acceptor) => start_tls(config, valid, acceptor).await,
    }
}

fn cannot_listen(ip: IpAddr, port: u16, e: &dyn std::fmt::Display) -> Error {
    Error::Startup {
        reason: format!("node cannot listen on {ip}:{port}: {e}"),
    }
}

fn node_server(
    config: &NodeConfig,
    valid: &ValidConfig,
    port: u16,
    encryption: Option<IncomingEncryptionMode>,
    listen_ip: IpAddr,
) -> NodeServer {
    NodeServer::new(
        port,
        config.cookie.clone(),
        config.name.clone(),
        valid.host.clone(),
        encryption,
        // Our own mesh dialling (mesh.rs) replaces ractor_cluster's transitive mode.
        Some(NodeConnectionMode::Isolated),
    )
    .with_listen_addr(listen_ip)
}

/// Plain TCP: ractor_cluster's listener on the node's address. For port 0 a free port is
/// found by binding it and releasing it; if another process takes it in between, a new one is
/// tried (up to 8 times).
async fn start_plain(config: &NodeConfig, valid: &ValidConfig) -> Result<Listening, Error> {
    const ATTEMPTS: usize = 8;
    for attempt in 1..=ATTEMPTS {
        // Bind once ourselves: for port 0 to pick the port, otherwise for a plain error
        // message (ractor_cluster nests it in two "actor panicked during startup" layers).
        let port = std::net::TcpListener::bind((valid.bind_ip, valid.port))
            .and_then(|l| l.local_addr())
            .map_err(|e| cannot_listen(valid.bind_ip, valid.port, &e))?
            .port();
        let server = node_server(config, valid, port, None, valid.bind_ip);
        match Actor::spawn(None, server, ()).await {
            Ok((server, _)) => {
                return Ok(Listening {
                    server,
                    port,
                    accept_task: None,
                })
            }
            Err(e) if valid.port == 0 && attempt < ATTEMPTS => {
                tracing::debug!(port, error = %e, "free port was taken; trying another");
            }
            Err(e) => return Err(cannot_listen(valid.bind_ip, port, &e)),
        }
    }
    unreachable!("the last attempt returns")
}

/// TLS: our own accept loop on the node's address (see the module docs).
async fn start_tls(
    config: &NodeConfig,
    valid: &ValidConfig,
    acceptor: TlsAcceptor,
) -> Result<Listening, Error> {
    let listener = TcpListener::bind((valid.bind_ip, valid.port))
        .await
        .map_err(|e| cannot_listen(valid.bind_ip, valid.port, &e))?;
    let port = listener
        .local_addr()
        .map_err(|e| cannot_listen(valid.bind_ip, valid.port, &e))?
        .port();
    let internal = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let encryption = Some(IncomingEncryptionMode::Tls(acceptor.clone()));
    let (server, _) = Actor::spawn(
        None,
        node_server(config, valid, 0, encryption, internal),
        (),
    )
    .await
    .map_err(|e| cannot_listen(valid.bind_ip, port, &e))?;
    // Its listener reported its own ephemeral port while starting; this message comes after
    // that one, so the node advertises the port it really accepts on.
    server
        .cast(NodeServerMessage::PortChanged { port })
        .map_err(|e| cannot_listen(valid.bind_ip, port, &e))?;
    let accept_task = tokio::spawn(accept_loop(
        listener,
        server.clone(),
        acceptor,
        config.connect_timeout,
    ));
    Ok(Listening {
        server,
        port,
        accept_task: Some(accept_task),
    })
}

/// Accepts connections until aborted (at node shutdown); each TLS handshake runs on its own
/// task, bounded by `handshake_timeout`.
async fn accept_loop(
    listener: TcpListener,
    server: ActorRef<NodeServerMessage>,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let (stream, peer_addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // E.g. out of file descriptors: pause rather than spin.
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(%peer_addr, limit = MAX_HANDSHAKES, "too many TLS handshakes in progress; closing a new connection");
            continue;
        };
        let (server, acceptor) = (server.clone(), acceptor.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let _ = stream.set_nodelay(true);
            let local_addr = match stream.local_addr() {
                Ok(addr) => addr,
                Err(_) => return,
            };
            match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = server.cast(NodeServerMessage::ConnectionOpened {
                        stream: Box::new(NetworkStream::TlsServer {
                            peer_addr,
                            local_addr,
                            stream,
                        }),
                        is_server: true,
                    });
                }
                Ok(Err(error)) => {
                    tracing::warn!(%peer_addr, %error, "incoming TLS handshake failed");
                }
                Err(_) => tracing::warn!(
                    %peer_addr,
                    timeout_ms = handshake_timeout.as_millis() as u64,
                    "incoming TLS handshake did not finish in time; connection closed"
                ),
            }
        });
    }
}
