use std::collections::HashMap;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::*;
use crate::wire::RpcMessage;

/// An actor that only gives members something to point at.
struct Idle;
impl Actor for Idle {
    type Msg = RpcMessage;
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<RpcMessage>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

async fn members(nodes: &[&str]) -> Vec<Member> {
    let (actor, _) = Actor::spawn(None, Idle, ()).await.unwrap();
    nodes
        .iter()
        .map(|n| Member::for_test(n, actor.clone()))
        .collect()
}

const REQUEST: SelectionRequest<'static> = SelectionRequest {
    version: SelectionRequest::UNCACHED,
    balancer: "b",
    key: None,
};

#[tokio::test]
async fn round_robin_cycles_members_in_order() {
    let list = members(&["a", "b", "c"]).await;
    let rr = RoundRobin::starting_at(0);
    let picks: Vec<&str> = (0..7)
        .map(|_| list[rr.choose_from_nodes(&list, &REQUEST).unwrap()].node())
        .collect();
    assert_eq!(picks, ["a", "b", "c", "a", "b", "c", "a"]);
    let one = &list[..1];
    assert_eq!(rr.choose_from_nodes(one, &REQUEST).unwrap(), 0);
}

#[tokio::test]
async fn round_robin_starts_at_random_offsets() {
    let list = members(&["a", "b", "c", "d", "e", "f", "g", "h"]).await;
    let firsts: std::collections::HashSet<usize> = (0..50)
        .map(|_| {
            RoundRobin::new()
                .choose_from_nodes(&list, &REQUEST)
                .unwrap()
        })
        .collect();
    assert!(
        firsts.len() > 1,
        "every selector started at the same member"
    );
}

#[tokio::test]
async fn round_robin_wraps_without_skew() {
    let list = members(&["a", "b", "c"]).await;
    let rr = RoundRobin::starting_at(usize::MAX - 1);
    for _ in 0..10 {
        assert!(rr.choose_from_nodes(&list, &REQUEST).unwrap() < 3);
    }
}

#[tokio::test]
async fn seeded_random_is_reproducible_and_uniform_enough() {
    let list = members(&["a", "b", "c", "d"]).await;
    let one = Random::seeded(7);
    let two = Random::seeded(7);
    let a: Vec<usize> = (0..100)
        .map(|_| one.choose_from_nodes(&list, &REQUEST).unwrap())
        .collect();
    let b: Vec<usize> = (0..100)
        .map(|_| two.choose_from_nodes(&list, &REQUEST).unwrap())
        .collect();
    assert_eq!(a, b);
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for _ in 0..8000 {
        *counts
            .entry(one.choose_from_nodes(&list, &REQUEST).unwrap())
            .or_default() += 1;
    }
    for i in 0..4 {
        let share = counts[&i] as f64 / 8000.0;
        assert!((0.2..0.3).contains(&share), "member {i} got {share}");
    }
    let unseeded = Random::new();
    assert!((0..100).all(|_| unseeded.choose_from_nodes(&list, &REQUEST).unwrap() < 4));
}

#[tokio::test]
async fn default_choose_nodes_gives_distinct_members() {
    let list = members(&["a", "b", "c", "d"]).await;
    for count in 0..6 {
        let picked = Random::new().choose_nodes(&list, count, &REQUEST).unwrap();
        assert_eq!(picked.len(), count.min(4));
        let distinct: std::collections::HashSet<_> = picked.iter().collect();
        assert_eq!(distinct.len(), picked.len());
        assert!(picked.iter().all(|&i| i < 4));
    }
}

#[test]
fn built_in_algorithms_by_name() {
    for name in BUILT_IN {
        assert_eq!(by_name(name).unwrap().name(), *name);
    }
    match by_name("fastest") {
        Err(Error::InvalidConfig {
            option: "algorithm",
            reason,
        }) => assert!(reason.contains("round_robin")),
        other => panic!("{:?}", other.map(|a| a.name())),
    }
}

fn pick(algorithm: &dyn SelectionAlgorithm, list: &[Member]) -> usize {
    let index = algorithm.choose_from_nodes(list, &REQUEST).unwrap();
    assert!(index < list.len());
    index
}

#[tokio::test]
async fn least_connections_takes_the_least_loaded_and_breaks_ties_at_random() {
    let list = members(&["a", "b", "c"]).await;
    let lc = LeastConnections::seeded(1);
    // Fresh counters: three picks (each taking a count) reach three different members.
    let mut picked = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let i = pick(&lc, &list);
        list[i].acquire();
        picked.insert(list[i].node().to_string());
    }
    assert_eq!(picked.len(), 3);
    // After releasing b, the next pick is b.
    list[1].release();
    assert_eq!(pick(&lc, &list), 1);
    // Ties are not always resolved to the first member.
    let idle = members(&["a", "b", "c", "d"]).await;
    let firsts: std::collections::BTreeSet<usize> = (0..100).map(|_| pick(&lc, &idle)).collect();
    assert_eq!(firsts.len(), 4, "ties at random: {firsts:?}");
}

