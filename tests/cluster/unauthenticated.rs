//! Connections that never pass the handshake cannot make a node hold much memory, nor keep
//! clients out. While 100 connections each announce a 16 MiB frame and send 8 MiB of it, and
//! while 1,024 connections trickle a byte every 100 ms for 10 s, the node's resident memory
//! stays within 64 MiB of its idle size and `rpclb call` is served. Plain TCP, and TLS: there
//! the big frames come from a client holding a certificate of the cluster's CA (it passes TLS
//! but not the cookie), the trickle is a ClientHello that never ends.
//!
//! The plain attackers start with an empty frame, which ractor_cluster takes and ignores: the
//! node gives them a session, the costliest kind of unauthenticated connection. The attackers
//! are this test's own TCP connections to 127.0.0.1, all closed at the end.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpclb::harness::{random_cookie, NodeProcess, NodeSpec};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::tls::{Certs, Identity};
use crate::BIN;

/// Most the node's resident memory may grow over its idle size during an attack, KiB.
const GROWTH_BOUND_KIB: u64 = 64 * 1024;

/// Connections announcing big frames, the frame they announce, and how much of it they send.
const BIG_FRAME_CONNECTIONS: usize = 100;
const ANNOUNCED: u64 = 16 << 20;
const SENT: usize = 8 << 20;

