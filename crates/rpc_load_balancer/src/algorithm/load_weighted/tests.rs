//! LoadWeighted's rules, on the test kit (manual clock, reports set by hand).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::schedule::{next, MAX_SCALED};
use super::track::weight_of;
use super::*;
use crate::algorithm::test_support::slow_start_kit;
use crate::routing::{Algorithm, BuildContext, LoadReport, OutcomeKind};
use crate::testkit::SelectorKit;

const S: Duration = Duration::from_secs(1);

fn report(qps: u32, eps: u32, cpu: Option<f64>, utilization: Option<f64>) -> LoadReport {
    LoadReport {
        qps,
        eps,
        cpu,
        utilization,
        ..LoadReport::default()
    }
}

/// A seeded kit of `algorithm` over `nodes`.
fn kit_of(algorithm: LoadWeighted, nodes: &[&str]) -> SelectorKit {
    let mut kit = SelectorKit::seeded(&algorithm, 7).unwrap();
    kit.join(nodes);
    kit
}

/// Every node of `qps` reports that many calls a second at 50 % CPU (arrived now).
fn reports(kit: &SelectorKit, qps: &[(&str, u32)]) {
    for (node, qps) in qps {
        assert!(kit.set_report(node, &report(*qps, 0, Some(50.0), None), Duration::ZERO));
    }
}

/// Shares of `n` picks, by node.
fn counts(kit: &SelectorKit, n: usize) -> BTreeMap<String, usize> {
    kit.counts(n, None).unwrap()
}

/// Each node's weight in use and standing, as explained.
fn explained(kit: &SelectorKit) -> (Vec<(String, f64)>, String) {
    let explanation = kit.explain(0, None).unwrap();
    (explanation.scores, explanation.rule)
}

#[test]
fn the_weight_is_qps_per_utilization_with_the_error_penalty() {
    assert_eq!(
        weight_of(&report(100, 0, Some(50.0), None), 1.0),
        Some(200.0)
    );
    // Application utilization wins over CPU when set and above 0.
    assert_eq!(
        weight_of(&report(100, 0, Some(50.0), Some(0.25)), 1.0),
        Some(400.0)
    );
    assert_eq!(
        weight_of(&report(100, 0, Some(50.0), Some(0.0)), 1.0),
        Some(200.0)
    );
    // 10 % errors add 0.1 × penalty to the utilization.
    assert_eq!(
        weight_of(&report(100, 10, Some(40.0), None), 1.0),
        Some(200.0)
    );
    assert_eq!(
        weight_of(&report(100, 10, Some(40.0), None), 0.0),
        Some(250.0)
    );
    // Empty reports teach nothing.
    assert_eq!(weight_of(&report(0, 0, Some(50.0), None), 1.0), None);
    assert_eq!(weight_of(&report(100, 0, Some(0.0), None), 1.0), None);
    assert_eq!(weight_of(&report(100, 0, None, None), 1.0), None);
    assert_eq!(weight_of(&report(100, 0, None, Some(-1.0)), 1.0), None);
    assert_eq!(weight_of(&report(100, 0, None, Some(f64::NAN)), 1.0), None);
    // eps above qps (a hostile report) counts as qps.
    assert_eq!(
        weight_of(&report(100, 900, Some(100.0), None), 1.0),
        Some(50.0)
    );
}

#[test]
fn weights_follow_reports_after_the_blackout() {
    let kit = kit_of(LoadWeighted::new(), &["a", "b", "c"]);
    reports(&kit, &[("a", 100), ("b", 200), ("c", 100)]);
    kit.clock().advance(S);
    // In the blackout: round robin.
    assert_eq!(
        counts(&kit, 300).values().copied().collect::<Vec<_>>(),
        [100; 3]
    );
    let (_, rule) = explained(&kit);
    assert!(
        rule.contains("round robin") && rule.contains("blackout"),
        "{rule}"
    );
    kit.clock().advance(10 * S);
    let counts = counts(&kit, 400);
    assert_eq!((counts["a"], counts["b"], counts["c"]), (100, 200, 100));
    let (scores, rule) = explained(&kit);
    assert_eq!(scores[1], ("b".to_string(), 400.0));
    assert!(rule.contains("usable 400.000"), "{rule}");
    // New reports move the weights at the next recomputation (after the update period).
    reports(&kit, &[("a", 300)]);
    assert_eq!(
        kit.counts(400, None).unwrap()["a"],
        100,
        "within the period"
    );
    kit.clock().advance(S);
    // Half way: a's weight from 200 to (200 + 600) / 2 = 400 (the new report's share).
    let counts = kit.counts(500, None).unwrap();
    assert_eq!((counts["a"], counts["b"], counts["c"]), (200, 200, 100));
    // The same again: 500, then 550, ...
    reports(&kit, &[("a", 300)]);
    kit.clock().advance(S);
    let counts = kit.counts(1_100, None).unwrap();
    assert_eq!((counts["a"], counts["b"], counts["c"]), (500, 400, 200));
}