#[tokio::test]
async fn counts_never_go_negative() {
    let list = members(&["a"]).await;
    list[0].release();
    assert_eq!(list[0].in_flight(), 0);
    list[0].acquire();
    list[0].release();
    list[0].release();
    assert_eq!(list[0].in_flight(), 0);
}

#[tokio::test]
async fn power_of_two_samples_two_distinct_members_and_takes_the_lighter() {
    let list = members(&["a", "b"]).await;
    for _ in 0..5 {
        list[0].acquire();
    }
    let p2c = PowerOfTwo::seeded(3);
    assert!(
        (0..50).all(|_| pick(&p2c, &list) == 1),
        "with two members both are always sampled"
    );
    let three = members(&["a", "b", "c"]).await;
    for _ in 0..10 {
        three[1].acquire();
        three[2].acquire();
    }
    let a = (0..3000).filter(|_| pick(&p2c, &three) == 0).count();
    // a is picked whenever sampled: in 2 of the 3 possible pairs.
    assert!((1800..2200).contains(&a), "a picked {a} of 3000");
    assert_eq!(pick(&p2c, &three[..1]), 0);
}

#[tokio::test]
async fn weighted_round_robin_is_exact_per_cycle() {
    let list = members(&["a@h", "b@h"]).await;
    let wrr = WeightedRoundRobin::new()
        .weight("a@h", 3)
        .weight("b@h", 1)
        .starting_at(0);
    wrr.init("b").unwrap();
    let picks: Vec<usize> = (0..40).map(|_| pick(&wrr, &list)).collect();
    for window in picks.windows(4) {
        assert_eq!(window.iter().filter(|i| **i == 0).count(), 3, "{picks:?}");
    }
    // Interleaved, not a burst of three.
    assert_ne!(&picks[..4], &[0, 0, 0, 1]);
    // Default weights: plain round robin.
    let plain = WeightedRoundRobin::new().starting_at(0);
    let three = members(&["a@h", "b@h", "c@h"]).await;
    let picks: Vec<usize> = (0..6).map(|_| pick(&plain, &three)).collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
}

#[tokio::test]
async fn weighted_round_robin_weights_zero_and_validation() {
    let list = members(&["a@h", "b@h"]).await;
    let no_b = WeightedRoundRobin::new().weight("b@h", 0);
    assert!((0..10).all(|_| pick(&no_b, &list) == 0));
    let none = WeightedRoundRobin::new().default_weight(0);
    match none.choose_from_nodes(&list, &REQUEST) {
        Err(Error::NoEligibleMembers { reason, .. }) => assert!(reason.contains("weighs 0")),
        other => panic!("{other:?}"),
    }
    for (config, option) in [
        (
            WeightedRoundRobin::new().weight("a@h", WeightedRoundRobin::MAX_WEIGHT + 1),
            "weights",
        ),
        (WeightedRoundRobin::new().weight("a", 2), "weights"),
        (
            WeightedRoundRobin::new().default_weight(WeightedRoundRobin::MAX_WEIGHT + 1),
            "default_weight",
        ),
    ] {
        match config.init("b") {
            Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option),
            other => panic!("{option}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn weighted_round_robin_uses_the_cycle_of_the_current_snapshot() {
    let list = members(&["a@h", "b@h"]).await;
    let wrr = WeightedRoundRobin::new().weight("a@h", 2).starting_at(0);
    wrr.on_node_change(&NodeChange {
        balancer: "b",
        joined: &[],
        left: &[],
        members: &list,
        version: 7,
    });
    let request = SelectionRequest {
        balancer: "b",
        key: None,
        version: 7,
    };
    let picks: Vec<usize> = (0..6)
        .map(|_| wrr.choose_from_nodes(&list, &request).unwrap())
        .collect();
    assert_eq!(picks.iter().filter(|i| **i == 0).count(), 4);
    // A list that is not that snapshot (e.g. one member excluded) gets its own cycle.
    let request = SelectionRequest {
        balancer: "b",
        key: None,
        version: SelectionRequest::UNCACHED,
    };
    assert!((0..4).all(|_| wrr.choose_from_nodes(&list[1..], &request).unwrap() == 0));
}

#[test]
fn call_direct_runs_locally() {
    assert!(CallDirect.is_local());
    assert!(!Random::new().is_local());
}
