//! TLS between nodes: mutual TLS 1.3 (rustls, aws-lc-rs) on every session, through
//! ractor_cluster's encrypted accept (`IncomingEncryptionMode::Tls`) and connect
//! (`client_connect_enc`).
//!
//! Every node presents its certificate chain and verifies its peer's against the CA: the
//! listening side requires a client certificate signed by the CA, the dialling side checks the
//! server's certificate against the CA and the server name (by default the host part of the
//! address dialled). The cookie check still runs inside the encrypted session. A plaintext
//! peer cannot join a TLS node, nor a TLS node a plaintext one: their handshakes fail, and
//! [`Node::connect`](crate::Node::connect) reports [`Error::ConnectFailed`].
//!
//! Every dial the node makes goes through [`dial`], so a TLS node never opens a plaintext
//! session. ractor_cluster's transitive mode would dial plain TCP: nodes run isolated and dial
//! the mesh themselves (`mesh.rs`) either way.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use ractor_cluster::{ClientConnectErr, NodeServerMessage};
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::shared::NodeShared;
use super::stream::BufferedTcp;
use crate::Error;

/// Where one PEM input comes from.
#[derive(Clone)]
enum Pem {
    /// A file, read when the node starts.
    File(PathBuf),
    /// PEM text given in memory.
    Bytes(Arc<[u8]>),
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(path) => write!(f, "{}", path.display()),
            // Never print key material.
            Pem::Bytes(bytes) => write!(f, "<PEM in memory, {} bytes>", bytes.len()),
        }
    }
}

impl Pem {
    /// The PEM text; a file is read now.
    fn read(&self, option: &'static str) -> Result<Arc<[u8]>, Error> {
        match self {
            Pem::Bytes(bytes) => Ok(Arc::clone(bytes)),
            Pem::File(path) => std::fs::read(path)
                .map(Arc::from)
                .map_err(|e| invalid(option, format!("cannot read {}: {e}", path.display()))),
        }
    }
}

fn invalid(option: &'static str, reason: String) -> Error {
    Error::InvalidConfig { option, reason }
}

/// TLS settings of a node ([`NodeConfig::tls`](crate::NodeConfig::tls)): its certificate
/// chain, its private key, and the CA its peers' certificates must be signed by. Every node of
/// a TLS cluster needs one; all of them trust the same CA.
///
/// Sessions are mutual TLS 1.3: a node presents its certificate both when it dials and when it
/// is dialled, and verifies the peer's against the CA. When dialling, the peer's certificate
/// must also name the server name: by default the host part of the address dialled (e.g.
/// `127.0.0.1` for `127.0.0.1:4100`, as an IP address SAN; `box1` for `box1:4100`, as a DNS
/// SAN), so give every node a certificate naming the host it advertises
/// ([`NodeConfig::advertise_host`](crate::NodeConfig::advertise_host), by default its listen
/// IP). With [`TlsConfig::server_name`], one fixed name is verified instead (e.g. a name every
/// node's certificate carries).
///
/// Nothing is read or checked here: [`Node::start`](crate::Node::start) reads the files and
/// fails with [`Error::InvalidConfig`] naming `tls.cert`, `tls.key`, `tls.ca` or
/// `tls.server_name` if one is missing, unreadable, not PEM, not parsable, or if the key does
/// not belong to the certificate.
///
/// ```no_run
/// use rpc_load_balancer::{Node, NodeConfig, TlsConfig};
///
/// # #[tokio::main] async fn main() -> Result<(), rpc_load_balancer::Error> {
/// let tls = TlsConfig::from_pem_files("node.crt", "node.key", "ca.crt");
/// let node = Node::start(
///     NodeConfig::new("worker_a", "127.0.0.1:4100")
///         .cookie("secret")
///         .tls(tls)
///         .peers(["127.0.0.1:4101"]),
/// )
/// .await?;
/// # node.shutdown().await; Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TlsConfig {
    cert_chain: Pem,
    key: Pem,
    ca: Pem,
    server_name: Option<String>,
}

impl TlsConfig {
    /// TLS from three PEM files, read when the node starts:
    /// * `cert_chain`: this node's certificate first, then any intermediates (`CERTIFICATE`
    ///   blocks);
    /// * `key`: its private key (one `PRIVATE KEY` (PKCS#8), `RSA PRIVATE KEY` (PKCS#1) or
    ///   `EC PRIVATE KEY` (SEC1) block);
    /// * `ca`: the certificate(s) of the CA that signs every node's certificate (one or more
    ///   `CERTIFICATE` blocks; each is trusted).
    pub fn from_pem_files(
        cert_chain: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
        ca: impl Into<PathBuf>,
    ) -> Self {
        Self {
            cert_chain: Pem::File(cert_chain.into()),
            key: Pem::File(key.into()),
            ca: Pem::File(ca.into()),
            server_name: None,
        }
    }

