//! The node's listening socket and its NodeServer.
//!
//! ractor_cluster 0.16.5's own listener has no defence against clients that connect and stall:
//! with TLS it runs each handshake inside its accept loop without a timeout (one silent client
//! stops every later accept), and in plain TCP it gives every connection a session at once,
//! with no bound on how many wait unauthenticated nor on the frames they announce; when the
//! process runs out of file descriptors its accept loop spins. So the node accepts on its own
//! socket: each new connection is counted by the node's [`Handshakes`] (at most
//! `max_handshakes` at once; a new one closes the oldest) until its session authenticates, and
//! gets a task of its own that runs the TLS handshake (with TLS) and reads the peer's first
//! frame, which must be a handshake message no bigger than `handshake_frame_limit`, bounded by
//! `connect_timeout`; then it hands the stream to the NodeServer, read through a frame gate
//! (`preauth.rs`). A session that has not authenticated `connect_timeout` after the accept is
//! closed by the same task (and the cluster manager closes any session, accepted or dialled,
//! still unauthenticated `connect_timeout` after it opened, see `cluster.rs`).
//!
//! The NodeServer still opens a listener of its own (it always does): that one is bound to an
//! ephemeral loopback port and never advertised — the NodeServer is told the node's real port,
//! which is what peers record and redial. Nothing legitimate connects to it, so it speaks TLS
//! with no certificate to offer: every handshake on it fails, and no connection to it ever
//! becomes a session (ractor_cluster would give each one a session with its full frame limit).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{ClusterBidiStream, IncomingEncryptionMode, NodeServer, NodeServerMessage};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::preauth::{first_frame, Handshakes, Ticket};
use super::stream::{AcceptedTls, BufferedTcp};

use super::config::{NodeConfig, ValidConfig};
use crate::Error;

/// A started NodeServer: the server, the port the node listens on, the task that accepts
/// connections for it, and the count of those not authenticated yet.
pub(crate) struct Listening {
    pub(crate) server: ActorRef<NodeServerMessage>,
    pub(crate) port: u16,
    pub(crate) accept_task: Option<JoinHandle<()>>,
    pub(crate) handshakes: Arc<Handshakes>,
}

/// Starts the NodeServer on `valid`'s address, accepting TLS only when `acceptor` is set.
///
/// Errors: [`Error::Startup`] when the address cannot be bound or the NodeServer not started.
pub(crate) async fn start(
    config: &NodeConfig,
    valid: &ValidConfig,
    acceptor: Option<TlsAcceptor>,
) -> Result<Listening, Error> {
    let listener = TcpListener::bind((valid.bind_ip, valid.port))
        .await
        .map_err(|e| cannot_listen(valid.bind_ip, valid.port, &e))?;
    let port = listener
        .local_addr()
        .map_err(|e| cannot_listen(valid.bind_ip, valid.port, &e))?
        .port();
    let internal = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let encryption = Some(IncomingEncryptionMode::Tls(refusing_acceptor()?));
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
    let handshakes = Handshakes::new(config.max_handshakes, config.handshake_frame_limit);
    let accept_task = tokio::spawn(accept_loop(
        listener,
        server.clone(),
        acceptor,
        Arc::clone(&handshakes),
        config.connect_timeout,
    ));
    Ok(Listening {
        server,
        port,
        accept_task: Some(accept_task),
        handshakes,
    })
}

/// A TLS acceptor with no certificate to offer, for the NodeServer's internal listener (see
/// the module docs): every handshake on it fails.
fn refusing_acceptor() -> Result<TlsAcceptor, Error> {
    #[derive(Debug)]
    struct NoCertificate;
    impl ResolvesServerCert for NoCertificate {
        fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            None
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Error::Startup {
            reason: format!("internal listener: {e}"),
        })?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(NoCertificate));
    Ok(TlsAcceptor::from(Arc::new(config)))
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

