//! RoundRobin's rules, on the test kit (no actors, no node).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::algorithm::test_support::*;
use crate::routing::Request;
use crate::testkit::SelectorKit;
use crate::Error;

#[test]
fn round_robin_cycles_members_in_order() {
    let rr = kit(&RoundRobin::starting_at(0), &["a", "b", "c"]);
    let picks: Vec<String> = (0..7).map(|_| rr.pick_and_release(None).unwrap()).collect();
    assert_eq!(picks, ["a", "b", "c", "a", "b", "c", "a"]);
    let selector = build(&RoundRobin::starting_at(0));
    assert_eq!(pick_over(&*selector, &views(&["a"]), None), 0);
    assert!(matches!(
        selector.pick(&[], &Request::new("b", None, 1)),
        Err(Error::NoMembers { .. })
    ));
}

#[test]
fn round_robin_starts_at_random_offsets() {
    // One configuration, many balancers: each selector starts somewhere else.
    let rr = RoundRobin::new();
    let firsts: BTreeSet<usize> = (0..50)
        .map(|_| pick(&kit(&rr, &["a", "b", "c", "d", "e", "f", "g", "h"])))
        .collect();
    assert!(
        firsts.len() > 1,
        "every selector started at the same member"
    );
    // A seeded build is reproducible.
    let seeded = |seed| {
        let mut kit = SelectorKit::seeded(&rr, seed).unwrap();
        kit.join(["a", "b", "c", "d", "e", "f", "g", "h"]);
        pick(&kit)
    };
    assert_eq!(seeded(3), seeded(3));
}

#[test]
fn round_robin_wraps_without_skew() {
    let rr = kit(&RoundRobin::starting_at(usize::MAX - 1), &["a", "b", "c"]);
    for _ in 0..10 {
        assert!(pick(&rr) < 3);
    }
}

#[test]
fn round_robin_spreads_concurrent_picks_evenly() {
    // §11.14.3: 100 picks from 4 threads at once over 4 members: each member exactly 25 times.
    let rr = kit(&RoundRobin::new(), &["a", "b", "c", "d"]);
    let selector = rr.selector();
    let (members, request) = (rr.members(), rr.request(None));
    let picks: Vec<usize> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..25)
                        .map(|_| selector.pick(members, &request).unwrap())
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn round_robin_stays_in_turn_across_the_counter_wrap(
        len in 1usize..12,
        before_wrap in 0usize..40,
        published in any::<bool>(),
    ) {
        let names: Vec<String> = (0..len).map(|i| format!("n{i:02}@h")).collect();
        let rr = RoundRobin::starting_at(usize::MAX - before_wrap);
        let mut kit = SelectorKit::new(&rr).unwrap();
        kit.join(&names);
        let picks = picks(&kit, before_wrap + 3 * len, published);
        each_window_holds(&picks, len, &vec![1; len])?;
    }
}

#[test]
fn re_picks_take_their_own_turn_and_spread_evenly() {
    // Issue 22: the first member fails every call it gets and each of those is re-picked
    // among the others, as a retry or a re-send of a refused call is. The first picks keep
    // their rotation (a, b, c, d, a, …: re-picks do not move it), and the re-picks go in
    // turn over the three others, so each gets exactly a third of them.
    let rr = kit(&RoundRobin::starting_at(0), &["a", "b", "c", "d"]);
    let mut firsts = Vec::new();
    let mut again: std::collections::BTreeMap<String, usize> = Default::default();
    for _ in 0..1_200 {
        let first = rr.pick(None).unwrap();
        let node = first.node().to_string();
        rr.release(first);
        if node == "a" {
            let next = rr.pick_excluding(&["a"], None).unwrap();
            *again.entry(next.node().to_string()).or_default() += 1;
            rr.release(next);
        }
        firsts.push(node);
    }
    let expected: Vec<&str> = ["a", "b", "c", "d"]
        .iter()
        .cycle()
        .take(1_200)
        .copied()
        .collect();
    assert_eq!(firsts, expected);
    let spread: Vec<(&str, usize)> = again.iter().map(|(n, c)| (n.as_str(), *c)).collect();
    assert_eq!(spread, [("b", 100), ("c", 100), ("d", 100)]);
}

#[test]
fn a_re_pick_among_members_left_never_returns_one_excluded() {
    let rr = kit(&RoundRobin::starting_at(0), &["a", "b", "c", "d", "e"]);
    let mut seen = BTreeSet::new();
    for _ in 0..30 {
        let next = rr.pick_excluding(&["b", "d"], None).unwrap();
        seen.insert(next.node().to_string());
        rr.release(next);
    }
    let expected: BTreeSet<String> = ["a", "c", "e"].iter().map(|s| s.to_string()).collect();
    assert_eq!(seen, expected);
    assert!(matches!(
        rr.pick_excluding(&["a", "b", "c", "d", "e"], None),
        Err(Error::NoMembers { .. })
    ));
    let selector = build(&RoundRobin::starting_at(0));
    assert!(matches!(
        selector.repick(&[], &Request::new("b", None, Request::UNCACHED)),
        Err(Error::NoMembers { .. })
    ));
}
