//! TLS between nodes: a TLS cluster serves balanced calls; plaintext nodes and nodes of another
//! CA never become members, and dialling across the mismatch is a typed error.
//!
//! Certificates are made at test time with rcgen: a CA, leaves it signs (SAN `localhost` and
//! `127.0.0.1`), and an unrelated second CA with its own leaf. The PEM files live in a
//! directory under the system temp dir that is removed at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, Node, NodeConfig, RoundRobin,
    TlsConfig,
};
use rpclb::harness::{random_cookie, HarnessError, NodeProcess, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// How long an outsider keeps trying (its dialler retries every 100–800 ms meanwhile) before
/// the test checks it never became a member.
const OUTSIDER_WAIT: Duration = Duration::from_secs(3);

/// `NodeConfig::connect_timeout`'s default, plus slack for a loaded debug build.
const CONNECT_BOUND: Duration = Duration::from_secs(6);

/// A certificate authority that signs leaves.
pub(crate) struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pub(crate) pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A leaf for `localhost` and `127.0.0.1`: (certificate PEM, key PEM).
    pub(crate) fn leaf(&self) -> (String, String) {
        let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        self.sign(params)
    }

    /// A leaf like [`Ca::leaf`] that expires `secs` seconds from now.
    fn expiring_leaf(&self, secs: i64) -> (String, String) {
        let mut params =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::seconds(secs);
        self.sign(params)
    }

    fn sign(&self, params: CertificateParams) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// PEM files of one node.
pub(crate) struct Identity {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) ca: PathBuf,
}

impl Identity {
    pub(crate) fn config(&self) -> TlsConfig {
        TlsConfig::from_pem_files(&self.cert, &self.key, &self.ca)
    }

    pub(crate) fn spec(&self, spec: NodeSpec) -> NodeSpec {
        spec.tls(&self.cert, &self.key, &self.ca)
    }

    pub(crate) fn flags(&self) -> Vec<String> {
        [
            ("--tls-cert", &self.cert),
            ("--tls-key", &self.key),
            ("--tls-ca", &self.ca),
        ]
        .iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
    }
}

/// The test's certificates on disk; the directory is removed when dropped.
pub(crate) struct Certs {
    dir: PathBuf,
    pub(crate) ca: Ca,
    ca_file: PathBuf,
    other_ca: Ca,
    other_ca_file: PathBuf,
}

