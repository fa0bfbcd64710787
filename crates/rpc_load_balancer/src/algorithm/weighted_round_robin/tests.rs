//! WeightedRoundRobin's rules, on the test kit.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
// `pick` here is the kit's, not the rotation's own `pick`.
use crate::algorithm::test_support::pick;
use crate::algorithm::test_support::*;
use crate::testkit::SelectorKit;
use crate::Error;

#[test]
fn weighted_round_robin_is_exact_per_cycle() {
    let wrr = WeightedRoundRobin::new()
        .weight("a@h", 3)
        .weight("b@h", 1)
        .starting_at(0);
    let two = kit(&wrr, &["a@h", "b@h"]);
    let picks: Vec<usize> = (0..40).map(|_| pick(&two)).collect();
    for window in picks.windows(4) {
        assert_eq!(window.iter().filter(|i| **i == 0).count(), 3, "{picks:?}");
    }
    // Interleaved, not a burst of three.
    assert_ne!(&picks[..4], &[0, 0, 0, 1]);
    // Default weights: plain round robin.
    let plain = kit(
        &WeightedRoundRobin::new().starting_at(0),
        &["a@h", "b@h", "c@h"],
    );
    let picks: Vec<usize> = (0..6).map(|_| pick(&plain)).collect();
    assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
}

#[test]
fn weighted_round_robin_weights_zero_and_validation() {
    let no_b = kit(&WeightedRoundRobin::new().weight("b@h", 0), &["a@h", "b@h"]);
    assert!((0..10).all(|_| pick(&no_b) == 0));
    let none = kit(
        &WeightedRoundRobin::new().default_weight(0),
        &["a@h", "b@h"],
    );
    match none.pick(None) {
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
        match SelectorKit::new(&config) {
            Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option),
            other => panic!("{option}: {other:?}"),
        }
    }
}

#[test]
fn weighted_round_robin_uses_the_cycle_of_the_current_list() {
    let wrr = kit(
        &WeightedRoundRobin::new().weight("a@h", 2).starting_at(0),
        &["a@h", "b@h"],
    );
    let picks: Vec<usize> = (0..6).map(|_| pick(&wrr)).collect();
    assert_eq!(picks.iter().filter(|i| **i == 0).count(), 4);
    // A list that is not that list (a re-selection without a) gets its own cycle.
    for _ in 0..4 {
        let pick = wrr.pick_excluding(&["a@h"], None).unwrap();
        assert_eq!(pick.node(), "b@h");
        wrr.release(pick);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn weighted_round_robin_stays_in_turn_across_the_counter_wrap(
        weights in proptest::collection::vec(0usize..6, 1..6),
        before_wrap in 0usize..40,
        published in any::<bool>(),
    ) {
        let total: usize = weights.iter().sum();
        prop_assume!(total > 0);
        let names: Vec<String> = (0..weights.len()).map(|i| format!("n{i}@h")).collect();
        let mut wrr = WeightedRoundRobin::new()
            .default_weight(0)
            .starting_at(usize::MAX - before_wrap);
        for (name, weight) in names.iter().zip(&weights) {
            wrr = wrr.weight(name.clone(), *weight as u32);
        }
        let mut kit = SelectorKit::new(&wrr).unwrap();
        kit.join(&names);
        let picks = picks(&kit, before_wrap + 3 * total, published);
        // Every member its weight times in any `total` consecutive picks.
        each_window_holds(&picks, total, &weights)?;
    }

    #[test]
    fn weighted_round_robin_shares_are_exact_per_cycle(
        weights in proptest::collection::vec(0u32..6, 1..6),
        start in any::<usize>(),
    ) {
        let names: Vec<String> = (0..weights.len()).map(|i| format!("n{i}@h")).collect();
        let mut wrr = WeightedRoundRobin::new().default_weight(0).starting_at(start);
        for (name, weight) in names.iter().zip(&weights) {
            wrr = wrr.weight(name.clone(), *weight);
        }
        let mut kit = SelectorKit::new(&wrr).unwrap();
        kit.join(&names);
        let total: u32 = weights.iter().sum();
        if total == 0 {
            prop_assert!(kit.pick(None).is_err());
            return Ok(());
        }
        let gcd = weights.iter().copied().filter(|w| *w > 0).fold(0, |a, b| {
            let (mut a, mut b) = (a, b);
            while b != 0 { let t = a % b; a = b; b = t; }
            a
        });
        let period = (total / gcd) as usize;
        // Any `period` consecutive picks contain each member weight/gcd times.
        let picks: Vec<usize> = (0..period * 3).map(|_| pick(&kit)).collect();
        for window in picks.windows(period) {
            for (i, weight) in weights.iter().enumerate() {
                let seen = window.iter().filter(|p| **p == i).count() as u32;
                prop_assert_eq!(seen, weight / gcd);
            }
        }
    }
}

#[test]
fn with_slow_start_a_ramping_members_weight_is_multiplied_by_its_factor_as_it_ramps() {
    let wrr = WeightedRoundRobin::new()
        .weight("a@h", 2)
        .weight("d@h", 2)
        .starting_at(0);
    // d joined 25 s into a 100 s window: factor 0.25.
    let kit = ramping_kit(Arc::new(wrr), &["a@h", "b@h", "c@h"], &["d@h"], 25 * S);
    // Weights 2, 1, 1 and d's 2 × 0.25: d takes 0.5 / 4.5 of the picks, a 2 / 4.5. (The
    // skip on top would leave d about 3 %.)
    let counts = kit.counts(9_000, None).unwrap();
    assert!((980..=1_020).contains(&counts["d@h"]), "{counts:?}");
    assert!((3_960..=4_040).contains(&counts["a@h"]), "{counts:?}");
    let explained = kit.explain(3, None).unwrap();
    assert_eq!(explained.scores[3], ("d@h".to_string(), 0.5));
    assert!(explained.rule.contains("weight × slow-start factor"));
    // Half way, the weight follows the factor (refreshed at most every 100 ms): 2 × 0.5 = 1,
    // a fifth of the picks.
    kit.clock().advance(25 * S);
    let counts = kit.counts(10_000, None).unwrap();
    assert!((1_980..=2_020).contains(&counts["d@h"]), "{counts:?}");
    // A re-selection without a (a list that is no published one): b, c and d weigh 1 each.
    let mut d = 0;
    for _ in 0..3_000 {
        let pick = kit.pick_excluding(&["a@h"], None).unwrap();
        d += usize::from(pick.node() == "d@h");
        kit.release(pick);
    }
    assert!((970..=1_030).contains(&d), "{d}");
    // After the window, the first pick finds every factor at 1: the exact cycle again.
    kit.clock().advance(50 * S);
    pick(&kit);
    let picks: Vec<usize> = (0..60).map(|_| pick(&kit)).collect();
    for window in picks.windows(6) {
        let times: Vec<usize> = (0..4)
            .map(|i| window.iter().filter(|p| **p == i).count())
            .collect();
        assert_eq!(times, [2, 1, 1, 2], "{picks:?}");
    }
}
