//! Slow start's rules, on the test kit (manual clock, seeded algorithms).

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::routing::SlowStart;
use rpc_load_balancer::testkit::SelectorKit;
use rpc_load_balancer::{
    algorithm, CallDirect, HashRing, LeastConnections, LoadWeighted, Random, RoundRobin,
    WeightedRoundRobin,
};
use rpc_load_balancer::{Algorithm, Error};

const S: Duration = Duration::from_secs(1);
const PICKS: usize = 20_000;

/// A seeded kit of `algorithm` with slow start's defaults over `nodes` (the first list).
fn kit_of(algorithm: Arc<dyn Algorithm>, nodes: &[&str]) -> SelectorKit {
    let algorithm = SlowStart::new().wrap(algorithm);
    let mut kit = SelectorKit::seeded(&*algorithm, 11).unwrap();
    kit.join(nodes);
    kit
}

/// Each member's share of [`PICKS`] picks (released at once), by node.
fn shares(kit: &SelectorKit) -> std::collections::BTreeMap<String, f64> {
    kit.counts(PICKS, None)
        .unwrap()
        .into_iter()
        .map(|(node, n)| (node, n as f64 / PICKS as f64))
        .collect()
}

fn share_of(kit: &SelectorKit, node: &str) -> f64 {
    shares(kit).get(node).copied().unwrap_or(0.0)
}

#[test]
fn the_factor_follows_envoys_formula() {
    let default = SlowStart::new();
    assert_eq!(default.factor(Duration::ZERO), 0.1, "at least min_percent");
    assert_eq!(default.factor(S), 0.1, "1/30 is below the minimum");
    assert_eq!(default.factor(15 * S), 0.5, "linear: half way, half");
    assert_eq!(
        default.factor(30 * S - Duration::from_nanos(1)),
        1.0 - 1e-9 / 30.0
    );
    assert_eq!(default.factor(30 * S), 1.0, "the window's end");
    assert_eq!(default.factor(90 * S), 1.0);
    // Aggression 2: the square root of the time, fast early.
    let bent = SlowStart::new()
        .window(100 * S)
        .aggression(2.0)
        .min_percent(5.0);
    assert_eq!(bent.factor(25 * S), 0.5);
    assert_eq!(bent.factor(50 * S), 0.5f64.sqrt());
    assert_eq!(bent.factor(Duration::ZERO), 0.05);
    assert_eq!(bent.factor(S), 0.1, "sqrt(1/100) is above 5 %");
    // Aggression 0.5: the square, slow early.
    let slow = SlowStart::new().window(10 * S).aggression(0.5);
    assert!((slow.factor(5 * S) - 0.25).abs() < 1e-12);
    assert_eq!(slow.factor(2 * S), 0.1, "0.04 is below 10 %");
    assert_eq!(
        SlowStart::new().min_percent(100.0).factor(Duration::ZERO),
        1.0
    );
}

#[test]
fn invalid_options_are_named() {
    let cases = [
        (SlowStart::new().window(Duration::ZERO), "window"),
        (SlowStart::new().aggression(0.0), "aggression"),
        (SlowStart::new().aggression(-1.0), "aggression"),
        (SlowStart::new().aggression(f64::NAN), "aggression"),
        (SlowStart::new().aggression(f64::INFINITY), "aggression"),
        (SlowStart::new().min_percent(0.0), "min_percent"),
        (SlowStart::new().min_percent(100.5), "min_percent"),
        (SlowStart::new().min_percent(f64::NAN), "min_percent"),
    ];
    for (options, option) in cases {
        let wrapped = options.clone().wrap(Arc::new(RoundRobin::new()));
        match SelectorKit::new(&*wrapped) {
            Err(Error::InvalidConfig { option: named, .. }) => {
                assert_eq!(named, option, "{options:?}")
            }
            other => panic!("{options:?}: {other:?}"),
        }
    }
    assert_eq!(SlowStart::new().validate(), Ok(()));
    assert_eq!(SlowStart::new().min_percent(100.0).validate(), Ok(()));
}

#[test]
fn hash_ring_and_call_direct_refuse_slow_start_under_any_wrapper() {
    let refused: [Arc<dyn Algorithm>; 4] = [
        Arc::new(HashRing::new()),
        Arc::new(CallDirect),
        algorithm::by_name("hash_ring+ejection").unwrap(),
        algorithm::by_name("call_direct").unwrap(),
    ];
    for inner in refused {
        let name = inner.name();
        let wrapped = SlowStart::new().wrap(inner);
        assert!(
            matches!(
                SelectorKit::new(&*wrapped),
                Err(Error::InvalidConfig {
                    option: "slow_start",
                    ..
                })
            ),
            "{name}"
        );
    }
    assert!(matches!(
        SelectorKit::new(&*algorithm::by_name("hash_ring+slow_start+ejection").unwrap()),
        Err(Error::InvalidConfig {
            option: "slow_start",
            ..
        })
    ));
    let ok = algorithm::by_name("round_robin+slow_start+ejection").unwrap();
    assert_eq!(ok.name(), "round_robin+slow_start+ejection");
    assert!(SelectorKit::new(&*ok).is_ok());
}

#[test]
fn the_members_of_the_first_list_do_not_ramp() {
    let kit = kit_of(Arc::new(RoundRobin::new()), &["a", "b", "c", "d", "e"]);
    let counts = kit.counts(1_000, None).unwrap();
    assert!(counts.values().all(|&n| n == 200), "{counts:?}");
}

