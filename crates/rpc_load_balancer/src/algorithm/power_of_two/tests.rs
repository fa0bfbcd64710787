//! PowerOfTwo's rules, on the test kit.

use std::sync::Arc;

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

#[test]
fn with_slow_start_a_ramping_member_loses_ties_by_its_factor_and_costs_in_flight_over_it() {
    // b joined 25 s into a 100 s window: factor 0.25.
    let kit = ramping_kit(Arc::new(PowerOfTwo::new()), &["a"], &["b"], 25 * S);
    // Idle (each pick released at once), every pick is a tie: b wins 0.25 / 1.25 of them,
    // a quarter of a's picks. (Slow start's skip on top would leave b about 6 %.)
    let counts = kit.counts(20_000, None).unwrap();
    let b = counts["b"] as f64 / 20_000.0;
    assert!((0.19..=0.21).contains(&b), "{counts:?}");
    // Equal calls in flight: b costs 3 ÷ 0.25 = 12 against a's 3: never b.
    kit.set_in_flight("a", 3);
    kit.set_in_flight("b", 3);
    assert!((0..200).all(|_| pick(&kit) == 0));
    // b with 1 costs 4, a with 5 costs 5: b.
    kit.set_in_flight("a", 5);
    kit.set_in_flight("b", 1);
    assert!((0..200).all(|_| pick(&kit) == 1));
    let explained = kit.explain(1, None).unwrap();
    assert_eq!(explained.scores, [("b".to_string(), 4.0)]);
    assert!(
        explained.rule.contains("÷ slow-start factor")
            && explained
                .rule
                .ends_with("applied by the algorithm (costs ÷ factor, weights × factor): b ×0.25"),
        "{}",
        explained.rule
    );
    // After the window: plain power of two, ties at even odds.
    kit.set_in_flight("a", 0);
    kit.set_in_flight("b", 0);
    kit.clock().advance(75 * S);
    let counts = kit.counts(20_000, None).unwrap();
    assert!((9_600..=10_400).contains(&counts["b"]), "{counts:?}");
}
