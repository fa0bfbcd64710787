use std::collections::HashMap;
use std::sync::Arc;

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
    assert!(matches!(
        rr.choose_from_nodes(&[], &REQUEST),
        Err(Error::NoMembers { .. })
    ));
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
        (WeightedRoundRobin::new().weight("@h", 2), "weights"),
        (WeightedRoundRobin::new().weight("a@", 2), "weights"),
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

#[tokio::test]
async fn call_direct_runs_locally_and_selects_this_node() {
    // §11.19.1: local.
    assert!(CallDirect.is_local());
    assert!(!Random::new().is_local());
    // §11.19.2–3: the local node, whatever the key, wherever it is in the list.
    let (actor, _) = Actor::spawn(None, Idle, ()).await.unwrap();
    let list = vec![
        Member::for_test("a@h", actor.clone()),
        Member::local_for_test("b@h", actor.clone()),
        Member::for_test("c@h", actor.clone()),
    ];
    for key in [None, Some(&b"customer-42"[..])] {
        let request = SelectionRequest { key, ..REQUEST };
        assert_eq!(CallDirect.choose_from_nodes(&list, &request).unwrap(), 1);
        for count in 0..5 {
            let picked = CallDirect.choose_nodes(&list, count, &request).unwrap();
            assert_eq!(picked.len(), count.min(3), "count {count}");
            if count > 0 {
                assert_eq!(picked[0], 1, "this node first");
            }
            let distinct: std::collections::BTreeSet<_> = picked.iter().collect();
            assert_eq!(distinct.len(), picked.len());
            assert!(picked.iter().all(|i| *i < 3));
        }
    }
    // Not a member: no remote node is passed off as this one.
    let remote = &[list[0].clone(), list[2].clone()];
    for outcome in [
        CallDirect
            .choose_from_nodes(remote, &REQUEST)
            .map(|i| vec![i]),
        CallDirect.choose_nodes(remote, 2, &REQUEST),
    ] {
        match outcome {
            Err(Error::NoEligibleMembers { balancer, reason }) => {
                assert_eq!(balancer, "b");
                assert!(reason.contains("not a member"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn random_ignores_the_key() {
    // §11.13.3: the same seed gives the same picks with or without a key.
    let list = members(&["a", "b", "c", "d"]).await;
    let (plain, keyed) = (Random::seeded(3), Random::seeded(3));
    for k in 0..100u64 {
        let key = k.to_be_bytes();
        let request = SelectionRequest {
            key: Some(&key),
            ..REQUEST
        };
        assert_eq!(
            plain.choose_from_nodes(&list, &REQUEST).unwrap(),
            keyed.choose_from_nodes(&list, &request).unwrap()
        );
    }
}

#[tokio::test]
async fn round_robin_spreads_concurrent_picks_evenly() {
    // §11.14.3: 100 picks from 4 threads at once over 4 members: each member exactly 25 times.
    let list = members(&["a", "b", "c", "d"]).await;
    let rr = RoundRobin::new();
    let picks: Vec<usize> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..25)
                        .map(|_| rr.choose_from_nodes(&list, &REQUEST).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    assert_eq!(picks.len(), 100);
    for member in 0..4 {
        assert_eq!(
            picks.iter().filter(|p| **p == member).count(),
            25,
            "{picks:?}"
        );
    }
}

#[tokio::test]
async fn least_connections_follows_releases_joins_and_leaves() {
    let lc = LeastConnections::seeded(4);
    // §11.16.2: two picks on [a, b] take both; after releasing a, the next is a.
    let list = members(&["a", "b"]).await;
    let mut taken = std::collections::BTreeSet::new();
    for _ in 0..2 {
        let i = pick(&lc, &list);
        list[i].acquire();
        taken.insert(i);
    }
    assert_eq!(taken.len(), 2, "the two picks reach both members");
    list[0].release();
    assert_eq!(pick(&lc, &list), 0);
    list[0].acquire();

    // §11.16.3: a leaves (announced as the balancer does); the snapshot [b] picks b, and b's
    // count is its own.
    lc.on_node_change(&NodeChange {
        balancer: "b",
        joined: &[],
        left: &[Arc::clone(list[0].node_arc())],
        members: &list[1..],
        version: 2,
    });
    let after = &list[1..];
    assert!((0..10).all(|_| after[pick(&lc, after)].node() == "b"));
    assert_eq!(after[0].in_flight(), 1);
}

#[tokio::test]
async fn hash_ring_replica_and_weight_rules() {
    let list = members(&["a@h", "b@h", "c@h"]).await;
    // §11.18.11: no key: `count` distinct members at random, counted as keyless.
    let ring = HashRing::new();
    for _ in 0..20 {
        let picked = ring.choose_nodes(&list, 2, &REQUEST).unwrap();
        assert_eq!(picked.len(), 2);
        assert_ne!(picked[0], picked[1]);
    }
    assert_eq!(ring.keyless_selections(), 20);
    // §11.18.12: 64 points per member still spread 100 keys over more than one node.
    let light = HashRing::new().weight(64);
    light.init("b").unwrap();
    let used: std::collections::BTreeSet<String> = (0..100u64)
        .map(|k| ring_pick(&light, &list, &k.to_be_bytes()))
        .collect();
    assert!(used.len() > 1, "{used:?}");
}

/// Announces `list` to `ring` as snapshot `version` of balancer "b".
fn announce(ring: &HashRing, list: &[Member], version: u64) {
    let joined: Vec<Arc<str>> = list.iter().map(|m| Arc::clone(m.node_arc())).collect();
    ring.on_node_change(&NodeChange {
        balancer: "b",
        joined: &joined,
        left: &[],
        members: list,
        version,
    });
}

/// The node `ring` answers for `key` over `list`, as snapshot `version`.
fn ring_pick_at(ring: &HashRing, list: &[Member], key: &[u8], version: u64) -> String {
    let request = SelectionRequest {
        balancer: "b",
        key: Some(key),
        version,
    };
    list[ring.choose_from_nodes(list, &request).unwrap()]
        .node()
        .to_string()
}

#[tokio::test]
async fn hash_ring_answers_from_the_list_it_is_given_not_a_stale_ring() {
    let ring = HashRing::new();
    let abc = members(&["a@h", "b@h", "c@h"]).await;
    announce(&ring, &abc, 1);
    for k in 0..25u64 {
        ring_pick_at(&ring, &abc, &k.to_be_bytes(), 1);
    }
    // §11.18.13: a list without c (a snapshot the ring was not told of): only a or b.
    let ab = members(&["a@h", "b@h"]).await;
    for k in 0..25u64 {
        let node = ring_pick_at(&ring, &ab, &k.to_be_bytes(), 2);
        assert!(node == "a@h" || node == "b@h", "{node}");
    }
    // §11.18.14: grown from [a] to [a, b, c, d]: every key lands in the list, on > 1 node.
    let a = members(&["a@h"]).await;
    announce(&ring, &a, 3);
    let abcd = members(&["a@h", "b@h", "c@h", "d@h"]).await;
    let used: std::collections::BTreeSet<String> = (0..200u64)
        .map(|k| ring_pick_at(&ring, &abcd, &k.to_be_bytes(), 4))
        .collect();
    assert!(used.len() > 1 && used.iter().all(|n| abcd.iter().any(|m| m.node() == n)));
    // §11.18.15: swapped wholesale: answers from the new set.
    let old = members(&["old_a@h", "old_b@h"]).await;
    announce(&ring, &old, 5);
    let new = members(&["new_a@h", "new_b@h"]).await;
    for k in 0..25u64 {
        assert!(ring_pick_at(&ring, &new, &k.to_be_bytes(), 6).starts_with("new_"));
    }
    // §11.18.16: replicas on a shrunk list come from it.
    announce(&ring, &abc, 7);
    for k in 0..25u64 {
        let key = k.to_be_bytes();
        let request = SelectionRequest {
            balancer: "b",
            key: Some(&key),
            version: 8,
        };
        let mut picked = ring.choose_nodes(&ab, 2, &request).unwrap();
        picked.sort_unstable();
        assert_eq!(picked, [0, 1]);
    }
}

#[tokio::test]
async fn hash_ring_reuses_the_ring_of_an_unchanged_snapshot() {
    // §11.18.17: the ring announced for snapshot 1 answers every selection of snapshot 1: 25
    // repeats give one node. That it is the cached ring (not a rebuild) shows when the list
    // passed for snapshot 1 is in another order: the cached ring answers indices into the
    // announced order, a rebuild would answer by name.
    let ring = HashRing::new();
    let abc = members(&["a@h", "b@h", "c@h"]).await;
    announce(&ring, &abc, 1);
    let key = b"customer-42";
    let first = ring_pick_at(&ring, &abc, key, 1);
    assert!((0..25).all(|_| ring_pick_at(&ring, &abc, key, 1) == first));
    let mut cba = abc.clone();
    cba.reverse();
    let (mut from_cache, mut rebuilt) = (0, 0);
    for k in 0..100u64 {
        let key = k.to_be_bytes();
        let cached_index = abc
            .iter()
            .position(|m| m.node() == ring_pick_at(&ring, &abc, &key, 1))
            .unwrap();
        from_cache += usize::from(ring_pick_at(&ring, &cba, &key, 1) == cba[cached_index].node());
        rebuilt += usize::from(
            ring_pick_at(&ring, &cba, &key, SelectionRequest::UNCACHED) == abc[cached_index].node(),
        );
    }
    assert_eq!(
        from_cache, 100,
        "snapshot 1's selections use its cached ring"
    );
    assert_eq!(
        rebuilt, 100,
        "an uncached list gets a ring of its own (by name)"
    );
}

#[tokio::test]
async fn hash_ring_point_collisions_resolve_by_node_name_in_any_member_order() {
    // Forcing a real XXH3 collision between two node names is impractical: the tie rule is
    // tested on the sort directly. a and b both have a point at 500; b also at 100.
    let ab = members(&["a@h", "b@h"]).await;
    let ba = members(&["b@h", "a@h"]).await;
    let points_ab = |list: &[Member]| -> Vec<(u64, u32)> {
        let index = |node: &str| list.iter().position(|m| m.node() == node).unwrap() as u32;
        vec![
            (500, index("b@h")),
            (500, index("a@h")),
            (100, index("b@h")),
        ]
    };
    let owners = |list: &[Member]| -> Vec<(u64, String)> {
        let mut points = points_ab(list);
        super::hash_ring::sort_points(&mut points, list);
        points
            .iter()
            .map(|(p, i)| (*p, list[*i as usize].node().to_string()))
            .collect()
    };
    let expected = vec![
        (100, "b@h".to_string()),
        (500, "a@h".to_string()),
        (500, "b@h".to_string()),
    ];
    assert_eq!(owners(&ab), expected);
    assert_eq!(owners(&ba), expected);
}

fn ring_pick(ring: &HashRing, list: &[Member], key: &[u8]) -> String {
    let request = SelectionRequest {
        balancer: "b",
        key: Some(key),
        version: SelectionRequest::UNCACHED,
    };
    list[ring.choose_from_nodes(list, &request).unwrap()]
        .node()
        .to_string()
}

#[test]
fn hash_ring_hash_is_pinned() {
    // XXH3-64, seed 0: the spec's vector for empty input, and pinned points.
    assert_eq!(HashRing::key_point(b""), 0x2D06_8005_38D3_94C2);
    let pinned = [
        (HashRing::key_point(b"customer-42"), "key customer-42"),
        (HashRing::key_point(&42u64.to_be_bytes()), "key 42u64"),
        (HashRing::point("a@127.0.0.1", 0), "point a@127.0.0.1 #0"),
        (
            HashRing::point("a@127.0.0.1", 127),
            "point a@127.0.0.1 #127",
        ),
    ];
    let printed: Vec<String> = pinned
        .iter()
        .map(|(v, what)| format!("{what}={v:#018x}"))
        .collect();
    assert_eq!(
        printed, GOLDEN,
        "the ring's hash changed: every node must map keys identically"
    );
}

const GOLDEN: [&str; 4] = [
    "key customer-42=0xf40925ac7f7b5e61",
    "key 42u64=0x2e4fe982b68910ac",
    "point a@127.0.0.1 #0=0x260d445011e64a3c",
    "point a@127.0.0.1 #127=0x23b80ae22c53399e",
];

#[tokio::test]
async fn hash_ring_is_consistent() {
    let four = members(&["a@h", "b@h", "c@h", "d@h"]).await;
    let ring = HashRing::new();
    ring.init("b").unwrap();
    let keys: Vec<Vec<u8>> = (0..1000u64)
        .map(|k| format!("key-{k}").into_bytes())
        .collect();
    let before: Vec<String> = keys.iter().map(|k| ring_pick(&ring, &four, k)).collect();
    assert_eq!(
        ring_pick(&ring, &four, b"customer-42"),
        ring_pick(&ring, &four, b"customer-42")
    );
    let used: std::collections::BTreeSet<&String> = before[..100].iter().collect();
    assert!(used.len() > 1, "100 keys all on one node");
    // Member order does not matter.
    let mut reversed = four.clone();
    reversed.reverse();
    assert!(keys
        .iter()
        .zip(&before)
        .all(|(k, owner)| &ring_pick(&ring, &reversed, k) == owner));
    // A fifth member takes fewer than half of the keys, only onto itself.
    let five = members(&["a@h", "b@h", "c@h", "d@h", "e@h"]).await;
    let after: Vec<String> = keys.iter().map(|k| ring_pick(&ring, &five, k)).collect();
    let moved: Vec<usize> = (0..keys.len())
        .filter(|i| before[*i] != after[*i])
        .collect();
    assert!(moved.len() < 500, "{} of 1000 keys moved", moved.len());
    assert!(moved.iter().all(|i| after[*i] == "e@h"));
    // Removing a member moves only its keys.
    let three = members(&["a@h", "b@h", "d@h"]).await;
    for (k, owner) in keys.iter().zip(&before) {
        let now = ring_pick(&ring, &three, k);
        if owner != "c@h" {
            assert_eq!(&now, owner);
        }
    }
}

#[tokio::test]
async fn hash_ring_replicas_wrap_and_start_with_the_owner() {
    let list = members(&["a@h", "b@h", "c@h", "d@h"]).await;
    let ring = HashRing::new().weight(1);
    for k in 0..200u64 {
        let key = k.to_be_bytes();
        let request = SelectionRequest {
            balancer: "b",
            key: Some(&key),
            version: SelectionRequest::UNCACHED,
        };
        let owner = ring.choose_from_nodes(&list, &request).unwrap();
        for count in [0, 1, 3, 4, 9] {
            let replicas = ring.choose_nodes(&list, count, &request).unwrap();
            assert_eq!(replicas.len(), count.min(4), "key {k}, count {count}");
            let distinct: std::collections::BTreeSet<_> = replicas.iter().collect();
            assert_eq!(distinct.len(), replicas.len());
            if count > 0 {
                assert_eq!(replicas[0], owner);
            }
        }
    }
}

#[tokio::test]
async fn hash_ring_without_a_key_is_random_and_counted() {
    let list = members(&["a@h", "b@h", "c@h"]).await;
    let ring = HashRing::new().seeded(5);
    let picked: std::collections::BTreeSet<usize> = (0..60).map(|_| pick(&ring, &list)).collect();
    assert_eq!(picked.len(), 3);
    assert_eq!(ring.keyless_selections(), 60);
    for bad in [0, HashRing::MAX_WEIGHT + 1] {
        assert!(matches!(
            HashRing::new().weight(bad).init("b"),
            Err(Error::InvalidConfig {
                option: "weight",
                ..
            })
        ));
    }
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Members for node names, built on a fresh runtime (proptest cases are synchronous).
    fn members_blocking(nodes: &[String]) -> Vec<Member> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
        runtime.block_on(members(&names))
    }

    /// `request` for `list` as the snapshot `algorithm` was told of (its cached position), or
    /// as a list that is no snapshot (the algorithm's own position).
    fn told_of<'a>(
        algorithm: &dyn SelectionAlgorithm,
        list: &[Member],
        snapshot: bool,
    ) -> SelectionRequest<'a> {
        if !snapshot {
            return REQUEST;
        }
        algorithm.on_node_change(&NodeChange {
            balancer: "b",
            joined: &[],
            left: &[],
            members: list,
            version: 1,
        });
        SelectionRequest {
            version: 1,
            ..REQUEST
        }
    }

    /// Every `window` consecutive picks hold member `i` exactly `times[i]` times.
    fn each_window_holds(
        picks: &[usize],
        window: usize,
        times: &[usize],
    ) -> Result<(), TestCaseError> {
        for (start, slice) in picks.windows(window).enumerate() {
            for (i, want) in times.iter().enumerate() {
                let seen = slice.iter().filter(|p| **p == i).count();
                prop_assert_eq!(
                    seen,
                    *want,
                    "member {} in picks {}.. of {:?}",
                    i,
                    start,
                    picks
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn round_robin_stays_in_turn_across_the_counter_wrap(
            len in 1usize..12,
            before_wrap in 0usize..40,
            snapshot in any::<bool>(),
        ) {
            let names: Vec<String> = (0..len).map(|i| format!("n{i:02}@h")).collect();
            let list = members_blocking(&names);
            let rr = RoundRobin::starting_at(usize::MAX - before_wrap);
            let request = told_of(&rr, &list, snapshot);
            let picks: Vec<usize> = (0..before_wrap + 3 * len)
                .map(|_| rr.choose_from_nodes(&list, &request).unwrap())
                .collect();
            each_window_holds(&picks, len, &vec![1; len])?;
        }

        #[test]
        fn weighted_round_robin_stays_in_turn_across_the_counter_wrap(
            weights in proptest::collection::vec(0usize..6, 1..6),
            before_wrap in 0usize..40,
            snapshot in any::<bool>(),
        ) {
            let total: usize = weights.iter().sum();
            prop_assume!(total > 0);
            let names: Vec<String> = (0..weights.len()).map(|i| format!("n{i}@h")).collect();
            let list = members_blocking(&names);
            let mut wrr = WeightedRoundRobin::new()
                .default_weight(0)
                .starting_at(usize::MAX - before_wrap);
            for (name, weight) in names.iter().zip(&weights) {
                wrr = wrr.weight(name.clone(), *weight as u32);
            }
            let request = told_of(&wrr, &list, snapshot);
            let picks: Vec<usize> = (0..before_wrap + 3 * total)
                .map(|_| wrr.choose_from_nodes(&list, &request).unwrap())
                .collect();
            // Every member its weight times in any `total` consecutive picks.
            each_window_holds(&picks, total, &weights)?;
        }

        #[test]
        fn ring_answers_do_not_depend_on_member_order(
            names in proptest::collection::btree_set("[a-z]{1,6}@h[0-9]", 1..8),
            keys in proptest::collection::vec(any::<u64>(), 1..40),
            seed in any::<u64>(),
        ) {
            let names: Vec<String> = names.into_iter().collect();
            let list = members_blocking(&names);
            let mut shuffled = list.clone();
            // A deterministic permutation from the seed.
            let n = shuffled.len();
            for i in (1..n).rev() {
                let j = (crate::algorithm::rng::splitmix64(seed ^ i as u64) % (i as u64 + 1)) as usize;
                shuffled.swap(i, j);
            }
            let ring = HashRing::new().weight(16);
            for key in keys {
                let key = key.to_be_bytes();
                prop_assert_eq!(ring_pick(&ring, &list, &key), ring_pick(&ring, &shuffled, &key));
            }
        }

        #[test]
        fn weighted_round_robin_shares_are_exact_per_cycle(
            weights in proptest::collection::vec(0u32..6, 1..6),
            start in any::<usize>(),
        ) {
            let names: Vec<String> = (0..weights.len()).map(|i| format!("n{i}@h")).collect();
            let list = members_blocking(&names);
            let mut wrr = WeightedRoundRobin::new().default_weight(0).starting_at(start);
            for (name, weight) in names.iter().zip(&weights) {
                wrr = wrr.weight(name.clone(), *weight);
            }
            let total: u32 = weights.iter().sum();
            if total == 0 {
                prop_assert!(wrr.choose_from_nodes(&list, &REQUEST).is_err());
                return Ok(());
            }
            let gcd = weights.iter().copied().filter(|w| *w > 0).fold(0, |a, b| {
                let (mut a, mut b) = (a, b);
                while b != 0 { let t = a % b; a = b; b = t; }
                a
            });
            let period = (total / gcd) as usize;
            // Any `period` consecutive picks contain each member weight/gcd times.
            let picks: Vec<usize> = (0..period * 3).map(|_| wrr.choose_from_nodes(&list, &REQUEST).unwrap()).collect();
            for window in picks.windows(period) {
                for (i, weight) in weights.iter().enumerate() {
                    let seen = window.iter().filter(|p| **p == i).count() as u32;
                    prop_assert_eq!(seen, weight / gcd);
                }
            }
        }
    }
}