#[test]
fn the_blackout_counts_from_the_first_non_empty_report() {
    let kit = kit_of(LoadWeighted::new(), &["a", "b"]);
    // Empty reports start nothing.
    for node in ["a", "b"] {
        kit.set_report(node, &report(0, 0, Some(10.0), None), Duration::ZERO);
    }
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    kit.clock().advance(20 * S);
    let (_, rule) = explained(&kit);
    assert!(rule.contains("no report"), "{rule}");
    reports(&kit, &[("a", 300), ("b", 100)]);
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    kit.clock().advance(8 * S);
    let counts = counts(&kit, 400);
    assert_eq!(counts["a"], 200, "9 s after: still in the blackout");
    kit.clock().advance(S);
    let counts = kit.counts(400, None).unwrap();
    assert_eq!(counts["a"], 300, "10 s after");
    // An empty report later leaves the weight as it was.
    kit.set_report("a", &report(0, 0, None, None), Duration::ZERO);
    kit.clock().advance(S);
    assert_eq!(kit.counts(400, None).unwrap()["a"], 300);
}

#[test]
fn a_zero_blackout_uses_a_weight_at_once() {
    let kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b"],
    );
    reports(&kit, &[("a", 100), ("b", 300)]);
    kit.clock().advance(S);
    assert_eq!(counts(&kit, 400)["b"], 300);
}

#[test]
fn weights_expire_without_reports_and_the_blackout_starts_again() {
    let algorithm = LoadWeighted::new().weight_expiration_period(60 * S);
    let kit = kit_of(algorithm, &["a", "b", "c"]);
    reports(&kit, &[("a", 100), ("b", 100), ("c", 400)]);
    kit.clock().advance(11 * S);
    assert_eq!(counts(&kit, 600)["c"], 400);
    // a and b keep reporting; c is not heard of for a minute.
    kit.clock().advance(30 * S);
    reports(&kit, &[("a", 100), ("b", 100)]);
    kit.clock().advance(30 * S);
    let counts = kit.counts(300, None).unwrap();
    assert_eq!(
        (counts["a"], counts["c"]),
        (100, 100),
        "c unknown: the mean"
    );
    let (_, rule) = explained(&kit);
    assert!(rule.contains("c: unknown (expired"), "{rule}");
    // Its next report starts a new blackout.
    reports(&kit, &[("a", 100), ("b", 100), ("c", 400)]);
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    let (_, rule) = explained(&kit);
    assert!(rule.contains("c: unknown (blackout"), "{rule}");
    kit.clock().advance(10 * S);
    reports(&kit, &[("a", 100), ("b", 100)]);
    assert_eq!(kit.counts(600, None).unwrap()["c"], 400);
}

#[test]
fn an_unknown_member_weighs_the_mean_and_fewer_than_two_usable_is_round_robin() {
    let mut kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b"],
    );
    reports(&kit, &[("a", 100)]);
    kit.clock().advance(S);
    assert_eq!(
        counts(&kit, 200)["a"],
        100,
        "one usable weight: round robin"
    );
    reports(&kit, &[("b", 300)]);
    kit.join(["c"]);
    // c is new: the mean of 200 and 600.
    let (scores, rule) = explained(&kit);
    assert_eq!(scores[2], ("c".to_string(), 400.0));
    assert!(rule.contains("c: unknown (no report"), "{rule}");
    let counts = counts(&kit, 800);
    assert_eq!(counts["b"], 400);
    assert!(
        counts["a"].abs_diff(133) <= 1 && counts["c"].abs_diff(267) <= 1,
        "{counts:?}"
    );
}

