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
