//! Node labels across real processes: three `rpclb node` children labelled `zone=a`, `zone=a`
//! and `zone=b` (the second also `version=2`), and this process's node labelled `zone=a`.
//! Peers learn each other's labels; label filters pick nodes by them (a balancer's
//! `node_match_list` on each node against its own labels, a random-node call against the
//! peers'); a balancer with locality sends every call to the zone-a members while they are
//! there and can take it (under a cap of 1 call per member, a call finds zone a full and goes
//! to zone b), and to zone b once both are killed.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Labels, Locality, Node, NodeConfig,
    NodeFilter, RoundRobin,
};
use rpclb::harness::Cluster;

use crate::{Sleep, Whoami, BIN, MESH_TIMEOUT};

/// Bound for labels and membership changes to reach this node.
const BOUND: Duration = Duration::from_secs(10);

/// Waits (≤ [`BOUND`]) until this node knows the labels of every node in `nodes`.
async fn wait_labels(me: &Node, nodes: &[String]) {
    let mut watch = me.watch_labels();
    let known = tokio::time::timeout(BOUND, async {
        while !nodes.iter().all(|n| me.labels_of(n).is_some()) {
            let _ = watch.changed().await;
        }
    })
    .await;
    assert!(
        known.is_ok(),
        "labels known: {:?}",
        nodes
            .iter()
            .map(|n| (n, me.labels_of(n)))
            .collect::<Vec<_>>()
    );
}

/// Who served each of `calls` calls through `balancer`.
async fn served(balancer: &Balancer, calls: usize) -> BTreeMap<String, usize> {
    let mut served = BTreeMap::new();
    for _ in 0..calls {
        let node = balancer.call::<Whoami>(()).await.unwrap();
        *served.entry(node).or_default() += 1;
    }
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_are_known_filter_nodes_and_route_calls_to_the_local_zone_first() {
    let mut cluster = Cluster::start_each(
        BIN,
        &[
            &[
                "--balancer",
                "work",
                "--balancer",
                "spill",
                "--label",
                "zone=a",
            ],
            &[
                "--balancer",
                "work",
                "--balancer",
                "spill",
                "--label",
                "zone=a",
                "--label",
                "version=2",
            ],
            &[
                "--balancer",
                "work",
                "--balancer",
                "spill",
                "--label",
                "zone=b",
            ],
        ],
    )
    .await
    .unwrap();
    let names = cluster.names();
    let (a0, a1, b) = (names[0].clone(), names[1].clone(), names[2].clone());
    let me = cluster
        .join_with(
            NodeConfig::new("tester", "127.0.0.1:0").label("zone", "a"),
            MESH_TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(me.labels(), Labels::from_pairs([("zone", "a")]));

    // Every peer's labels become known, as each child set them.
    wait_labels(&me, &names).await;
    assert_eq!(me.labels_of(&a0), Some(Labels::from_pairs([("zone", "a")])));
    assert_eq!(
        me.labels_of(&a1),
        Some(Labels::from_pairs([("zone", "a"), ("version", "2")]))
    );
    assert_eq!(me.labels_of(&b), Some(Labels::from_pairs([("zone", "b")])));
    assert_eq!(me.labels_of("nobody@127.0.0.1"), None);
    match me.control(&b, ControlRequest::Labels).await.unwrap() {
        ControlReply::Labels(pairs) => assert_eq!(pairs, [("zone".to_string(), "b".to_string())]),
        other => panic!("{other:?}"),
    }

    // node_match_list against this node's own labels.
    let in_zone = Balancer::start(
        BalancerConfig::new("in_zone").node_match_list([NodeFilter::label("zone", "a")]),
    )
    .await
    .unwrap();
    assert!(in_zone.is_member(), "this node is in zone a");
    let elsewhere = Balancer::start(
        BalancerConfig::new("elsewhere").node_match_list([NodeFilter::label("zone", "b")]),
    )
    .await
    .unwrap();
    assert!(!elsewhere.is_member(), "this node is not in zone b");

    // A random-node call with a label filter goes to the peer that has the label.
    for _ in 0..6 {
        let node = me
            .call_on_random_node::<Whoami>(NodeFilter::label("version", "2"), ())
            .await
            .unwrap();
        assert_eq!(node, a1);
        let node = me
            .call_on_random_node::<Whoami>(NodeFilter::label("zone", "b"), ())
            .await
            .unwrap();
        assert_eq!(node, b);
    }

    // Locality: a caller-only round-robin balancer in zone a.
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .locality(Locality::zone())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    let mut members = work.watch_members();
    let zoned = tokio::time::timeout(
        BOUND,
        members.wait_for(|m| {
            let preferred: Vec<&str> = m
                .as_slice()
                .iter()
                .filter(|m| m.view().is_preferred())
                .map(|m| m.node())
                .collect();
            preferred == [a0.as_str(), a1.as_str()]
        }),
    )
    .await;
    assert!(zoned.is_ok(), "zone-a members marked: {:?}", work.members());
    drop(zoned);
    let got = served(&work, 20).await;
    assert_eq!(
        got,
        BTreeMap::from([(a0.clone(), 10), (a1.clone(), 10)]),
        "every call in zone a, round robin within it"
    );

    // With a cap of 1 call per member: while both zone-a members hold a call, the next goes to
    // zone b.
    let spill = Balancer::start(
        BalancerConfig::new("spill")
            .algorithm(RoundRobin::new())
            .locality(Locality::zone())
            .max_in_flight_per_member(1)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    spill.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    let mut spill_members = spill.watch_members();
    let zoned = tokio::time::timeout(
        BOUND,
        spill_members.wait_for(|m| m.views().iter().filter(|v| v.is_preferred()).count() == 2),
    )
    .await;
    assert!(
        zoned.is_ok(),
        "zone-a members marked: {:?}",
        spill.members()
    );
    drop(zoned);
    let held: Vec<_> = (0..2)
        .map(|_| {
            let spill = spill.clone();
            tokio::spawn(async move { spill.call::<Sleep>(5_000).await })
        })
        .collect();
    let mut both_busy = false;
    for _ in 0..500 {
        let members = spill.members();
        let busy: Vec<&str> = members
            .as_slice()
            .iter()
            .filter(|m| m.in_flight() == 1)
            .map(|m| m.node())
            .collect();
        if busy == [a0.as_str(), a1.as_str()] {
            both_busy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(both_busy, "one call held on each zone-a member");
    assert_eq!(spill.call::<Whoami>(()).await.unwrap(), b, "zone a is full");
    for call in held {
        call.abort();
    }

    // Both zone-a members killed: calls go to zone b.
    cluster.nodes[0].kill().await;
    cluster.nodes[1].kill().await;
    let left = tokio::time::timeout(BOUND, members.wait_for(|m| m.nodes() == [b.clone()])).await;
    assert!(left.is_ok(), "members: {:?}", work.members().nodes());
    drop(left);
    let got = served(&work, 6).await;
    assert_eq!(got, BTreeMap::from([(b.clone(), 6)]));

    work.stop().await;
    spill.stop().await;
    in_zone.stop().await;
    elsewhere.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
