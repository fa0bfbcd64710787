//! The mesh review's findings (issue 21), across real processes: a peer restarted under its
//! name and address while other sessions are in their handshake is reported down and up again
//! and checked again (its new labels), not taken for a handover; and peers that accept
//! connections but never answer do not hold the node's dial slots (`max_dials_in_flight`)
//! from a real peer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{Node, NodeConfig, NodeEvent};
use rpclb::harness::{random_cookie, NodeSpec};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::BIN;

/// Bound for an event, a label or a connect to be seen.
const BOUND: Duration = Duration::from_secs(20);

/// A TCP listener on 127.0.0.1 that accepts connections and never answers (a hung peer: a
/// stopped process's kernel still accepts, or a stranger's port); it holds every connection
/// until dropped.
struct SilentListener {
    addr: String,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl SilentListener {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            let mut held: Vec<TcpStream> = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::AcqRel);
                held.push(stream);
            }
        });
        Self {
            addr,
            accepted,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Acquire)
    }

    /// Waits (≤ [`BOUND`]) until it accepted `count` connections.
    async fn wait_accepted(&self, count: usize) {
        let deadline = tokio::time::Instant::now() + BOUND;
        while self.accepted() < count {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} accepted {} connections, not {count}",
                self.addr,
                self.accepted()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port of 127.0.0.1 free now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (≤ [`BOUND`]) until `me` knows `node`'s label `gen` as `want`.
async fn wait_generation(me: &Node, node: &str, want: &str) {
    let mut watch = me.watch_labels();
    let known = |me: &Node| {
        me.labels_of(node)
            .and_then(|l| l.get("gen").map(str::to_string))
    };
    let reached = tokio::time::timeout(BOUND, async {
        while known(me).as_deref() != Some(want) {
            let _ = tokio::time::timeout(Duration::from_millis(200), watch.changed()).await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "{node}'s label gen is {:?}, not {want}",
        known(me)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_restarted_under_its_name_and_address_is_down_then_up_with_its_new_labels() {
    let cookie = random_cookie();
    let me = Node::start(NodeConfig::new("watcher", "127.0.0.1:0").cookie(&cookie))
        .await
        .unwrap();
    // Dials of a hung peer, one after another: this node always has a session in its
    // handshake, which used to make any peer's close a handover.
    let silent = SilentListener::start().await;
    let dialling = tokio::spawn({
        let (me, addr) = (me.clone(), silent.addr.clone());
        async move {
            loop {
                let _ = me.connect(&addr).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    silent.wait_accepted(1).await;

    let listen = format!("127.0.0.1:{}", free_port());
    let spec = |generation: &str| {
        NodeSpec::new("b", &cookie)
            .listen(&listen)
            .peer(me.listen_addr())
            .arg("--label")
            .arg(format!("gen={generation}"))
    };
    let mut first = spec("1").start(BIN).await.unwrap();
    let name = first.node().to_string();
    wait_generation(&me, &name, "1").await;

    let mut events = me.events();
    first.kill().await;
    let mut second = spec("2").start(BIN).await.unwrap();
    assert_eq!(second.node(), name, "restarted under the same name");
    assert_eq!(second.addr(), listen, "and the same address");

    // Down, then Up again.
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + BOUND;
    while !seen.ends_with(&["down", "up"]) {
        let event = tokio::time::timeout_at(deadline, events.recv()).await;
        match event {
            Ok(Ok(NodeEvent::Down { node })) if node == name => seen.push("down"),
            Ok(Ok(NodeEvent::Up { node })) if node == name => seen.push("up"),
            Ok(Ok(_)) => {}
            other => panic!("{name}: events {seen:?}, then {other:?}"),
        }
    }
    // Checked again as a new peer: its new labels.
    wait_generation(&me, &name, "2").await;
    assert!(me.nodes().contains(&name));

    dialling.abort();
    second.kill().await;
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_peers_do_not_hold_the_dial_slots_from_a_real_peer() {
    let cookie = random_cookie();
    let mut real = NodeSpec::new("real", &cookie).start(BIN).await.unwrap();
    // Two dial slots, both taken by dials of hung peers, and a connect bound (10 s) long
    // enough to tell "a slot given back while the hung dial goes on" from "a slot freed when
    // the hung dial gave up".
    let config = NodeConfig::new("dialler", "127.0.0.1:0")
        .cookie(&cookie)
        .max_dials_in_flight(2)
        .connect_timeout(Duration::from_secs(10));
    let me = Node::start(config).await.unwrap();
    let hung = [SilentListener::start().await, SilentListener::start().await];
    let dials: Vec<_> = hung
        .iter()
        .map(|listener| {
            let (me, addr) = (me.clone(), listener.addr.clone());
            tokio::spawn(async move { me.connect(&addr).await })
        })
        .collect();
    for listener in &hung {
        listener.wait_accepted(1).await;
    }

    let connected = me.connect(real.addr()).await;
    assert_eq!(
        connected.as_ref().ok().map(String::as_str),
        Some(real.node()),
        "the real peer connects while hung peers are dialled: {connected:?}"
    );
    // It got a slot while both hung dials were still waiting for an answer: they gave their
    // slots back rather than holding them for their whole bound.
    assert!(
        dials.iter().all(|dial| !dial.is_finished()),
        "the hung dials had ended: the real one waited for them"
    );
    for dial in dials {
        assert!(dial.await.unwrap().is_err(), "a hung peer never connects");
    }
    real.kill().await;
    me.shutdown().await;
}
