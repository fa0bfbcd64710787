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