/// Accepts connections until aborted (at node shutdown). Each one is counted by
/// `handshakes` and prepared on its own task (see the module docs), bounded by `timeout`.
async fn accept_loop(
    listener: TcpListener,
    server: ActorRef<NodeServerMessage>,
    acceptor: Option<TlsAcceptor>,
    handshakes: Arc<Handshakes>,
    timeout: Duration,
) {
    let refused = Arc::new(Throttle::default());
    let failed = Arc::new(Throttle::default());
    loop {
        let (stream, peer_addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // E.g. out of file descriptors: pause rather than spin.
                if refused.hit() {
                    tracing::warn!(%error, times = refused.count(), "cannot accept a connection");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let ticket = handshakes.admit(peer_addr);
        let (server, acceptor, failed) = (server.clone(), acceptor.clone(), Arc::clone(&failed));
        let deadline = tokio::time::Instant::now() + timeout;
        tokio::spawn(async move {
            let handshake = Arc::clone(ticket.handshake());
            let prepared = tokio::select! {
                prepared = tokio::time::timeout_at(deadline, prepare(stream, peer_addr, acceptor, ticket)) => prepared,
                () = handshake.closed() => return,
            };
            let stalled = || format!("no handshake within {} ms", timeout.as_millis());
            let stream: Box<dyn ClusterBidiStream> = match prepared {
                Ok(Ok(Prepared::Plain(stream))) => Box::new(stream),
                Ok(Ok(Prepared::Tls(stream))) => stream,
                Ok(Err(problem)) => {
                    if failed.hit() {
                        tracing::warn!(%peer_addr, %problem, times = failed.count(), "incoming connection dropped");
                    }
                    return;
                }
                Err(_) => {
                    if failed.hit() {
                        tracing::warn!(%peer_addr, problem = %stalled(), times = failed.count(), "incoming connection dropped");
                    }
                    return;
                }
            };
            let _ = server.cast(NodeServerMessage::ConnectionOpenedExternal {
                stream,
                is_server: true,
            });
            // The session must authenticate within `connect_timeout` of the accept too; one
            // that ended before (refused, or the peer hung up) ends this wait at once.
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {}
                () = handshake.closed() => return,
            }
            if handshake.close(stalled()) && failed.hit() {
                tracing::warn!(%peer_addr, problem = %stalled(), times = failed.count(), "incoming connection dropped");
            }
        });
    }
}

/// An accepted connection ready for a session.
enum Prepared {
    /// Plain TCP, read through a buffer.
    Plain(BufferedTcp),
    /// TLS, handshake done.
    Tls(Box<AcceptedTls>),
}

/// Runs the TLS handshake (with TLS), then reads the first frame (see
/// `preauth::first_frame`): a peer announcing a bigger one gets no session.
async fn prepare(
    stream: TcpStream,
    peer_addr: SocketAddr,
    acceptor: Option<TlsAcceptor>,
    ticket: Ticket,
) -> Result<Prepared, String> {
    let _ = stream.set_nodelay(true);
    let local_addr = stream.local_addr().map_err(|e| e.to_string())?;
    let limit = ticket.frame_limit();
    match acceptor {
        None => {
            let mut stream = stream;
            let first = first_frame(&mut stream, limit).await?;
            BufferedTcp::accepted(stream, first, ticket)
                .map(Prepared::Plain)
                .map_err(|e| e.to_string())
        }
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(mut stream) => Ok(Prepared::Tls(Box::new(AcceptedTls {
                first: first_frame(&mut stream, limit).await?,
                stream,
                peer: peer_addr,
                local: local_addr,
                ticket,
            }))),
            Err(e) if e.to_string().contains("InvalidContentType") => Err(format!(
                "TLS handshake failed: {e} (a client without TLS, or not a node)"
            )),
            Err(e) => Err(format!("TLS handshake failed: {e}")),
        },
    }
}

/// Counts events and says which to log: the first, then every 100th, then every 1,000th
/// past 1,000 (so a flood of bad connections cannot flood the log).
#[derive(Default)]
pub(crate) struct Throttle(AtomicU64);

impl Throttle {
    /// Counts one event; whether to log it.
    pub(crate) fn hit(&self) -> bool {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        n == 1 || (n <= 1_000 && n.is_multiple_of(100)) || n.is_multiple_of(1_000)
    }

    /// Events counted so far.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_throttle_logs_the_first_then_every_hundredth_then_every_thousandth() {
        let throttle = Throttle::default();
        let logged: Vec<u64> = (1..=5_000u64).filter(|_| throttle.hit()).collect();
        let mut expected = vec![1];
        expected.extend((100..=1_000).step_by(100));
        expected.extend((2_000..=5_000).step_by(1_000));
        assert_eq!(logged, expected);
        assert_eq!(throttle.count(), 5_000);
    }
}
