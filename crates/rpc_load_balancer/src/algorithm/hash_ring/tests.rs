//! HashRing's rules, on the test kit: keys, replicas, weights, and a ring that follows
//! the list it is given.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::algorithm::test_support::*;
use crate::routing::{Derived, MemberView, Request, Selector};
use crate::testkit::SelectorKit;
use crate::Error;

#[test]
fn hash_ring_replica_and_weight_rules() {
    // §11.18.11: no key: `count` distinct members at random, counted as keyless.
    let ring = HashRing::new();
    let keyless = kit(&ring, &["a@h", "b@h", "c@h"]);
    for _ in 0..20 {
        let picked = keyless.pick_many(2, None).unwrap();
        assert_eq!(picked.len(), 2);
        assert_ne!(picked[0], picked[1]);
    }
    assert_eq!(ring.keyless_selections(), 20);
    // §11.18.12: 64 points per member still spread 100 keys over more than one node.
    let light = kit(&HashRing::new().weight(64), &["a@h", "b@h", "c@h"]);
    let used: BTreeSet<String> = (0..100u64)
        .map(|k| light.pick_and_release(Some(&k.to_be_bytes())).unwrap())
        .collect();
    assert!(used.len() > 1, "{used:?}");
}

/// A request for `key` over a list that carries `derived` (`None`: a list the selector was
/// not told of, or that is no published one).
fn request_with<'a>(key: &'a [u8], derived: Option<&'a Derived>) -> Request<'a> {
    Request {
        version: if derived.is_some() {
            1
        } else {
            Request::UNCACHED
        },
        derived,
        ..Request::new("b", Some(key), 0)
    }
}

/// The node `selector` answers for `key` over `list`, which carries `derived`.
fn ring_pick_at(
    selector: &dyn Selector,
    list: &[MemberView],
    key: &[u8],
    derived: Option<&Derived>,
) -> String {
    list[selector.pick(list, &request_with(key, derived)).unwrap()]
        .node()
        .to_string()
}

/// Tells `selector` of `list` as list `version`: what it derived, to travel with that list.
fn announce(selector: &dyn Selector, list: &[MemberView], version: u64) -> Option<Derived> {
    let joined: Vec<std::sync::Arc<str>> = list
        .iter()
        .map(|m| std::sync::Arc::clone(m.node_arc()))
        .collect();
    let change = crate::routing::Change {
        balancer: "b",
        joined: &joined,
        left: &[],
        members: list,
        version,
    };
    selector.members_changed(&change);
    selector.derive(&change)
}

#[test]
fn hash_ring_answers_from_the_list_it_is_given_not_a_stale_ring() {
    let ring = build(&HashRing::new());
    let abc = views(&["a@h", "b@h", "c@h"]);
    let derived = announce(&*ring, &abc, 1);
    assert!(derived.is_some(), "the ring travels with the list");
    for k in 0..25u64 {
        ring_pick_at(&*ring, &abc, &k.to_be_bytes(), derived.as_ref());
    }
    // §11.18.13: a list without c (a list the ring was not told of): only a or b.
    let ab = views(&["a@h", "b@h"]);
    for k in 0..25u64 {
        let node = ring_pick_at(&*ring, &ab, &k.to_be_bytes(), None);
        assert!(node == "a@h" || node == "b@h", "{node}");
    }
    // §11.18.14: grown from [a] to [a, b, c, d]: every key lands in the list, on > 1 node.
    announce(&*ring, &views(&["a@h"]), 3);
    let abcd = views(&["a@h", "b@h", "c@h", "d@h"]);
    let used: BTreeSet<String> = (0..200u64)
        .map(|k| ring_pick_at(&*ring, &abcd, &k.to_be_bytes(), None))
        .collect();
    assert!(used.len() > 1 && used.iter().all(|n| abcd.iter().any(|m| m.node() == n)));
    // §11.18.15: swapped wholesale: answers from the new set.
    announce(&*ring, &views(&["old_a@h", "old_b@h"]), 5);
    let new = views(&["new_a@h", "new_b@h"]);
    for k in 0..25u64 {
        assert!(ring_pick_at(&*ring, &new, &k.to_be_bytes(), None).starts_with("new_"));
    }
    // §11.18.16: replicas on a shrunk list come from it.
    announce(&*ring, &abc, 7);
    for k in 0..25u64 {
        let key = k.to_be_bytes();
        let mut picked = ring.pick_many(&ab, 2, &request_with(&key, None)).unwrap();
        picked.sort_unstable();
        assert_eq!(picked, [0, 1]);
    }
}