    /// TLS from PEM text in memory, with the same contents as the files of
    /// [`TlsConfig::from_pem_files`] (certificate chain, private key, CA certificates).
    pub fn from_pem(
        cert_chain: impl AsRef<[u8]>,
        key: impl AsRef<[u8]>,
        ca: impl AsRef<[u8]>,
    ) -> Self {
        Self {
            cert_chain: Pem::Bytes(Arc::from(cert_chain.as_ref())),
            key: Pem::Bytes(Arc::from(key.as_ref())),
            ca: Pem::Bytes(Arc::from(ca.as_ref())),
            server_name: None,
        }
    }

    /// The name every peer's certificate must carry when this node dials it (a DNS name, or
    /// an IP address), instead of the host part of the address dialled (the default). Checked
    /// at start ([`Error::InvalidConfig`] naming `tls.server_name`).
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// A `tokio_rustls::TlsAcceptor` for these settings (requires and verifies client
    /// certificates), for an app that runs its own `NodeServer` and
    /// [`Node::attach`](crate::Node::attach)es to it: pass
    /// `IncomingEncryptionMode::Tls(acceptor)` as the server's encryption mode, and set the
    /// same `TlsConfig` on the attached node's config so that its dials use TLS too.
    ///
    /// Errors: [`Error::InvalidConfig`] as [`Node::start`](crate::Node::start) gives it.
    pub fn acceptor(&self) -> Result<TlsAcceptor, Error> {
        Ok(self.load()?.acceptor)
    }

    /// Reads and checks everything, and builds both sides' rustls configs.
    pub(crate) fn load(&self) -> Result<TlsSetup, Error> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let versions = &[&rustls::version::TLS13];

        let cert_pem = self.cert_chain.read("tls.cert")?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("tls.cert", format!("{:?} is not PEM: {e}", self.cert_chain)))?;
        if chain.is_empty() {
            return Err(invalid(
                "tls.cert",
                format!("{:?} has no CERTIFICATE block", self.cert_chain),
            ));
        }

        let key_pem = self.key.read("tls.key")?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
            invalid(
                "tls.key",
                format!(
                    "{:?} has no usable private key (PKCS#8, PKCS#1 or SEC1 PEM block): {e}",
                    self.key
                ),
            )
        })?;
        provider
            .key_provider
            .load_private_key(key.clone_key())
            .map_err(|e| invalid("tls.key", format!("{:?}: {e}", self.key)))?;

        let ca_pem = self.ca.read("tls.ca")?;
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(&ca_pem) {
            let ca = ca.map_err(|e| invalid("tls.ca", format!("{:?} is not PEM: {e}", self.ca)))?;
            roots.add(ca).map_err(|e| {
                invalid(
                    "tls.ca",
                    format!("{:?} holds a bad CA certificate: {e}", self.ca),
                )
            })?;
        }
        if roots.is_empty() {
            return Err(invalid(
                "tls.ca",
                format!("{:?} has no CERTIFICATE block", self.ca),
            ));
        }
        let roots = Arc::new(roots);

        let server_name = match &self.server_name {
            None => None,
            Some(name) => Some(ServerName::try_from(name.clone()).map_err(|e| {
                invalid(
                    "tls.server_name",
                    format!("{name:?} is not a DNS name or IP address: {e}"),
                )
            })?),
        };

        // Both builders check that the key belongs to the first certificate.
        let chain_error = |e: rustls::Error| match e {
            rustls::Error::InconsistentKeys(_) => invalid(
                "tls.key",
                format!(
                    "{:?} is not the key of the first certificate in {:?}",
                    self.key, self.cert_chain
                ),
            ),
            e => invalid(
                "tls.cert",
                format!("{:?} holds a bad certificate: {e}", self.cert_chain),
            ),
        };
        let own_check =
            WebPkiServerVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| invalid("tls.ca", format!("{:?}: {e}", self.ca)))?;
        let own_chain = chain.clone();
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| invalid("tls.ca", format!("{:?}: {e}", self.ca)))?;
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| invalid("tls", e.to_string()))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(chain_error)?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(|e| invalid("tls", e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(chain_error)?;
        Ok(TlsSetup {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            server_name,
            own_chain,
            own_check,
        })
    }
}

