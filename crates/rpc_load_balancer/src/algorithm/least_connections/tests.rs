//! LeastConnections' rules, on the test kit.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::*;
use crate::algorithm::test_support::*;

#[test]
fn least_connections_takes_the_least_loaded_and_breaks_ties_at_random() {
    let lc = kit(&LeastConnections::seeded(1), &["a", "b", "c"]);
    // Fresh counters: three picks (each holding a count) reach three different members.
    let held: Vec<_> = (0..3).map(|_| lc.pick(None).unwrap()).collect();
    let picked: BTreeSet<String> = held.iter().map(|p| p.node().to_string()).collect();
    assert_eq!(picked.len(), 3);
    // After releasing b, the next pick is b.
    let mut held = held;
    let b = held.iter().position(|p| p.node() == "b").unwrap();
    lc.release(held.remove(b));
    assert_eq!(lc.pick_and_release(None).unwrap(), "b");
    for pick in held {
        lc.release(pick);
    }
    assert_eq!(lc.in_flight("a"), Some(0));
    // Ties are not always resolved to the first member.
    let idle = kit(&LeastConnections::seeded(1), &["a", "b", "c", "d"]);
    let firsts: BTreeSet<usize> = (0..100).map(|_| pick(&idle)).collect();
    assert_eq!(firsts.len(), 4, "ties at random: {firsts:?}");
}

#[test]
fn least_connections_follows_releases_joins_and_leaves() {
    let mut lc = kit(&LeastConnections::seeded(4), &["a", "b"]);
    // §11.16.2: two picks on [a, b] take both; after releasing a, the next is a.
    let first = lc.pick(None).unwrap();
    let second = lc.pick(None).unwrap();
    let mut taken = BTreeSet::from([first.index, second.index]);
    assert_eq!(taken.len(), 2, "the two picks reach both members");
    let (a, b) = if first.node() == "a" {
        (first, second)
    } else {
        (second, first)
    };
    lc.release(a);
    let a = lc.pick(None).unwrap();
    assert_eq!(a.node(), "a");
    taken.clear();
    // §11.16.3: a leaves; the list [b] picks b, and b's count is its own.
    lc.leave(["a"]);
    assert!((0..10).all(|_| lc.pick_and_release(None).unwrap() == "b"));
    assert_eq!(lc.in_flight("b"), Some(1));
    // A late release of a (its selection outlived its membership) leaves b alone.
    lc.release(a);
    assert_eq!(lc.in_flight("b"), Some(1));
    // a rejoins: a new member, starting at 0.
    lc.join(["a"]);
    assert_eq!(lc.in_flight("a"), Some(0));
    lc.release(b);
    assert_eq!(lc.in_flight("b"), Some(0));
}

#[test]
fn with_slow_start_a_ramping_member_costs_in_flight_over_its_factor_and_wins_ties_by_it() {
    // d joined 25 s into a 100 s window: factor 0.25.
    let kit = ramping_kit(
        Arc::new(LeastConnections::new()),
        &["a", "b", "c"],
        &["d"],
        25 * S,
    );
    // Idle, every member ties: the scan's start is drawn by factor, so d gets about a
    // quarter of an even member's picks (0.254 with at most 4 draws; the skip on top would
    // give about 0.06).
    let counts = kit.counts(30_000, None).unwrap();
    let even = (counts["a"] + counts["b"] + counts["c"]) as f64 / 3.0;
    let ratio = counts["d"] as f64 / even;
    assert!((0.22..=0.29).contains(&ratio), "{ratio}: {counts:?}");
    // Busy: d with 2 costs 8 against the others' 4: never d; with none it costs 0: d.
    for node in ["a", "b", "c"] {
        kit.set_in_flight(node, 4);
    }
    kit.set_in_flight("d", 2);
    assert!((0..300).all(|_| pick(&kit) != 3));
    kit.set_in_flight("d", 0);
    assert!((0..300).all(|_| pick(&kit) == 3));
    kit.set_in_flight("d", 1);
    let explained = kit.explain(3, None).unwrap();
    assert_eq!(explained.scores[3], ("d".to_string(), 4.0));
    assert!(explained
        .rule
        .starts_with("fewest calls in flight ÷ slow-start factor"));
    // After the window: ties at random, evenly.
    for node in ["a", "b", "c", "d"] {
        kit.set_in_flight(node, 0);
    }
    kit.clock().advance(75 * S);
    let counts = kit.counts(20_000, None).unwrap();
    assert!((4_700..=5_300).contains(&counts["d"]), "{counts:?}");
}