/// Trickling connections, their pace and how long they keep at it.
const TRICKLE_CONNECTIONS: usize = 1024;
const TRICKLE_EVERY: Duration = Duration::from_millis(100);
const TRICKLE_FOR: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_cannot_make_a_plain_node_hold_memory_or_keep_clients_out() {
    let cookie = random_cookie();
    let node = NodeSpec::new("target", &cookie).start(BIN).await.unwrap();
    let trickled = frame_header();
    attack(&node, &cookie, &[], Dial::Plain, &trickled, "plain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_cannot_make_a_tls_node_hold_memory_or_keep_clients_out() {
    let certs = Certs::new();
    let cookie = random_cookie();
    let node = certs
        .member("target")
        .spec(NodeSpec::new("target", &cookie))
        .start(BIN)
        .await
        .unwrap();
    let caller = certs.member("caller").flags();
    let dial = Dial::Tls(connector(&certs.member("stranger")));
    // A TLS record of 16 KiB carrying a ClientHello, of which only the start ever comes.
    let client_hello = [0x16, 0x03, 0x01, 0x40, 0x00, 0x01, 0x00, 0x3f, 0xfc];
    attack(&node, &cookie, &caller, dial, &client_hello, "TLS").await;
}

/// The NodeServer's own listener, on an ephemeral loopback port the node never advertises,
/// gives strangers nothing either: 1,100 idle connections to it and 50 announcing 16 MiB
/// frames neither keep `rpclb call` off the node's port nor grow its memory by more than
/// 64 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_internal_listener_holds_no_memory_and_keeps_no_client_out() {
    let cookie = random_cookie();
    let node = NodeSpec::new("target", &cookie).start(BIN).await.unwrap();
    let public: u16 = node.addr().rsplit(':').next().unwrap().parse().unwrap();
    let internal: Vec<u16> = listening_ports(node.pid())
        .into_iter()
        .filter(|port| *port != public)
        .collect();
    assert_eq!(
        internal.len(),
        1,
        "listening ports besides {public}: {internal:?}"
    );
    let internal = format!("127.0.0.1:{}", internal[0]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(node.pid());
    let peak = PeakRss::start(node.pid());
    let until = Instant::now() + Duration::from_secs(4);
    let mut attackers = JoinSet::new();
    for _ in 0..50 {
        let addr = internal.clone();
        attackers.spawn(async move { big_frame(&Dial::Plain, &addr, until).await });
    }
    let mut idlers = JoinSet::new();
    for _ in 0..1_100 {
        let addr = internal.clone();
        idlers.spawn(async move {
            let connected = tokio::time::timeout_at(until, TcpStream::connect(&addr)).await;
            tokio::time::sleep_until(until).await;
            matches!(connected, Ok(Ok(_)))
        });
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    call_whoami(&node, &cookie, &[]).await;
    let mut held = 0;
    while let Some(idler) = idlers.join_next().await {
        held += usize::from(idler.unwrap());
    }
    while attackers.join_next().await.is_some() {}
    let high = peak.stop().await;
    eprintln!(
        "internal listener, {held} idle connections and 50 announcing 16 MiB frames: node RSS \
         idle {} MiB, peak {} MiB (+{} MiB)",
        idle >> 10,
        high >> 10,
        high.saturating_sub(idle) >> 10
    );
    assert!(
        high.saturating_sub(idle) <= GROWTH_BOUND_KIB,
        "big frames on the internal listener grew the node by {} MiB",
        high.saturating_sub(idle) >> 10
    );
}

/// Runs both attacks on `node` (see the module docs), checking its memory and that `rpclb
/// call` with `cookie` and `call_flags` is served meanwhile. `dial` opens the big-frame
/// connections; the trickling ones send `trickled`, then zeros.
async fn attack(
    node: &NodeProcess,
    cookie: &str,
    call_flags: &[String],
    dial: Dial,
    trickled: &[u8],
    mode: &str,
) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(node.pid());

    // 1. Big frames, held for 4 s (the node closes unauthenticated sessions after 5 s).
    let peak = PeakRss::start(node.pid());
    let until = Instant::now() + Duration::from_secs(4);
    let mut attackers = JoinSet::new();
    for _ in 0..BIG_FRAME_CONNECTIONS {
        let (dial, addr) = (dial.clone(), node.addr().to_string());
        attackers.spawn(async move { big_frame(&dial, &addr, until).await });
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    call_whoami(node, cookie, call_flags).await;
    let (mut opened, mut sent) = (0, 0);
    while let Some(attacker) = attackers.join_next().await {
        if let Ok(Some(bytes)) = attacker {
            opened += 1;
            sent += bytes;
        }
    }
    let high = peak.stop().await;
    eprintln!(
        "{mode}, {opened} connections announcing {} MiB frames sent {} MiB in all: node RSS idle \
         {} MiB, peak {} MiB (+{} MiB)",
        ANNOUNCED >> 20,
        sent >> 20,
        idle >> 10,
        high >> 10,
        high.saturating_sub(idle) >> 10
    );
    assert!(opened > BIG_FRAME_CONNECTIONS / 2, "{opened} connections");
    assert!(
        high.saturating_sub(idle) <= GROWTH_BOUND_KIB,
        "{mode}: big frames grew the node by {} MiB",
        high.saturating_sub(idle) >> 10
    );

    // 2. 1,024 connections trickling, reconnecting when the node closes them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kib(node.pid());
    let peak = PeakRss::start(node.pid());
    let until = Instant::now() + TRICKLE_FOR;
    let pattern: Arc<[u8]> = Arc::from(trickled);
    let mut attackers = JoinSet::new();
    for _ in 0..TRICKLE_CONNECTIONS {
        let (pattern, addr) = (Arc::clone(&pattern), node.addr().to_string());
        attackers.spawn(async move { trickle(&addr, &pattern, until).await });
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    call_whoami(node, cookie, call_flags).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    call_whoami(node, cookie, call_flags).await;
    let (mut connections, mut bytes) = (0, 0);
    while let Some(attacker) = attackers.join_next().await {
        let (c, b) = attacker.unwrap();
        connections += c;
        bytes += b;
    }
    let high = peak.stop().await;
    eprintln!(
        "{mode}, {TRICKLE_CONNECTIONS} trickling connections ({connections} opened, {bytes} \
         bytes sent): node RSS idle {} MiB, peak {} MiB (+{} MiB)",
        idle >> 10,
        high >> 10,
        high.saturating_sub(idle) >> 10
    );
    assert!(
        connections >= TRICKLE_CONNECTIONS,
        "{connections} connections"
    );
    assert!(
        high.saturating_sub(idle) <= GROWTH_BOUND_KIB,
        "{mode}: trickling grew the node by {} MiB",
        high.saturating_sub(idle) >> 10
    );
}

/// An empty frame, then the length prefix of a 16 MiB frame.
fn frame_header() -> Vec<u8> {
    let mut bytes = 0u64.to_be_bytes().to_vec();
    bytes.extend(ANNOUNCED.to_be_bytes());
    bytes
}

/// One connection sending an empty frame, then announcing a 16 MiB frame and sending 8 MiB
/// of it (as far as the node takes it) until `until`; the bytes sent, `None` if it could not
/// connect.
async fn big_frame(dial: &Dial, addr: &str, until: Instant) -> Option<usize> {
    let mut stream = tokio::time::timeout_at(until, dial.open(addr))
        .await
        .ok()?
        .ok()?;
    let mut sent = 0;
    let chunk = vec![0x5a; 64 << 10];
    let _ = tokio::time::timeout_at(until, async {
        stream.write_all(&frame_header()).await?;
        while sent < SENT {
            stream.write_all(&chunk).await?;
            sent += chunk.len();
        }
        stream.flush().await?;
        tokio::time::sleep_until(until).await;
        Ok::<_, std::io::Error>(())
    })
    .await;
    Some(sent)
}

/// One connection sending `pattern` (then zeros) a byte per [`TRICKLE_EVERY`] until `until`,
/// reconnecting when the node closes it: (connections opened, bytes sent).
async fn trickle(addr: &str, pattern: &[u8], until: Instant) -> (usize, usize) {
    let (mut opened, mut sent) = (0, 0);
    let mut stream: Option<(TcpStream, usize)> = None;
    while Instant::now() < until {
        if stream.is_none() {
            if let Ok(Ok(tcp)) = tokio::time::timeout_at(until, TcpStream::connect(addr)).await {
                opened += 1;
                stream = Some((tcp, 0));
            }
        }
        if let Some((tcp, at)) = &mut stream {
            let byte = pattern.get(*at).copied().unwrap_or(0);
            match tokio::time::timeout(Duration::from_secs(1), tcp.write_all(&[byte])).await {
                Ok(Ok(())) => {
                    *at += 1;
                    sent += 1;
                }
                _ => stream = None,
            }
        }
        tokio::time::sleep(TRICKLE_EVERY).await;
    }
    (opened, sent)
}

/// `rpclb call --node NODE whoami` through `node` must succeed within 20 s.
async fn call_whoami(node: &NodeProcess, cookie: &str, flags: &[String]) {
    let started = Instant::now();
    let child = tokio::process::Command::new(BIN)
        .args(["call", "--peer", node.addr(), "--cookie", cookie])
        .args(flags)
        .args(["--node", node.node(), "whoami"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("rpclb call finished within 20 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains(node.node()),
        "rpclb call failed during the attack ({:?}): {stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("rpclb call served in {} ms", started.elapsed().as_millis());
}

/// How the big-frame connections reach the node.
#[derive(Clone)]
enum Dial {
    Plain,
    /// TLS with a certificate of the cluster's CA.
    Tls(TlsConnector),
}

impl Dial {
    async fn open(&self, addr: &str) -> std::io::Result<Box<dyn AsyncWrite + Unpin + Send>> {
        let tcp = TcpStream::connect(addr).await?;
        match self {
            Dial::Plain => Ok(Box::new(tcp)),
            Dial::Tls(connector) => {
                let name = ServerName::try_from("127.0.0.1").expect("an IP address");
                Ok(Box::new(connector.connect(name, tcp).await?))
            }
        }
    }
}

/// A TLS client presenting `identity`'s certificate and trusting its CA.
fn connector(identity: &Identity) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(&identity.ca).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let chain = CertificateDer::pem_file_iter(&identity.cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&identity.key).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
    TlsConnector::from(Arc::new(config))
}

/// The TCP ports `pid` listens on (its LISTEN sockets in /proc/PID/net/tcp).
fn listening_ports(pid: u32) -> Vec<u16> {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
            let port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (*state == "0A" && inodes.contains(*inode)).then_some(port)
        })
        .collect()
}

/// `pid`'s resident set size, KiB (`VmRSS` in /proc/PID/status).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// The highest RSS of a process, sampled every 50 ms until stopped.
struct PeakRss {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl PeakRss {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let stop = Arc::clone(&stop);
            async move {
                let mut high = rss_kib(pid);
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    high = high.max(rss_kib(pid));
                }
                high
            }
        });
        Self { stop, task }
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}
