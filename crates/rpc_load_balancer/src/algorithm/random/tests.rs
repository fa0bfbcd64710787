//! Random's rules, on the test kit.

use super::*;
use crate::algorithm::test_support::*;
use crate::testkit::SelectorKit;

#[test]
fn seeded_random_is_reproducible_and_uniform_enough() {
    let nodes = ["a", "b", "c", "d"];
    let one = kit(&Random::seeded(7), &nodes);
    let two = kit(&Random::seeded(7), &nodes);
    let a: Vec<usize> = (0..100).map(|_| pick(&one)).collect();
    let b: Vec<usize> = (0..100).map(|_| pick(&two)).collect();
    assert_eq!(a, b);
    let counts = one.counts(8000, None).unwrap();
    for node in nodes {
        let share = counts[node] as f64 / 8000.0;
        assert!((0.2..0.3).contains(&share), "member {node} got {share}");
    }
    // The kit's seed overrides the algorithm's own.
    let (x, y) = (
        SelectorKit::seeded(&Random::seeded(1), 5).unwrap(),
        SelectorKit::seeded(&Random::new(), 5).unwrap(),
    );
    let list = views(&nodes);
    let xs: Vec<usize> = (0..50)
        .map(|_| pick_over(x.selector(), &list, None))
        .collect();
    let ys: Vec<usize> = (0..50)
        .map(|_| pick_over(y.selector(), &list, None))
        .collect();
    assert_eq!(xs, ys);
    let unseeded = kit(&Random::new(), &nodes);
    assert!((0..100).all(|_| pick(&unseeded) < 4));
}

#[test]
fn random_ignores_the_key() {
    // §11.13.3: the same seed gives the same picks with or without a key.
    let nodes = ["a", "b", "c", "d"];
    let (plain, keyed) = (
        kit(&Random::seeded(3), &nodes),
        kit(&Random::seeded(3), &nodes),
    );
    for k in 0..100u64 {
        let key = k.to_be_bytes();
        assert_eq!(
            plain.pick_and_release(None).unwrap(),
            keyed.pick_and_release(Some(&key)).unwrap()
        );
    }
}
