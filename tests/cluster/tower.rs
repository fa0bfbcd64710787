//! A balancer's tower service across real processes: `poll_ready` reserves a member — two ready
//! services fill both members' cap of 1, so a plain call meanwhile is refused `Overloaded` —
//! and each service's call goes through on its reservation, to the member it reserved.

use std::collections::HashSet;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, Error, RoundRobin};
use rpclb::harness::Cluster;
use tower::{Service, ServiceExt};

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// Bound on every wait of this test.
const BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_services_hold_their_members_until_their_calls() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .max_in_flight_per_member(1)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();

    let mut first = work.service::<Whoami>();
    let mut second = first.clone();
    for service in [&mut first, &mut second] {
        tokio::time::timeout(BOUND, service.ready())
            .await
            .expect("a member is free")
            .unwrap();
    }
    // Both members are reserved, one each.
    let members = work.members();
    let held: Vec<usize> = members.as_slice().iter().map(|m| m.in_flight()).collect();
    assert_eq!(held, [1, 1], "each ready service holds one member");
    let refused = work.call::<Whoami>(()).timeout(BOUND).await;
    assert!(
        matches!(refused, Err(Error::Overloaded { limit: 1, .. })),
        "{refused:?}"
    );

    // Each call goes through on its own reservation: the two served by both members.
    let second_by = tokio::time::timeout(BOUND, second.call(())).await.unwrap();
    let first_by = tokio::time::timeout(BOUND, first.call(())).await.unwrap();
    let served: HashSet<String> = [first_by.unwrap(), second_by.unwrap()].into();
    let all: HashSet<String> = members.nodes().into_iter().collect();
    assert_eq!(served, all);
    assert_eq!(work.in_flight(), 0);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
