//! Node lifecycle: clean exit on SIGTERM, no orphans when the parent dies, attaching to an
//! app's own NodeServer.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ractor::Actor;
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::NodeServer;
use rpc_load_balancer::{Node, NodeConfig};
use rpclb::harness::{random_cookie, Cluster, HarnessError, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_node_cleanly_and_peers_see_it_leave() {
    let mut cluster = Cluster::start(BIN, 2, &[]).await.unwrap();
    let leaving = cluster.nodes[1].node().to_string();
    cluster.nodes[0]
        .wait_event("node_up", MESH_TIMEOUT)
        .await
        .unwrap();
    cluster.nodes[1].signal(libc::SIGTERM);
    let stopped = cluster.nodes[1]
        .wait_event("stopped", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(stopped["node"], leaving.as_str());
    let status = cluster.nodes[1]
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("exits");
    assert!(status.success(), "exit status {status:?}");
    // It announced it was leaving before its session closed.
    let announced = cluster.nodes[0]
        .wait_event("node_leaving", Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(announced["node"], leaving.as_str());
    let down = cluster.nodes[0]
        .wait_event("node_down", Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(down["node"], leaving.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_exits_when_its_parent_goes_away() {
    let mut child = NodeSpec::new("orphan", random_cookie())
        .start(BIN)
        .await
        .unwrap();
    child.close_stdin(); // what the kernel does when the test process dies
    let status = child
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("the child exits by itself");
    assert!(status.success(), "exit status {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_uses_the_apps_own_node_server() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = NodeServer::new(
        port,
        cluster.cookie().to_string(),
        "app".to_string(),
        "127.0.0.1".to_string(),
        None,
        Some(NodeConnectionMode::Transitive),
    )
    .with_listen_addr(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let (server, _) = Actor::spawn(None, server, ()).await.unwrap();
    let node = Node::attach(server.clone(), NodeConfig::new("app", "127.0.0.1:0"))
        .await
        .unwrap();
    assert_eq!(node.name(), "app@127.0.0.1");
    let peer = node.connect(cluster.nodes[0].addr()).await.unwrap();
    assert_eq!(node.call::<Whoami>(peer.clone(), ()).await.unwrap(), peer);
    node.shutdown().await;
    // The app's server outlives the node.
    assert_eq!(server.get_status(), ractor::ActorStatus::Running);
    server.stop(None);
}

/// A node joining a running cluster is reached by every member within milliseconds of its
/// start — before it has registered its functions and started its balancers. Each of them
/// must still be reported: listed in the ready line's `peers` and, in any case, as a
/// `node_up` line after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_node_reports_every_peer_even_those_that_came_first() {
    let mut cluster = Cluster::start(BIN, 3, &[]).await.unwrap();
    for node in &mut cluster.nodes[1..] {
        node.wait_event("node_up", MESH_TIMEOUT).await.unwrap();
    }
    let expected: BTreeSet<String> = cluster.names().into_iter().collect();
    // Many balancers widen the time between the node's start and its ready line.
    let mut spec = NodeSpec::new("late", cluster.cookie()).peer(cluster.nodes[0].addr());
    for i in 0..40 {
        spec = spec.arg("--balancer").arg(format!("b{i}"));
    }
    let mut late = spec.start(BIN).await.unwrap();
    let listed = late.ready_line()["peers"]
        .as_array()
        .unwrap_or_else(|| panic!("a peers list: {}", late.ready_line()))
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect::<BTreeSet<String>>();
    assert!(listed.is_subset(&expected), "{listed:?}");
    let mut reported = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + MESH_TIMEOUT;
    while reported != expected {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match late.wait_event("node_up", left).await {
            Ok(up) => {
                let node = up["node"].as_str().unwrap().to_string();
                assert!(reported.insert(node.clone()), "{node} reported twice");
            }
            Err(HarnessError::Timeout { .. }) => {
                panic!("only {reported:?} reported (ready listed {listed:?}), not {expected:?}")
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(listed.is_subset(&reported), "{listed:?} / {reported:?}");
    // Nothing more to report: no duplicate `node_up`.
    match late.wait_event("node_up", Duration::from_millis(300)).await {
        Err(HarnessError::Timeout { .. }) => {}
        other => panic!("an extra node_up: {other:?}"),
    }
}
