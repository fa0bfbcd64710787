//! Contracts around what balancers share or skip: an algorithm instance shared by two
//! balancers routes each by its own members; CallDirect runs are counted in flight like any
//! routed call, its selections answer this node, and its calls run here without members; a
//! custom selector that breaks `pick_many`'s contract gets a typed error.
//!
//! One `Node` per process: nextest runs each test alone. Members other than this node are
//! local stand-in actors joined to the balancers' pg groups under member names.

use std::future::IntoFuture;
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, Request};
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, CallDirect, Error, HashRing, MemberView, Node, NodeConfig,
    Selector, WeightedRoundRobin,
};
use rpclb::functions::{register_all, Sleep};
use rpclb::harness::{join_stand_ins, stand_in_node};

async fn node(name: &str) -> Node {
    Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(name))
        .await
        .unwrap()
}

/// Node picked for `key` by balancer `b`.
fn pick(b: &Balancer, key: &str) -> String {
    b.select_node(Some(key.as_bytes()))
        .unwrap()
        .node()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_algorithm_instance_shared_by_two_balancers_routes_each_by_its_own_members() {
    let _node = node("sharing").await;
    let ring = Arc::new(HashRing::new());
    let a = Balancer::start(BalancerConfig::new("ring_a").algorithm_arc(ring.clone()))
        .await
        .unwrap();
    let b = Balancer::start(BalancerConfig::new("ring_b").algorithm_arc(ring.clone()))
        .await
        .unwrap();
    join_stand_ins("ring_a", 1..4).await.unwrap();
    join_stand_ins("ring_b", 1..2).await.unwrap();
    a.wait_for_members(4, Duration::from_secs(5)).await.unwrap();
    b.wait_for_members(2, Duration::from_secs(5)).await.unwrap();
    // Private instances over the same members are the reference.
    let private_a = Balancer::start(BalancerConfig::new("ring_a_ref").algorithm(HashRing::new()))
        .await
        .unwrap();
    join_stand_ins("ring_a_ref", 1..4).await.unwrap();
    private_a
        .wait_for_members(4, Duration::from_secs(5))
        .await
        .unwrap();
    let mut used = std::collections::BTreeSet::new();
    for i in 0..300 {
        let key = format!("key-{i}");
        // Interleaved, so each balancer's selection follows the other's.
        let on_b = pick(&b, &key);
        let on_a = pick(&a, &key);
        assert!(b.members().contains(&on_b), "{on_b} is no member of ring_b");
        assert_eq!(
            on_a,
            pick(&private_a, &key),
            "ring_a answered {key} with ring_b's ring"
        );
        used.insert(on_a);
    }
    assert_eq!(used.len(), 4, "ring_a used {used:?}");
    assert!(used.contains(&stand_in_node(3)));

    // The same for a weighted schedule: shares per cycle stay exact per balancer.
    let wrr = Arc::new(WeightedRoundRobin::new().weight(stand_in_node(1), 3));
    let w1 = Balancer::start(BalancerConfig::new("wrr_1").algorithm_arc(wrr.clone()))
        .await
        .unwrap();
    let w2 = Balancer::start(BalancerConfig::new("wrr_2").algorithm_arc(wrr))
        .await
        .unwrap();
    join_stand_ins("wrr_1", 1..3).await.unwrap();
    join_stand_ins("wrr_2", 1..2).await.unwrap();
    w1.wait_for_members(3, Duration::from_secs(5))
        .await
        .unwrap();
    w2.wait_for_members(2, Duration::from_secs(5))
        .await
        .unwrap();
    let mut shares = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..50 {
        // A cycle of w1 is 5 picks (3 + 1 + 1), with w2's picks in between.
        for _ in 0..5 {
            *shares.entry(pick(&w1, "")).or_default() += 1;
            let _ = pick(&w2, "");
        }
    }
    assert_eq!(shares.get(&stand_in_node(1)), Some(&150), "{shares:?}");
    assert_eq!(shares.get(&stand_in_node(2)), Some(&50), "{shares:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_direct_runs_are_counted_in_flight() {
    let node = node("direct").await;
    register_all(&node, Duration::ZERO).unwrap();
    let balancer = Balancer::start(BalancerConfig::new("direct").algorithm(CallDirect))
        .await
        .unwrap();
    let calls: Vec<_> = (0..12)
        .map(|_| {
            let balancer = balancer.clone();
            tokio::spawn(async move { balancer.call::<Sleep>(400).await })
        })
        .collect();
    let counted = async {
        while balancer.in_flight() < 12 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), counted)
        .await
        .unwrap_or_else(|_| panic!("{} of 12 counted", balancer.in_flight()));
    // A dropped call is released too.
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        balancer.call::<Sleep>(5_000).into_future(),
    )
    .await;
    assert!(dropped.is_err(), "the 5 s call finished in 50 ms");
    for call in calls {
        call.await.unwrap().unwrap();
    }
    // A cast run here is counted until its function ends (the drain waits for it), then
    // released: nothing stays counted.
    balancer.cast::<Sleep>(0).await.unwrap();
    let released = async {
        while balancer.in_flight() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(2), released)
        .await
        .unwrap_or_else(|_| panic!("{} still counted after 2 s", balancer.in_flight()));
}