#[test]
fn hash_ring_reuses_the_ring_of_an_unchanged_list() {
    // §11.18.17: the ring derived for list 1 answers every selection of list 1: 25 repeats
    // give one node. That it is the carried ring (not a rebuild) shows when the list passed
    // with list 1's ring is in another order: the carried ring answers indices into the
    // announced order, a rebuild would answer by name.
    let ring = build(&HashRing::new());
    let abc = views(&["a@h", "b@h", "c@h"]);
    let one = announce(&*ring, &abc, 1);
    let one = one.as_ref();
    let key = b"customer-42";
    let first = ring_pick_at(&*ring, &abc, key, one);
    assert!((0..25).all(|_| ring_pick_at(&*ring, &abc, key, one) == first));
    let mut cba = abc.clone();
    cba.reverse();
    let (mut held, mut rebuilt) = (0, 0);
    for k in 0..100u64 {
        let key = k.to_be_bytes();
        let held_index = abc
            .iter()
            .position(|m| m.node() == ring_pick_at(&*ring, &abc, &key, one))
            .unwrap();
        held += usize::from(ring_pick_at(&*ring, &cba, &key, one) == cba[held_index].node());
        rebuilt += usize::from(ring_pick_at(&*ring, &cba, &key, None) == abc[held_index].node());
    }
    assert_eq!(held, 100, "list 1's selections use its carried ring");
    assert_eq!(
        rebuilt, 100,
        "another list gets a ring of its own (by name)"
    );
}