/// A loaded [`TlsConfig`]: both sides' rustls configs.
pub(crate) struct TlsSetup {
    pub(crate) acceptor: TlsAcceptor,
    connector: TlsConnector,
    /// `TlsConfig::server_name`; `None`: the host part of the address dialled.
    server_name: Option<ServerName<'static>>,
    /// This node's certificate chain, checked at start by `own_check`.
    own_chain: Vec<CertificateDer<'static>>,
    /// How peers check this node's certificate when they dial it.
    own_check: Arc<WebPkiServerVerifier>,
}

impl TlsSetup {
    /// Checks this node's own certificate as a peer dialling it will: signed by the CA, valid
    /// now, and naming `host` (the advertised host) or the configured server name. A node
    /// whose certificate fails this would be accepted by the nodes it dials but never by
    /// those that dial it.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `tls.cert`.
    pub(crate) fn check_own_certificate(&self, host: &str) -> Result<(), Error> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => self
                .server_name_for(&format!("{host}:0"))
                .map_err(|e| invalid("tls.cert", e))?,
        };
        let Some((leaf, intermediates)) = self.own_chain.split_first() else {
            return Err(invalid("tls.cert", "no certificate".into()));
        };
        self.own_check
            .verify_server_cert(leaf, intermediates, &name, &[], UnixTime::now())
            .map(|_| ())
            .map_err(|e| {
                invalid(
                    "tls.cert",
                    format!(
                        "peers dialling this node would reject its certificate for {}: {e}",
                        name.to_str()
                    ),
                )
            })
    }

    /// The name the certificate of the node at `addr` (`host:port`) must carry.
    fn server_name_for(&self, addr: &str) -> Result<ServerName<'static>, String> {
        if let Some(name) = &self.server_name {
            return Ok(name.clone());
        }
        let host = addr.rsplit_once(':').map_or(addr, |(host, _port)| host);
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        ServerName::try_from(host.to_string()).map_err(|e| {
            format!(
                "{host:?} cannot be verified as a TLS server name ({e}); set TlsConfig::server_name"
            )
        })
    }
}

/// Opens a session from this node to `addr` (`host:port`): over TLS when the node has a
/// [`TlsConfig`], plain TCP otherwise. Returns once the NodeServer has the connection (the
/// ractor handshake goes on in the session), at most `bound` after the start.
///
/// Errors: the reason, for [`Error::ConnectFailed`]: the TCP connect failed, the TLS
/// handshake failed (untrusted certificate, wrong server name, a plaintext peer), or it did
/// not finish within `bound`.
pub(crate) async fn dial(
    shared: &NodeShared,
    server: &ActorRef<NodeServerMessage>,
    addr: &str,
    bound: Duration,
) -> Result<(), String> {
    let opened = match shared.tls.as_deref() {
        None => tokio::time::timeout(bound, dial_plain(server, addr)).await,
        Some(tls) => {
            let name = tls.server_name_for(addr)?;
            let connector = tls.connector.clone();
            let connecting = ractor_cluster::client_connect_enc(server, addr, connector, name);
            tokio::time::timeout(bound, connecting).await
        }
    };
    let tls = if shared.tls.is_some() { "TLS " } else { "" };
    match opened {
        Ok(Ok(())) => Ok(()),
        Ok(Err(ClientConnectErr::Socket(e))) => Err(format!("TCP connect failed: {e}")),
        Ok(Err(ClientConnectErr::Encryption(e))) => Err(tls_failure(&e)),
        Ok(Err(ClientConnectErr::Messaging(e))) => {
            Err(format!("the local NodeServer is not running: {e}"))
        }
        Err(_elapsed) => Err(format!(
            "the TCP connect or {tls}handshake did not finish within {} ms",
            bound.as_millis()
        )),
    }
}

/// Opens a plain TCP session to `addr`, read through a buffer (see [`BufferedTcp`]).
async fn dial_plain(
    server: &ActorRef<NodeServerMessage>,
    addr: &str,
) -> Result<(), ClientConnectErr> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let stream = BufferedTcp::new(stream)?;
    ractor_cluster::client_connect_external(server, Box::new(stream)).await
}

/// The reason for a failed TLS handshake, with the likely cause where the error shows it.
fn tls_failure(error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let hint = match error.kind() {
        // The peer closed or reset the connection: what a plaintext node does, but also a TLS
        // node with too many handshakes in progress, or one that refused the connection.
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => {
            "; the peer closed the connection before the handshake finished: it may be running \
             without TLS, be overloaded (too many handshakes at once) or have refused the \
             connection"
        }
        // It answered with something that is not TLS: a plaintext node (or not a node).
        _ if error.to_string().contains("corrupt message") => {
            "; the peer did not answer in TLS: it is likely running without TLS"
        }
        _ => "",
    };
    format!("TLS handshake failed: {error}{hint}")
}

#[cfg(test)]
mod tests;
