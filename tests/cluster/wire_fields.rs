//! A rolling upgrade within one wire version: a node that sends a field of a newer release
//! (`rpclb node --wire-extra-field`: an unknown field after every call header, reply status
//! and control request it sends) and nodes of this release call and serve each other, both
//! ways, as two nodes of one release do (docs/reference/wire-compatibility.md).

use std::collections::BTreeSet;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, RemoteFailure, RoundRobin,
    WIRE_VERSION,
};
use rpclb::harness::Cluster;

use crate::{CallWhoami, Fail, Whoami, BIN, MESH_TIMEOUT};

/// Bound on each call (a debug build on 2 shared cores answers in milliseconds).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_sending_fields_of_a_newer_release_is_served_and_answered_both_ways() {
    let cluster = Cluster::start_each(
        BIN,
        &[
            &["--wire-extra-field", "--balancer", "work"],
            &["--balancer", "work"],
        ],
    )
    .await
    .unwrap();
    let names = cluster.names();
    let (newer, current) = (names[0].clone(), names[1].clone());
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    // Calls carrying the field: the newer node calls `whoami` on the current one, which serves
    // it. (Its answer comes back to this node in a reply carrying the field.)
    let answer = me
        .call::<CallWhoami>(newer.clone(), current.clone())
        .timeout(CALL_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        answer, current,
        "the current node served the newer one's call"
    );

    // Replies carrying the field: the current node calls the newer one and reads its reply.
    let answer = me
        .call::<CallWhoami>(current.clone(), newer.clone())
        .timeout(CALL_TIMEOUT)
        .await
        .unwrap();
    assert_eq!(answer, newer, "the current node read the newer one's reply");

    // A status that carries a message, followed by the field, arrives intact.
    match me
        .call::<Fail>(newer.clone(), "disk full".into())
        .timeout(CALL_TIMEOUT)
        .await
    {
        Err(Error::Remote {
            failure: RemoteFailure::Failed,
            message,
            ..
        }) => assert_eq!(message, "disk full"),
        other => panic!("a failed call on the newer node gave {other:?}"),
    }

    // Control requests and replies carrying the field, both ways.
    match me.control(&newer, ControlRequest::Ping).await.unwrap() {
        ControlReply::Pong { node, wire_version } => {
            assert_eq!((node, wire_version), (newer.clone(), WIRE_VERSION));
        }
        other => panic!("ping gave {other:?}"),
    }
    for (asked, member) in [(&newer, &current), (&current, &newer)] {
        let listed = me
            .control(asked, ControlRequest::Members("work".into()))
            .await
            .unwrap();
        let ControlReply::Members(Some(members)) = listed else {
            panic!("{asked} listed {listed:?}");
        };
        assert!(members.contains(member), "{asked} lists {members:?}");
    }

    // Balanced calls reach both members and read both kinds of reply.
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(["n"]),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let mut served_by = BTreeSet::new();
    for _ in 0..4 {
        served_by.insert(work.call::<Whoami>(()).await.unwrap());
    }
    assert_eq!(served_by, BTreeSet::from([newer.clone(), current.clone()]));

    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
