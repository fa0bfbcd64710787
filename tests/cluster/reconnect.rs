//! Reconnecting: a node killed and restarted under its name on a new port is a member again
//! and gets calls; a peer found only through the mesh and lost uncleanly (dropped for missing
//! heartbeats) is redialled by the survivors — and, with `reconnect_give_up` zero, is not.

use std::collections::HashSet;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig};
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
