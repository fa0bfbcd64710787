//! A peer of another wire version is refused when its session is ready, with the typed error
//! on both sides, and never stays a member.

use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, Error, NodeEvent, WIRE_VERSION};
use rpclb::harness::{Cluster, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_of_another_wire_version_is_refused_on_both_sides() {
    let mut cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(["n", "future"]))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let mut events = me.events();

    // A node speaking another version dials n0.
    let other = WIRE_VERSION + 1;
    let mut future = NodeSpec::new("future", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .arg("--balancer")
        .arg("work")
        .arg("--wire-version")
        .arg(other.to_string())
        .start(BIN)
        .await
        .unwrap();
    let future_name = future.node().to_string();

    // Both sides of that session report the refusal, naming the other.
    let seen_by_n0 = cluster.nodes[0]
        .wait_event("node_refused", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(seen_by_n0["node"], future_name.as_str());
    assert!(
        seen_by_n0["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("wire version {other}")),
        "{seen_by_n0}"
    );
    let seen_by_future = future
        .wait_event("node_refused", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(seen_by_future["node"], cluster.names()[0].as_str());

    // This process dialling it gets the typed error, and refuses it too.
    match me.connect(future.addr()).await {
        Err(Error::WireVersion {
            node,
            local,
            remote,
        }) => {
            assert_eq!(node, future_name);
            assert_eq!((local, remote), (WIRE_VERSION, other));
        }
        other => panic!("expected WireVersion, got {other:?}"),
    }
    let refused = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match events.recv().await {
                Ok(NodeEvent::Refused { node, reason }) if node == future_name => return reason,
                Ok(_) => {}
                Err(e) => panic!("event stream ended: {e}"),
            }
        }
    })
    .await
    .expect("a Refused event here");
    assert!(refused.contains("wire version"), "{refused}");

    // It is not a peer nor a member anywhere, and calls keep going to n0 alone.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!me.nodes().contains(&future_name), "{:?}", me.nodes());
    assert!(!work.members().contains(&future_name));
    let members_on_n0 = me
        .control(
            &cluster.names()[0],
            rpc_load_balancer::ControlRequest::Members("work".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        members_on_n0,
        rpc_load_balancer::ControlReply::Members(Some(vec![cluster.names()[0].clone()]))
    );
    for _ in 0..20 {
        assert_eq!(work.call::<Whoami>(()).await.unwrap(), cluster.names()[0]);
    }
    future.kill().await;
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