impl Certs {
    pub(crate) fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "rpclb-tls-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, other_ca) = (Ca::new("rpclb test CA"), Ca::new("unrelated CA"));
        let ca_file = write(&dir, "ca.pem", &ca.pem);
        let other_ca_file = write(&dir, "other_ca.pem", &other_ca.pem);
        Self {
            dir,
            ca,
            ca_file,
            other_ca,
            other_ca_file,
        }
    }

    /// A node `name` with a leaf of the cluster's CA, trusting that CA.
    pub(crate) fn member(&self, name: &str) -> Identity {
        self.identity(name, &self.ca, self.ca_file.clone())
    }

    /// A node `name` with a leaf of the unrelated CA, trusting `trusted`.
    fn outsider(&self, name: &str, trusted: PathBuf) -> Identity {
        self.identity(name, &self.other_ca, trusted)
    }

    /// A node `name` with a leaf of the cluster's CA that expires in `secs` s, trusting that
    /// CA.
    fn expiring_member(&self, name: &str, secs: i64) -> Identity {
        let (cert, key) = self.ca.expiring_leaf(secs);
        Identity {
            cert: write(&self.dir, &format!("{name}.crt"), &cert),
            key: write(&self.dir, &format!("{name}.key"), &key),
            ca: self.ca_file.clone(),
        }
    }

    fn identity(&self, name: &str, signer: &Ca, ca: PathBuf) -> Identity {
        let (cert, key) = signer.leaf();
        Identity {
            cert: write(&self.dir, &format!("{name}.crt"), &cert),
            key: write(&self.dir, &format!("{name}.key"), &key),
            ca,
        }
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts TLS node `name` (dialling `peer`) with a `work` balancer.
async fn tls_node(
    certs: &Certs,
    name: &str,
    cookie: &str,
    peer: Option<&str>,
) -> Result<NodeProcess, HarnessError> {
    let mut spec = certs
        .member(name)
        .spec(NodeSpec::new(name, cookie))
        .arg("--balancer")
        .arg("work");
    if let Some(peer) = peer {
        spec = spec.peer(peer);
    }
    spec.start(BIN).await
}

/// `node`'s connected peers, through control.
async fn nodes_seen_by(me: &Node, node: &str) -> Vec<String> {
    match me.control(node, ControlRequest::Nodes).await {
        Ok(ControlReply::Nodes(nodes)) => nodes,
        other => panic!("{node}: nodes gave {other:?}"),
    }
}

/// Asserts `outcome` is a `ConnectFailed` for `addr` whose reason contains `expected`, within
/// the connect bound; returns the reason.
fn connect_failed(
    what: &str,
    outcome: Result<String, Error>,
    addr: &str,
    expected: &str,
    took: Duration,
) -> String {
    let reason = match outcome {
        Err(Error::ConnectFailed { addr: a, reason }) => {
            assert_eq!(a, addr, "{what}");
            reason
        }
        other => panic!("{what}: expected ConnectFailed, got {other:?}"),
    };
    eprintln!("{what}: {reason}");
    assert!(reason.contains(expected), "{what}: {reason}");
    assert!(took < CONNECT_BOUND, "{what}: took {took:?}");
    reason
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tls_nodes_serve_balanced_calls() {
    let certs = Certs::new();
    let cookie = random_cookie();
    let n0 = tls_node(&certs, "n0", &cookie, None).await.unwrap();
    // Two hostile clients hold connections to n0 for the whole test: one sends nothing, one
    // the start of a TLS record and then nothing. Every node below still joins through n0
    // (ractor_cluster alone would stall its accepts behind the first handshake).
    let silent = tokio::net::TcpStream::connect(n0.addr()).await.unwrap();
    let mut half = tokio::net::TcpStream::connect(n0.addr()).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut half, &[0x16, 0x03, 0x01, 0x00, 0x40, 0x01])
        .await
        .unwrap();
    let n1 = tls_node(&certs, "n1", &cookie, Some(n0.addr()))
        .await
        .unwrap();
    let n2 = tls_node(&certs, "n2", &cookie, Some(n0.addr()))
        .await
        .unwrap();
    let children = [&n0, &n1, &n2];
    let names: Vec<String> = children.iter().map(|n| n.node().to_string()).collect();

    // This process joins over TLS through n0 alone: the library dials n1 and n2 itself.
    let me = Node::start(
        NodeConfig::new("tls_client", "127.0.0.1:0")
            .cookie(&cookie)
            .tls(certs.member("tls_client").config()),
    )
    .await
    .unwrap();
    assert_eq!(me.connect(n0.addr()).await.unwrap(), n0.node());
    me.wait_for_peers(3, MESH_TIMEOUT).await.unwrap();
    assert_eq!(me.nodes(), names);
    // The children's mesh is complete too (n1 and n2 found each other through n0).
    let deadline = Instant::now() + MESH_TIMEOUT;
    for child in &names {
        loop {
            let seen = nodes_seen_by(&me, child).await;
            if seen.len() == 3 {
                break;
            }
            assert!(Instant::now() < deadline, "{child} sees only {seen:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    let balancer = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::default())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    let mut members = balancer.watch_members();
    tokio::time::timeout(MESH_TIMEOUT, members.wait_for(|m| m.len() == 3))
        .await
        .expect("three members")
        .unwrap();
    const CALLS: usize = 60;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..CALLS {
        let node = balancer
            .call::<Whoami>(())
            .timeout(Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(
        per_node.keys().cloned().collect::<Vec<_>>(),
        names,
        "{per_node:?}"
    );
    assert_eq!(per_node.values().sum::<usize>(), CALLS);
    assert!(per_node.values().all(|&n| n == CALLS / 3), "{per_node:?}");
    balancer.stop().await;
    me.shutdown().await;

    // The command-line client joins over TLS with the same flags.
    let client = certs.member("cli");
    let mut args = vec![
        "call".to_string(),
        "--peer".into(),
        n0.addr().into(),
        "--cookie".into(),
        cookie.clone(),
        "--balancer".into(),
        "work".into(),
        "--json".into(),
    ];
    args.extend(client.flags());
    args.push("whoami".into());
    let output = tokio::process::Command::new(BIN)
        .args(&args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(30), output)
        .await
        .expect("rpclb call finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        names.iter().any(|n| stdout.contains(n.as_str())),
        "{stdout}"
    );
    drop((silent, half));
    drop(certs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_and_wrong_ca_nodes_never_join_a_tls_cluster() {
    let certs = Certs::new();
    let cookie = random_cookie();
    let n0 = tls_node(&certs, "n0", &cookie, None).await.unwrap();
    let n1 = tls_node(&certs, "n1", &cookie, Some(n0.addr()))
        .await
        .unwrap();
    let members = vec![n0.node().to_string(), n1.node().to_string()];

    // Outsiders with the right cookie, dialling n0 and n1 in the background all along: a
    // plaintext node, and a node whose certificate and trust are another CA's.
    let mut plain = NodeSpec::new("plain", &cookie)
        .peer(n0.addr())
        .peer(n1.addr())
        .arg("--balancer")
        .arg("work")
        .start(BIN)
        .await
        .unwrap();
    let rogue_identity = certs.outsider("rogue", certs.other_ca_file.clone());
    let mut rogue = rogue_identity
        .spec(NodeSpec::new("rogue", &cookie))
        .peer(n0.addr())
        .peer(n1.addr())
        .arg("--balancer")
        .arg("work")
        .start(BIN)
        .await
        .unwrap();

    // Neither ever sees a peer come up (bounded wait while they keep redialling).
    let waited = Instant::now();
    match plain.wait_event("node_up", OUTSIDER_WAIT).await {
        Err(HarnessError::Timeout { .. }) => {}
        other => panic!("the plaintext node joined: {other:?}"),
    }
    let rest = OUTSIDER_WAIT.saturating_sub(waited.elapsed());
    match rogue
        .wait_event("node_up", rest.max(Duration::from_millis(200)))
        .await
    {
        Err(HarnessError::Timeout { .. }) => {}
        other => panic!("the wrong-CA node joined: {other:?}"),
    }

    // A TLS node of the cluster (this process) sees only the TLS members, everywhere.
    let member = certs.member("tls_client");
    let me = Node::start(
        NodeConfig::new("tls_client", "127.0.0.1:0")
            .cookie(&cookie)
            .tls(member.config()),
    )
    .await
    .unwrap();
    me.connect(n0.addr()).await.unwrap();
    me.wait_for_peers(2, MESH_TIMEOUT).await.unwrap();
    assert_eq!(me.nodes(), members);
    for child in &members {
        let seen = nodes_seen_by(&me, child).await;
        assert!(
            seen.iter()
                .all(|n| !n.starts_with("plain@") && !n.starts_with("rogue@")),
            "{child} is connected to an outsider: {seen:?}"
        );
        match me
            .control(child, ControlRequest::Members("work".into()))
            .await
        {
            Ok(ControlReply::Members(Some(work))) => assert_eq!(work, members, "{child}"),
            other => panic!("{child}: members gave {other:?}"),
        }
    }

    // Typed errors, from each side of each mismatch.
    // TLS node -> plaintext node.
    let started = Instant::now();
    let outcome = me.connect(plain.addr()).await;
    connect_failed(
        "TLS -> plaintext",
        outcome,
        plain.addr(),
        "TLS",
        started.elapsed(),
    );
    // TLS node -> node of another CA: its certificate is not trusted.
    let started = Instant::now();
    let outcome = me.connect(rogue.addr()).await;
    connect_failed(
        "TLS -> wrong CA",
        outcome,
        rogue.addr(),
        "TLS handshake failed",
        started.elapsed(),
    );
    assert_eq!(me.nodes(), members, "no outsider became a peer");
    me.shutdown().await;

    // Plaintext node -> TLS node.
    let me = Node::start(NodeConfig::new("plain_client", "127.0.0.1:0").cookie(&cookie))
        .await
        .unwrap();
    let started = Instant::now();
    let outcome = me.connect(n0.addr()).await;
    connect_failed(
        "plaintext -> TLS",
        outcome,
        n0.addr(),
        "requires TLS",
        started.elapsed(),
    );
    assert!(me.nodes().is_empty(), "{:?}", me.nodes());
    me.shutdown().await;

    // Wrong-CA node -> TLS node: it does not trust the cluster's certificate.
    let me = Node::start(
        NodeConfig::new("rogue_client", "127.0.0.1:0")
            .cookie(&cookie)
            .tls(
                certs
                    .outsider("rogue_client", certs.other_ca_file.clone())
                    .config(),
            ),
    )
    .await
    .unwrap();
    let started = Instant::now();
    let outcome = me.connect(n0.addr()).await;
    connect_failed(
        "wrong CA -> TLS",
        outcome,
        n0.addr(),
        "TLS handshake failed",
        started.elapsed(),
    );
    assert!(me.nodes().is_empty(), "{:?}", me.nodes());
    me.shutdown().await;

    // A node that trusts the cluster's CA but presents another CA's certificate would be
    // refused by every node it dials, and could not be dialled: it does not start.
    let outcome = Node::start(
        NodeConfig::new("half_client", "127.0.0.1:0")
            .cookie(&cookie)
            .tls(
                certs
                    .outsider("half_client", certs.ca_file.clone())
                    .config(),
            ),
    )
    .await;
    match outcome {
        Err(Error::InvalidConfig { option, reason }) => {
            assert_eq!(option, "tls.cert");
            assert!(reason.contains("UnknownIssuer"), "{reason}");
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }

    // Still nobody let them in.
    for outsider in [&mut plain, &mut rogue] {
        match outsider
            .wait_event("node_up", Duration::from_millis(100))
            .await
        {
            Err(HarnessError::Timeout { .. }) => {}
            other => panic!("an outsider joined: {other:?}"),
        }
    }
    drop(certs);
}

/// A node whose own certificate expired while it ran (one already expired does not start):
/// the cluster node refuses it after this node's side of the handshake is done, so all it
/// sees is a session closed during the handshake — and the reason names an expired
/// certificate among the causes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_certificate_is_among_the_reasons_given() {
    let certs = Certs::new();
    let cookie = random_cookie();
    let n0 = tls_node(&certs, "n0", &cookie, None).await.unwrap();
    let me = Node::start(
        NodeConfig::new("expired_client", "127.0.0.1:0")
            .cookie(&cookie)
            .tls(certs.expiring_member("expired_client", 2).config()),
    )
    .await
    .unwrap();
    // X.509 times have whole seconds: past the end by more than one.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let started = Instant::now();
    let outcome = me.connect(n0.addr()).await;
    connect_failed(
        "expired client certificate -> TLS",
        outcome,
        n0.addr(),
        "expired or not yet valid",
        started.elapsed(),
    );
    assert!(me.nodes().is_empty(), "{:?}", me.nodes());
    me.shutdown().await;
}
