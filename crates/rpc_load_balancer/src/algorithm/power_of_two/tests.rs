//! PowerOfTwo's rules, on the test kit.

use super::*;
use crate::algorithm::test_support::*;

#[test]
fn power_of_two_samples_two_distinct_members_and_takes_the_lighter() {
    let p2c = kit(&PowerOfTwo::seeded(3), &["a", "b"]);
    p2c.set_in_flight("a", 5);
    assert!(
        (0..50).all(|_| pick(&p2c) == 1),
        "with two members both are always sampled"
    );
    let three = kit(&PowerOfTwo::seeded(3), &["a", "b", "c"]);
    three.set_in_flight("b", 10);
    three.set_in_flight("c", 10);
    let a = (0..3000).filter(|_| pick(&three) == 0).count();
    // a is picked whenever sampled: in 2 of the 3 possible pairs.
    assert!((1800..2200).contains(&a), "a picked {a} of 3000");
    let one = kit(&PowerOfTwo::seeded(3), &["a"]);
    assert_eq!(pick(&one), 0);
}

#[test]
fn the_two_samples_are_distinct_and_cover_every_pair() {
    let rng = Rng::seeded(11);
    for n in 2..10usize {
        let mut pairs = std::collections::HashSet::new();
        let mut coins = [0u32; 2];
        for _ in 0..4000 {
            let (a, b, coin) = two(&rng, n);
            assert!(a < n && b < n && a != b, "n={n}: ({a}, {b})");
            pairs.insert((a, b));
            coins[usize::from(coin)] += 1;
        }
        assert_eq!(
            pairs.len(),
            n * (n - 1),
            "n={n}: every ordered pair is drawn"
        );
        assert!(coins.iter().all(|c| *c > 1500), "n={n}: coin {coins:?}");
    }
}