#[test]
fn weights_in_use_are_clamped_around_the_mean() {
    let kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b", "c", "d", "e"],
    );
    // Mean of (1, 1000, 1000, 1000, 1000 000) ≈ 200,600: a is clamped up to 1 % of it.
    let qps = [
        ("a", 1),
        ("b", 1_000),
        ("c", 1_000),
        ("d", 1_000),
        ("e", 1_000_000),
    ];
    reports(&kit, &qps);
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    let (scores, _) = explained(&kit);
    let mean = (2.0 + 3.0 * 2_000.0 + 2_000_000.0) / 5.0;
    assert!((scores[0].1 - 0.01 * mean).abs() < 1e-6, "{scores:?}");
    assert!(
        (scores[4].1 - 2_000_000.0).abs() < 1e-6,
        "under 10 x the mean"
    );
    // Above 10 × the mean: clamped down.
    let kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"],
    );
    let mut qps: Vec<(&str, u32)> = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]
        .iter()
        .map(|n| (*n, 1))
        .collect();
    qps.push(("l", 1_000));
    reports(&kit, &qps);
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    let (scores, _) = explained(&kit);
    let mean = (11.0 * 2.0 + 2_000.0) / 12.0;
    assert!((scores[11].1 - 10.0 * mean).abs() < 1e-6, "{scores:?}");
}

#[test]
fn shares_over_many_picks_match_the_weights() {
    let kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b", "c", "d", "e"],
    );
    let qps = [("a", 37), ("b", 100), ("c", 1_234), ("d", 999), ("e", 5)];
    reports(&kit, &qps);
    kit.clock().advance(S);
    let n = 100_000;
    let counts = counts(&kit, n);
    let total: f64 = qps.iter().map(|(_, q)| f64::from(*q)).sum();
    for (node, q) in qps {
        let want = f64::from(q) / total;
        let got = counts[node] as f64 / n as f64;
        assert!((got / want - 1.0).abs() < 0.01, "{node}: {got} vs {want}");
    }
}

#[test]
fn the_stride_schedule_interleaves_and_takes_at_most_one_round_a_pick() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let sequence = AtomicU64::new(0);
    let weights = [MAX_SCALED / 4, MAX_SCALED / 4, MAX_SCALED / 2, MAX_SCALED];
    let mut picks = Vec::new();
    for _ in 0..8 {
        let before = sequence.load(Ordering::Relaxed);
        picks.push(next(&sequence, 4, |i| weights[i]));
        assert!(sequence.load(Ordering::Relaxed) - before <= 4);
    }
    assert_eq!(
        picks.iter().filter(|p| **p == 3).count(),
        8 / 2,
        "{picks:?}"
    );
    let seen: std::collections::BTreeSet<_> = picks.iter().collect();
    assert_eq!(seen.len(), 4, "{picks:?}");
    // Zero weights count as the lightest, never as "never".
    let sequence = AtomicU64::new(0);
    let picks: Vec<usize> = (0..70_000)
        .map(|_| next(&sequence, 2, |i| [0, MAX_SCALED][i]))
        .collect();
    assert!(picks.contains(&0));
}

#[test]
fn hostile_reports_give_finite_weights() {
    let kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b", "c"],
    );
    kit.set_report(
        "a",
        &report(u32::MAX, u32::MAX, Some(f64::NAN), Some(f64::INFINITY)),
        Duration::ZERO,
    );
    kit.set_report(
        "b",
        &report(u32::MAX, 0, Some(0.0), Some(1e-12)),
        Duration::ZERO,
    );
    kit.set_report("c", &report(1, 0, Some(100.0), None), Duration::ZERO);
    kit.clock().advance(S);
    let counts = counts(&kit, 10_000);
    assert_eq!(counts.values().sum::<usize>(), 10_000);
    let (scores, _) = explained(&kit);
    assert!(
        scores.iter().all(|(_, w)| w.is_finite() && *w > 0.0),
        "{scores:?}"
    );
}

