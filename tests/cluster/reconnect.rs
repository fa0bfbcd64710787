//! Reconnecting: a node killed and restarted under its name on a new port is a member again
//! and gets calls; a peer found only through the mesh and lost uncleanly (dropped for missing
//! heartbeats) is redialled by the survivors — and, with `reconnect_give_up` zero, is not.

use std::collections::HashSet;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, ControlReply, ControlRequest, Node, NodeConfig};
use rpclb::harness::{Cluster, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_and_restarted_on_a_new_port_is_a_member_again_and_gets_calls() {
    let mut cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(["n"]))
        .await
        .unwrap();
    work.wait_for_members(3, MESH_TIMEOUT).await.unwrap();

    let old_addr = cluster.nodes[2].addr().to_string();
    cluster.nodes[2].kill().await;
    let mut members = work.watch_members();
    tokio::time::timeout(
        Duration::from_secs(5),
        members.wait_for(|m| !m.contains(&names[2])),
    )
    .await
    .expect("the killed node leaves the members")
    .unwrap();

    // Same name, new port, dialling one survivor only.
    let restarted = NodeSpec::new("n2", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .arg("--balancer")
        .arg("work")
        .start(BIN)
        .await
        .unwrap();
    assert_eq!(restarted.node(), names[2]);
    assert_ne!(restarted.addr(), old_addr, "restarted on a new port");
    cluster.nodes[2] = restarted;
    work.wait_for_members(3, Duration::from_secs(10))
        .await
        .expect("the restarted node is a member again within 10 s");

    // It gets calls: balanced calls reach every node, the restarted one included.
    let mut reached = HashSet::new();
    for _ in 0..60 {
        reached.insert(work.call::<Whoami>(()).await.unwrap());
    }
    assert_eq!(reached, names.iter().cloned().collect::<HashSet<_>>());
    // And the other survivor finds it too (the mesh introduces it), within the same 10 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen_by_n1 = me
            .control(&names[1], rpc_load_balancer::ControlRequest::Nodes)
            .await
            .unwrap();
        if matches!(&seen_by_n1, rpc_load_balancer::ControlReply::Nodes(nodes) if nodes.contains(&names[2]))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "n1 never reconnected to the restarted node: {seen_by_n1:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// Starts one node that dials nobody and redials nobody, connects this process to it (a
/// one-off `connect`, so for this node it is a peer found, not a configured one), pauses it
/// until the heartbeats drop it here, resumes it, and reports whether it is connected again
/// within `wait`.
async fn resumed_peer_comes_back(me_config: NodeConfig, wait: Duration) -> bool {
    let cookie = rpclb::harness::random_cookie();
    let mut lone = NodeSpec::new("lone", &cookie)
        .arg("--reconnect-give-up-ms")
        .arg("0")
        .start(BIN)
        .await
        .unwrap();
    let me = Node::start(me_config.cookie(&cookie)).await.unwrap();
    let name = me.connect(lone.addr()).await.unwrap();
    lone.signal(libc::SIGSTOP);
    let mut nodes = me.watch_nodes();
    tokio::time::timeout(
        Duration::from_secs(6),
        nodes.wait_for(|n| !n.contains(&name)),
    )
    .await
    .expect("the heartbeats drop the paused node")
    .unwrap();
    lone.signal(libc::SIGCONT);
    let back = tokio::time::timeout(wait, nodes.wait_for(|n| n.contains(&name)))
        .await
        .is_ok();
    me.shutdown().await;
    lone.kill().await;
    back
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_lost_uncleanly_is_redialled_until_it_is_back() {
    let me = NodeConfig::new("tester", "127.0.0.1:0");
    assert!(
        resumed_peer_comes_back(me, Duration::from_secs(10)).await,
        "the resumed peer is connected again within 10 s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reconnect_a_peer_lost_uncleanly_stays_lost() {
    // The control case of the test above: the resumed node redials nobody, so only our
    // redialling could bring it back.
    let me = NodeConfig::new("tester", "127.0.0.1:0").reconnect_give_up(Duration::ZERO);
    assert!(
        !resumed_peer_comes_back(me, Duration::from_secs(4)).await,
        "nothing should have redialled the resumed peer"
    );
}

/// The address `node` has on record for its peer `peer`, once it has one (≤ 10 s).
async fn address_of(me: &Node, node: &str, peer: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = me
            .control(node, ControlRequest::ConnectionOf(peer.to_string()))
            .await
            .unwrap();
        match reply {
            ControlReply::ConnectionOf(Some(addr)) => return addr,
            other => assert!(
                tokio::time::Instant::now() < deadline,
                "{node} never saw {peer}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `node` has lost its session to `peer` (≤ 5 s).
async fn until_lost(me: &Node, node: &str, peer: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while let ControlReply::ConnectionOf(Some(_)) = me
        .control(node, ControlRequest::ConnectionOf(peer.to_string()))
        .await
        .unwrap()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{node} still has {peer}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Listens on `addr` (a killed process's port) and reports whether anything dials it within
/// `wait`.
async fn dialled_within(addr: &str, wait: Duration) -> bool {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    tokio::time::timeout(wait, listener.accept()).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_client_node_is_neither_introduced_nor_redialled_a_killed_server_is() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let n0 = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    // A client: `rpclb load` joins through n0 as a client node.
    let mut load = tokio::process::Command::new(BIN)
        .args(["load", "--peer", cluster.nodes[0].addr(), "--cookie"])
        .arg(cluster.cookie())
        .args(["--balancer", "work", "--duration", "30"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client = format!("rpclb-client-{}@127.0.0.1", load.id().unwrap());
    let client_addr = address_of(&me, &n0, &client).await;
    // n0 does not introduce it to nodes that join through n0.
    match me.control(&n0, ControlRequest::Peers).await.unwrap() {
        ControlReply::Peers(peers) => {
            assert!(peers.iter().all(|(name, _)| *name != client), "{peers:?}");
            assert!(
                peers.iter().any(|(name, _)| name.starts_with("tester@")),
                "{peers:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    load.start_kill().unwrap();
    let _ = load.wait().await;
    until_lost(&me, &n0, &client).await;
    assert!(
        !dialled_within(&client_addr, Duration::from_secs(3)).await,
        "n0 redialled a client node"
    );

    // The control case: a server node found through the mesh, killed, is redialled.
    let mut server = NodeSpec::new("server", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .start(BIN)
        .await
        .unwrap();
    let server_name = server.node().to_string();
    let server_addr = address_of(&me, &n0, &server_name).await;
    server.kill().await;
    until_lost(&me, &n0, &server_name).await;
    assert!(
        dialled_within(&server_addr, Duration::from_secs(5)).await,
        "n0 did not redial a server node lost uncleanly"
    );
    me.shutdown().await;
    cluster.shutdown().await;
}
