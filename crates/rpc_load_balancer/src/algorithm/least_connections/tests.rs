//! LeastConnections' rules, on the test kit.

use std::collections::BTreeSet;

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