/// A member `e` joins four; its share right after, half way and at the window's end, and
/// the largest share of any member right after.
fn ramp(algorithm: Arc<dyn Algorithm>) -> ([f64; 3], f64) {
    let mut kit = kit_of(algorithm, &["a", "b", "c", "d"]);
    kit.clock().advance(100 * S);
    kit.join(["e"]);
    let start = shares(&kit);
    let largest = start.values().copied().fold(0.0, f64::max);
    let first = start.get("e").copied().unwrap_or(0.0);
    kit.clock().advance(15 * S);
    let half = share_of(&kit, "e");
    kit.clock().advance(15 * S);
    ([first, half, share_of(&kit, "e")], largest)
}

#[test]
fn a_new_member_ramps_from_the_minimum_to_its_fair_share_with_round_robin() {
    let ([first, half, full], largest) = ramp(Arc::new(RoundRobin::new()));
    // A fair share is 20 %: about 10 % of it at first, half of it half way, all at the end.
    assert!((0.015..=0.03).contains(&first), "{first}");
    assert!((0.08..=0.12).contains(&half), "{half}");
    assert_eq!(full, 0.2, "a rotation's exact share at the window's end");
    assert!(
        largest < 0.4,
        "no member above twice a fair share: {largest}"
    );
}

#[test]
fn a_new_member_ramps_from_the_minimum_to_its_fair_share_with_random() {
    let ([first, half, full], largest) = ramp(Arc::new(Random::new()));
    assert!((0.015..=0.03).contains(&first), "{first}");
    assert!((0.08..=0.12).contains(&half), "{half}");
    assert!((0.19..=0.21).contains(&full), "{full}");
    assert!(
        largest < 0.4,
        "no member above twice a fair share: {largest}"
    );
}

#[test]
fn a_new_member_ramps_by_weight_times_factor_with_weighted_round_robin_and_load_weighted() {
    let weighted: [Arc<dyn Algorithm>; 2] = [
        Arc::new(WeightedRoundRobin::new()),
        Arc::new(LoadWeighted::new()),
    ];
    for algorithm in weighted {
        let name = algorithm.name();
        let ([first, half, full], largest) = ramp(algorithm);
        // Every member weighs 1 (LoadWeighted: no reports), e its factor: 0.1 / 4.1 of the
        // picks at first, 0.5 / 4.5 half way (its weight followed the factor), 1 / 5 at the
        // end.
        assert!((0.022..=0.027).contains(&first), "{name}: {first}");
        assert!((0.105..=0.117).contains(&half), "{name}: {half}");
        assert!((0.195..=0.205).contains(&full), "{name}: {full}");
        assert!(largest < 0.4, "{name}: {largest}");
    }
}

#[test]
fn a_new_member_ramps_by_its_factor_in_ties_with_least_connections() {
    // Idle members tie: the scan starts at a member drawn by factor, so e gets about
    // factor / (4 + factor) of the picks.
    let ([first, half, full], largest) = ramp(Arc::new(LeastConnections::new()));
    assert!((0.02..=0.03).contains(&first), "{first}");
    assert!((0.1..=0.12).contains(&half), "{half}");
    assert!((0.19..=0.21).contains(&full), "{full}");
    assert!(largest < 0.4, "{largest}");
}

#[test]
fn a_member_that_rejoins_starts_again_and_one_that_stays_keeps_its_start() {
    let mut kit = kit_of(Arc::new(RoundRobin::new()), &["a", "b", "c", "d"]);
    kit.join(["e"]);
    kit.clock().advance(20 * S);
    // Another member's leave and join do not restart e's window.
    kit.leave(["a"]);
    kit.join(["a"]);
    kit.clock().advance(10 * S);
    let counts = kit.counts(1_000, None).unwrap();
    let (a, c, e) = (counts["a"], counts["c"], counts["e"]);
    assert!(e.abs_diff(c) <= 1, "e's window ended, as c's: {counts:?}");
    assert!(a < 100, "a rejoined 10 s ago, factor 1/3: {counts:?}");
    kit.leave(["e"]);
    kit.clock().advance(S);
    kit.join(["e"]);
    let share = share_of(&kit, "e");
    assert!((0.015..=0.03).contains(&share), "e starts again: {share}");
}

#[test]
fn an_empty_first_list_makes_the_next_the_first() {
    let algorithm = SlowStart::new().wrap(Arc::new(RoundRobin::new()));
    let mut kit = SelectorKit::seeded(&*algorithm, 3).unwrap();
    kit.join(["a"]);
    kit.leave(["a"]);
    kit.join(["b", "c"]);
    let counts = kit.counts(1_000, None).unwrap();
    assert!(
        counts.values().all(|&n| (400..=600).contains(&n)),
        "after a non-empty first list, members ramp: {counts:?}"
    );
    let algorithm = SlowStart::new().wrap(Arc::new(RoundRobin::new()));
    let mut kit = SelectorKit::seeded(&*algorithm, 3).unwrap();
    kit.join(Vec::<&str>::new());
    kit.join(["b", "c"]);
    let counts = kit.counts(1_000, None).unwrap();
    assert!(counts.values().all(|&n| n == 500), "{counts:?}");
}