#[test]
fn hash_ring_point_collisions_resolve_by_node_name_in_any_member_order() {
    // Forcing a real XXH3 collision between two node names is impractical: the tie rule is
    // tested on the sort directly. a and b both have a point at 500; b also at 100.
    let ab = views(&["a@h", "b@h"]);
    let ba = views(&["b@h", "a@h"]);
    let points_ab = |list: &[MemberView]| -> Vec<(u64, u32)> {
        let index = |node: &str| list.iter().position(|m| m.node() == node).unwrap() as u32;
        vec![
            (500, index("b@h")),
            (500, index("a@h")),
            (100, index("b@h")),
        ]
    };
    let owners = |list: &[MemberView]| -> Vec<(u64, String)> {
        let mut points = points_ab(list);
        super::sort_points(&mut points, list);
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

/// The node `selector` answers for `key` over `list` (a list that is no published one).
fn ring_pick(selector: &dyn Selector, list: &[MemberView], key: &[u8]) -> String {
    list[pick_over(selector, list, Some(key))]
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

#[test]
fn hash_ring_is_consistent() {
    let four = views(&["a@h", "b@h", "c@h", "d@h"]);
    let ring = build(&HashRing::new());
    let ring = &*ring;
    let keys: Vec<Vec<u8>> = (0..1000u64)
        .map(|k| format!("key-{k}").into_bytes())
        .collect();
    let before: Vec<String> = keys.iter().map(|k| ring_pick(ring, &four, k)).collect();
    assert_eq!(
        ring_pick(ring, &four, b"customer-42"),
        ring_pick(ring, &four, b"customer-42")
    );
    let used: BTreeSet<&String> = before[..100].iter().collect();
    assert!(used.len() > 1, "100 keys all on one node");
    // Member order does not matter.
    let mut reversed = four.clone();
    reversed.reverse();
    assert!(keys
        .iter()
        .zip(&before)
        .all(|(k, owner)| &ring_pick(ring, &reversed, k) == owner));
    // A fifth member takes fewer than half of the keys, only onto itself.
    let five = views(&["a@h", "b@h", "c@h", "d@h", "e@h"]);
    let after: Vec<String> = keys.iter().map(|k| ring_pick(ring, &five, k)).collect();
    let moved: Vec<usize> = (0..keys.len())
        .filter(|i| before[*i] != after[*i])
        .collect();
    assert!(moved.len() < 500, "{} of 1000 keys moved", moved.len());
    assert!(moved.iter().all(|i| after[*i] == "e@h"));
    // Removing a member moves only its keys.
    let three = views(&["a@h", "b@h", "d@h"]);
    for (k, owner) in keys.iter().zip(&before) {
        let now = ring_pick(ring, &three, k);
        if owner != "c@h" {
            assert_eq!(&now, owner);
        }
    }
}

#[test]
fn hash_ring_replicas_wrap_and_start_with_the_owner() {
    let ring = kit(&HashRing::new().weight(1), &["a@h", "b@h", "c@h", "d@h"]);
    for k in 0..200u64 {
        let key = k.to_be_bytes();
        let owner = ring.pick_and_release(Some(&key)).unwrap();
        for count in [0, 1, 3, 4, 9] {
            let replicas = ring.pick_many(count, Some(&key)).unwrap();
            assert_eq!(replicas.len(), count.min(4), "key {k}, count {count}");
            if count > 0 {
                assert_eq!(replicas[0], owner);
            }
        }
    }
}

#[test]
fn hash_ring_without_a_key_is_random_and_counted() {
    let config = HashRing::new().seeded(5);
    let ring = kit(&config, &["a@h", "b@h", "c@h"]);
    let picked: BTreeSet<usize> = (0..60).map(|_| pick(&ring)).collect();
    assert_eq!(picked.len(), 3);
    assert_eq!(config.keyless_selections(), 60);
    for bad in [0, HashRing::MAX_WEIGHT + 1] {
        assert!(matches!(
            SelectorKit::new(&HashRing::new().weight(bad)),
            Err(Error::InvalidConfig {
                option: "weight",
                ..
            })
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn ring_answers_do_not_depend_on_member_order(
        names in proptest::collection::btree_set("[a-z]{1,6}@h[0-9]", 1..8),
        keys in proptest::collection::vec(any::<u64>(), 1..40),
        seed in any::<u64>(),
    ) {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let list = views(&names);
        let mut shuffled = list.clone();
        // A deterministic permutation from the seed.
        let n = shuffled.len();
        for i in (1..n).rev() {
            let j = (crate::routing::splitmix64(seed ^ i as u64) % (i as u64 + 1)) as usize;
            shuffled.swap(i, j);
        }
        let ring = build(&HashRing::new().weight(16));
        for key in keys {
            let key = key.to_be_bytes();
            prop_assert_eq!(ring_pick(&*ring, &list, &key), ring_pick(&*ring, &shuffled, &key));
        }
    }
}

/// The owner's position by a binary search over every point, wrapping to 0 — what
/// [`Ring::start`] answered before it had an index.
fn searched_start(points: &[(u64, u32)], h: u64) -> usize {
    let position = points.partition_point(|(point, _)| *point < h);
    if position == points.len() {
        0
    } else {
        position
    }
}

/// Key points that catch an index off by one: each point, one either side, the ring's ends,
/// and each arc boundary of 1 to 12 bits with the hash below it.
fn edge_points(points: &[(u64, u32)]) -> Vec<u64> {
    let mut keys = vec![0, 1, u64::MAX - 1, u64::MAX];
    for (point, _) in points {
        keys.extend([point.wrapping_sub(1), *point, point.wrapping_add(1)]);
    }
    for bits in 1..=12u32 {
        for arc in 1..1u64 << bits {
            let start = arc << (64 - bits);
            keys.extend([start - 1, start]);
        }
    }
    keys
}

#[test]
fn hash_ring_index_answers_the_binary_search_at_the_edges() {
    // Hand-made rings: empty, one point, points at both ends, runs of equal points, and every
    // point in one arc (a skew the hash never gives, which the index must still answer).
    let rings: [Vec<u64>; 6] = [
        vec![],
        vec![7],
        vec![0, u64::MAX],
        vec![0, 0, 5, 5, 5, 1 << 63, u64::MAX, u64::MAX],
        (0..100).map(|i| (1 << 40) + i).collect(),
        (0..1024u64).map(|i| i << 54).collect(),
    ];
    for hashes in rings {
        let points: Vec<(u64, u32)> = hashes.iter().map(|h| (*h, 0)).collect();
        let index = ring_index::RingIndex::new(&points);
        for h in edge_points(&points) {
            let searched = points.partition_point(|(point, _)| *point < h);
            assert_eq!(
                index.first_at_or_after(&points, h),
                searched,
                "{hashes:?} at {h:#x}"
            );
        }
    }
    // A key above every point wraps to the first; one equal to a point is that point's.
    let ring = Ring::new(&views(&["a@h", "b@h"]), 4);
    let last = ring.points.len() - 1;
    assert_eq!(ring.start(ring.points[last].0), last);
    assert_eq!(ring.start(u64::MAX), searched_start(&ring.points, u64::MAX));
    if ring.points[last].0 < u64::MAX {
        assert_eq!(ring.start(ring.points[last].0 + 1), 0);
    }
    assert_eq!(ring.start(0), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hash_ring_index_answers_the_binary_search(
        names in proptest::collection::btree_set("[a-z]{1,8}@h[0-9]", 1..=40),
        weight in 1u32..=300,
        keys in proptest::collection::vec(any::<u64>(), 0..200),
    ) {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let ring = Ring::new(&views(&names), weight);
        for h in keys.into_iter().chain(edge_points(&ring.points)) {
            prop_assert_eq!(ring.start(h), searched_start(&ring.points, h), "key point {:#x}", h);
        }
    }

    #[test]
    fn hash_ring_index_answers_the_binary_search_on_any_sorted_points(
        mut hashes in proptest::collection::vec(any::<u64>(), 0..300),
        top in any::<u64>(),
        clustered in any::<bool>(),
    ) {
        // Clustered: every hash in one arc of 2^48 (one bucket for rings up to 2^16 points).
        if clustered {
            hashes.iter_mut().for_each(|h| *h = (top & !((1 << 48) - 1)) | (*h >> 16));
        }
        hashes.sort_unstable();
        let points: Vec<(u64, u32)> = hashes.iter().map(|h| (*h, 0)).collect();
        let index = ring_index::RingIndex::new(&points);
        for h in edge_points(&points).into_iter().chain(hashes.iter().map(|h| h ^ top)) {
            let searched = points.partition_point(|(point, _)| *point < h);
            prop_assert_eq!(index.first_at_or_after(&points, h), searched, "key point {:#x}", h);
        }
    }
}
