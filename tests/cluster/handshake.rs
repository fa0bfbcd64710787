//! Joining the cluster: rejected handshakes are typed errors within the connect bound, and a
//! process runs at most one node.

use std::time::{Duration, Instant};

use rpc_load_balancer::{ControlReply, ControlRequest, Error, Node, NodeConfig};
use rpclb::harness::{random_cookie, Cluster, NodeSpec};

use crate::BIN;

/// `NodeConfig::connect_timeout`'s default, plus slack for a loaded debug build.
const CONNECT_BOUND: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_cookie_is_rejected_within_the_bound() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let me = Node::start(NodeConfig::new("intruder", "127.0.0.1:0").cookie(random_cookie()))
        .await
        .unwrap();
    let started = Instant::now();
    match me.connect(cluster.nodes[0].addr()).await {
        Err(Error::ConnectFailed { addr, reason }) => {
            assert_eq!(addr, cluster.nodes[0].addr());
            assert!(reason.contains("wrong cookie"), "{reason}");
        }
        other => panic!("wrong cookie gave {other:?}"),
    }
    assert!(
        started.elapsed() < CONNECT_BOUND,
        "took {:?}",
        started.elapsed()
    );
    assert!(me.nodes().is_empty(), "no session reached ready");
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_node_name_is_rejected_within_the_bound() {
    let cookie = random_cookie();
    let first = NodeSpec::new("a", &cookie).start(BIN).await.unwrap();
    let mut dup = NodeSpec::new("dup", &cookie)
        .peer(first.addr())
        .start(BIN)
        .await
        .unwrap();
    dup.wait_event("node_up", Duration::from_secs(5))
        .await
        .unwrap();

    // ractor_cluster's own election between the two is random, so try several times.
    for attempt in 0..4 {
        let me = Node::start(NodeConfig::new("dup", "127.0.0.1:0").cookie(&cookie))
            .await
            .unwrap();
        let started = Instant::now();
        match me.connect(first.addr()).await {
            Err(Error::ConnectFailed { reason, .. }) => {
                assert!(
                    reason.contains("duplicate node name"),
                    "attempt {attempt}: {reason}"
                )
            }
            other => panic!("attempt {attempt}: duplicate name gave {other:?}"),
        }
        assert!(
            started.elapsed() < CONNECT_BOUND,
            "took {:?}",
            started.elapsed()
        );
        assert!(me.nodes().is_empty(), "attempt {attempt}: {:?}", me.nodes());
        me.shutdown().await;
    }

    // The first `dup` is (again) the one `a` knows.
    let observer = Node::start(NodeConfig::new("observer", "127.0.0.1:0").cookie(&cookie))
        .await
        .unwrap();
    observer.connect(first.addr()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let recorded = observer
            .control(
                first.node(),
                ControlRequest::ConnectionOf(dup.node().to_string()),
            )
            .await;
        if recorded == Ok(ControlReply::ConnectionOf(Some(dup.addr().to_string()))) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a records dup as {recorded:?}, expected {}",
            dup.addr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    observer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_per_process_and_a_down_peer_never_fails_start() {
    let cookie = random_cookie();
    // A peer nobody listens on: start still succeeds, dialling goes on in the background.
    let unused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let node = Node::start(
        NodeConfig::new("solo", "127.0.0.1:0")
            .cookie(&cookie)
            .peers([unused.clone()]),
    )
    .await
    .unwrap();
    assert!(node.listen_addr().starts_with("127.0.0.1:") && !node.listen_addr().ends_with(":0"));
    let second = Node::start(NodeConfig::new("other", "127.0.0.1:0").cookie(&cookie)).await;
    assert_eq!(second.unwrap_err(), Error::NodeAlreadyRunning);
    match node.connect(&unused).await {
        Err(Error::ConnectFailed { reason, .. }) => {
            assert!(reason.contains("TCP connect failed"), "{reason}")
        }
        other => panic!("connect to a closed port gave {other:?}"),
    }
    match node.wait_for_peers(1, Duration::from_millis(200)).await {
        Err(Error::PeersNotReady {
            wanted: 1,
            connected: 0,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }

    // The peer comes up later: the background dialler connects to it.
    let mut late = NodeSpec::new("late", &cookie).start(BIN).await.unwrap();
    let node2 = late.addr().to_string();
    node.connect(&node2).await.unwrap();
    assert_eq!(node.nodes(), vec![late.node().to_string()]);
    late.kill().await;

    // After shutdown a new node may start; a port in use is a startup error.
    node.shutdown().await;
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = busy.local_addr().unwrap().to_string();
    match Node::start(NodeConfig::new("again", taken).cookie(&cookie)).await {
        Err(Error::Startup { reason }) => assert!(reason.contains("cannot listen"), "{reason}"),
        other => panic!("busy port gave {other:?}"),
    }
    match Node::start(NodeConfig::new("again", "127.0.0.1:0")).await {
        Err(Error::InvalidConfig {
            option: "cookie", ..
        }) => {}
        other => panic!("missing cookie gave {other:?}"),
    }
    let again = Node::start(NodeConfig::new("again", "127.0.0.1:0").cookie(&cookie))
        .await
        .unwrap();
    again.shutdown().await;
}

/// The node that refuses a peer for its cookie says so at WARN, naming the peer's address and
/// name and the reason, at most once per 10 s however often the peer tries; a refused
/// connection is logged once (not again as a stalled handshake at its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_cookie_is_warned_about_on_the_refusing_node_rate_limited() {
    let guard = NodeSpec::new("guard", random_cookie())
        .capture_stderr()
        .start(BIN)
        .await
        .unwrap();
    let me = Node::start(NodeConfig::new("intruder", "127.0.0.1:0").cookie(random_cookie()))
        .await
        .unwrap();
    for attempt in 0..8 {
        match me.connect(guard.addr()).await {
            Err(Error::ConnectFailed { reason, .. }) if reason.contains("wrong cookie") => {}
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    // A refusal is logged once the peer stayed away for 1 s (see `cluster.rs`).
    let deadline = Instant::now() + Duration::from_secs(5);
    let warnings = loop {
        let stderr = guard.stderr();
        let warnings: Vec<String> = stderr
            .lines()
            .filter(|line| line.contains("refused a peer's handshake"))
            .map(str::to_string)
            .collect();
        if !warnings.is_empty() || Instant::now() > deadline {
            break warnings;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Give the other refusals time to be (not) logged, and every refused connection's
    // handshake deadline (connect_timeout, 5 s after its accept, which was before the first
    // warning) time to pass: a refused connection's slot ends with its session, so no timeout
    // is logged for it afterwards.
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let stderr = guard.stderr();
    assert!(
        !stderr.contains("no handshake within") && !stderr.contains("incoming connection dropped"),
        "a refused connection was logged again at its handshake deadline\n{stderr}"
    );
    let all: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("refused a peer's handshake"))
        .collect();
    assert_eq!(
        all.len(),
        1,
        "8 refusals in a few seconds: one line\n{stderr}"
    );
    let line = &warnings[0];
    assert!(
        line.contains(" WARN ")
            && line.contains("peer=intruder@127.0.0.1")
            && line.contains("peer_addr=127.0.0.1:")
            && line.contains("reason=wrong cookie"),
        "{line}"
    );
    me.shutdown().await;
}

/// `rpclb node` without `--cookie` (or `$RPCLB_COOKIE`) runs on the development cookie and
/// says so once at start; with a cookie it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_development_cookie_is_warned_about_once() {
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

    let mut child = tokio::process::Command::new(BIN)
        .args([
            "node",
            "--name",
            "dev",
            "--listen",
            "127.0.0.1:0",
            "--exit-with-stdin",
        ])
        .env_remove("RPCLB_COOKIE")
        .env("RUST_LOG", rpclb::DEFAULT_LOG_FILTER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            if line.contains("\"ready\"") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "no ready line");
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(child.stdin.take());
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().unwrap();
    tokio::time::timeout(Duration::from_secs(15), pipe.read_to_string(&mut stderr))
        .await
        .expect("the node exits when its stdin closes")
        .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("default development cookie"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains(" WARN ") && warnings[0].contains("rpclb-dev-cookie"),
        "{}",
        warnings[0]
    );

    let mut with_cookie = NodeSpec::new("secret", random_cookie())
        .capture_stderr()
        .start(BIN)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    with_cookie.kill().await;
    let stderr = with_cookie.stderr();
    assert!(!stderr.contains("default development cookie"), "{stderr}");
}