#[test]
fn a_pick_over_an_unpublished_list_follows_the_weights_of_its_members() {
    let kit = kit_of(
        LoadWeighted::new().blackout_period(Duration::ZERO),
        &["a", "b", "c"],
    );
    reports(&kit, &[("a", 100), ("b", 200), ("c", 600)]);
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    let mut seen = BTreeMap::<String, usize>::new();
    for _ in 0..300 {
        let pick = kit.pick_excluding(&["c"], None).unwrap();
        *seen.entry(pick.node().to_string()).or_default() += 1;
        kit.complete(pick, Duration::ZERO, OutcomeKind::Ok);
    }
    assert_eq!((seen["a"], seen["b"]), (100, 200));
}

#[test]
fn options_are_checked_at_build() {
    let build = |a: LoadWeighted| a.build(&BuildContext::new("b")).map(drop);
    assert!(build(LoadWeighted::new()).is_ok());
    for (algorithm, name) in [
        (
            LoadWeighted::new().weight_expiration_period(Duration::ZERO),
            "weight_expiration_period",
        ),
        (
            LoadWeighted::new().weight_update_period(Duration::from_micros(10)),
            "weight_update_period",
        ),
        (
            LoadWeighted::new().error_utilization_penalty(-1.0),
            "error_utilization_penalty",
        ),
        (
            LoadWeighted::new().error_utilization_penalty(f64::NAN),
            "error_utilization_penalty",
        ),
    ] {
        match build(algorithm) {
            Err(Error::InvalidConfig { option, .. }) => assert_eq!(option, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    let needs = LoadWeighted::new().needs();
    assert!(!needs.in_flight && needs.cpu.is_none());
}

/// A member that leaves and rejoins (a restarted process) starts afresh: a new blackout, none
/// of its old weight (gRFC A58 resets it when an endpoint becomes ready again).
#[test]
fn a_rejoined_member_starts_a_new_blackout() {
    let mut kit = kit_of(LoadWeighted::new(), &["a", "b", "c"]);
    reports(&kit, &[("a", 100), ("b", 100), ("c", 400)]);
    kit.clock().advance(11 * S);
    assert_eq!(counts(&kit, 600)["c"], 400);
    kit.leave(["c"]);
    kit.join(["c"]);
    reports(&kit, &[("a", 100), ("b", 100), ("c", 400)]);
    kit.clock().advance(S);
    kit.pick_and_release(None).unwrap();
    let (_, rule) = explained(&kit);
    assert!(rule.contains("c: unknown (blackout"), "{rule}");
    assert_eq!(
        counts(&kit, 300)["c"],
        100,
        "the mean until its blackout ends"
    );
}

#[test]
fn with_slow_start_a_ramping_members_weight_is_multiplied_by_its_factor_between_recomputations() {
    // Weights recomputed from the reports once a minute only: the ramp does not wait for it.
    let lw = LoadWeighted::new()
        .blackout_period(Duration::ZERO)
        .weight_update_period(60 * S);
    let mut kit = slow_start_kit(Arc::new(lw), &["a", "b", "c"], 3);
    // Weights 600, 200 and 400 (qps at 50 % CPU).
    reports(&kit, &[("a", 300), ("b", 100), ("c", 200)]);
    // Past slow start's startup grace (2 s): d ramps.
    kit.clock().advance(3 * S);
    kit.join(["d"]);
    // d, unknown, weighs the mean (400) × its factor: 0.1 at the join, 0.25 at 25 s of its
    // 100 s window: 100 of 1,300. (Only at the join's recomputation, it would stay at 40.)
    kit.clock().advance(25 * S);
    let shares = counts(&kit, 13_000);
    assert!((950..=1_050).contains(&shares["d"]), "{shares:?}");
    assert!((5_900..=6_100).contains(&shares["a"]), "{shares:?}");
    let (scores, rule) = explained(&kit);
    assert_eq!(scores[3], ("d".to_string(), 100.0));
    assert!(
        rule.contains("d: unknown (no report with qps and utilization), × slow-start factor 0.25"),
        "{rule}"
    );
    // Half way: 400 × 0.5 = 200 of 1,400.
    kit.clock().advance(25 * S);
    let shares = counts(&kit, 14_000);
    assert!((1_900..=2_100).contains(&shares["d"]), "{shares:?}");
    // After the window: the mean, 400 of 1,600.
    kit.clock().advance(50 * S);
    let shares = counts(&kit, 16_000);
    assert!((3_900..=4_100).contains(&shares["d"]), "{shares:?}");
}