/// Returns the first member twice, whatever is asked.
struct Repeats;
impl Algorithm for Repeats {
    fn name(&self) -> &'static str {
        "repeats"
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(Repeats))
    }
}
impl Selector for Repeats {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        _: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        Ok(match count {
            1 => vec![members.len() + 5],
            2 => vec![0, 0],
            _ => vec![0],
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_pick_many_is_a_typed_error() {
    let _node = node("broken").await;
    let balancer = Balancer::start(BalancerConfig::new("broken").algorithm(Repeats))
        .await
        .unwrap();
    join_stand_ins("broken", 1..3).await.unwrap();
    balancer
        .wait_for_members(3, Duration::from_secs(5))
        .await
        .unwrap();
    // Out of range (count 1), a repeat (2), too few (3), too many (0).
    for count in [1, 2, 3, 0] {
        match balancer.select_nodes(count, None) {
            Err(Error::InvalidConfig { option, reason }) => {
                assert_eq!(option, "algorithm");
                assert!(reason.contains("repeats"), "{reason}");
            }
            other => panic!("count {count}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_direct_selects_this_node_and_runs_calls_here_without_members() {
    // (Stand-in actors live in this process too, so they count as local members: this node's
    // name sorts before theirs, and it wins. The rule for a node that is not a member is in
    // the algorithm's unit tests.)
    let node = node("directsel").await;
    register_all(&node, Duration::ZERO).unwrap();
    let me = node.name().to_string();
    // A member among stand-ins: selection answers this node, first of any replica set.
    let member = Balancer::start(BalancerConfig::new("direct-member").algorithm(CallDirect))
        .await
        .unwrap();
    join_stand_ins("direct-member", 1..4).await.unwrap();
    member
        .wait_for_members(4, Duration::from_secs(5))
        .await
        .unwrap();
    for k in 0..20u64 {
        let key = k.to_be_bytes();
        assert_eq!(member.select_node(Some(&key)).unwrap().node(), me);
        let replicas = member.select_nodes(3, Some(&key)).unwrap();
        assert_eq!(replicas[0], me, "{replicas:?} of {:?}", member.members());
        assert_eq!(replicas.len(), 3);
    }
    // No members at all (this node does not match node_match_list): selection finds nobody,
    // but calls and casts still run here at once, without waiting for members.
    let outside = Balancer::start(
        BalancerConfig::new("direct-outside")
            .algorithm(CallDirect)
            .node_match_list(["nobody"])
            .retry(rpc_load_balancer::Retry::new(
                rpc_load_balancer::RetryCount::Unlimited,
                Duration::from_secs(5),
            )),
    )
    .await
    .unwrap();
    assert!(!outside.is_member());
    assert!(matches!(
        outside.select_node(None),
        Err(Error::NoMembers { .. })
    ));
    let started = std::time::Instant::now();
    let (_, served_by) = outside.call::<Sleep>(0).with_node().await.unwrap();
    assert_eq!(&*served_by, me);
    outside.cast::<Sleep>(0).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    member.stop().await;
    outside.stop().await;
}
