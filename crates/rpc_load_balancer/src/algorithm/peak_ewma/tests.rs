//! PeakEwma's rules, on the test kit (manual clock, seeded samples).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::estimate::{weight, Estimate};
use super::*;
use crate::algorithm::test_support::{ramping_kit, S};
use crate::routing::OutcomeKind;
use crate::testkit::SelectorKit;
use crate::ErrorCode;

const MS: Duration = Duration::from_millis(1);
const US: Duration = Duration::from_micros(1);

/// A seeded kit of `algorithm` over `nodes`.
fn kit_of(algorithm: PeakEwma, nodes: &[&str]) -> SelectorKit {
    let mut kit = SelectorKit::seeded(&algorithm, 7).unwrap();
    kit.join(nodes);
    kit
}

/// Completes one call of `node` (picked alone) after `latency`, ending as `kind`.
fn answer(kit: &SelectorKit, node: &str, latency: Duration, kind: OutcomeKind) {
    let others: Vec<String> = kit.nodes().into_iter().filter(|n| n != node).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let pick = kit.pick_excluding(&others, None).unwrap();
    assert_eq!(pick.node(), node);
    kit.complete(pick, latency, kind);
}

/// How often each of `nodes` is picked in `n` picks (released at once).
fn share(kit: &SelectorKit, n: usize, node: &str) -> usize {
    kit.counts(n, None).unwrap().get(node).copied().unwrap_or(0)
}

/// `node`'s cost as the selector explains it.
fn cost(kit: &SelectorKit, node: &str) -> f64 {
    let explained = kit.explain(0, None).unwrap();
    explained
        .scores
        .iter()
        .find(|(n, _)| n == node)
        .map(|(_, c)| *c)
        .unwrap()
}

#[test]
fn one_slow_reply_moves_calls_away_at_once() {
    let kit = kit_of(PeakEwma::new(), &["a", "b", "c"]);
    for node in ["a", "b", "c"] {
        answer(&kit, node, 100 * US, OutcomeKind::Ok);
    }
    answer(&kit, "a", 20 * MS, OutcomeKind::Ok);
    // a is picked only when both samples... never: two distinct are always sampled.
    assert_eq!(share(&kit, 1_000, "a"), 0);
    // One fast reply after it barely moves the estimate (the clock has not moved).
    answer(&kit, "a", 100 * US, OutcomeKind::Ok);
    assert_eq!(share(&kit, 1_000, "a"), 0);
}

#[test]
fn faster_replies_bring_the_estimate_down_over_the_decay() {
    let kit = kit_of(PeakEwma::new().decay(Duration::from_secs(1)), &["a", "b"]);
    answer(&kit, "a", 10 * MS, OutcomeKind::Ok);
    answer(&kit, "b", 200 * US, OutcomeKind::Ok);
    let before = cost(&kit, "a");
    assert!((before - 10e6).abs() < 1.0, "{before}");
    // 1 s later one fast reply: the old estimate keeps 1/e of its weight.
    kit.clock().advance(Duration::from_secs(1));
    answer(&kit, "a", 100 * US, OutcomeKind::Ok);
    answer(&kit, "b", 200 * US, OutcomeKind::Ok);
    let after = cost(&kit, "a");
    let expected = 10e6 / std::f64::consts::E + 100e3 * (1.0 - 1.0 / std::f64::consts::E);
    assert!((after - expected).abs() < 1e3, "{after} vs {expected}");
    // Fast replies every 100 ms for 5 s: a ends below b, and takes the calls.
    for _ in 0..50 {
        kit.clock().advance(100 * MS);
        answer(&kit, "a", 100 * US, OutcomeKind::Ok);
        answer(&kit, "b", 200 * US, OutcomeKind::Ok);
    }
    assert_eq!(share(&kit, 100, "a"), 100);
}

#[test]
fn an_idle_estimate_decays_so_a_member_left_alone_is_tried_again() {
    let kit = kit_of(PeakEwma::new(), &["a", "b"]);
    answer(&kit, "a", 50 * MS, OutcomeKind::Ok);
    answer(&kit, "b", 1 * MS, OutcomeKind::Ok);
    assert_eq!(share(&kit, 100, "a"), 0);
    // b keeps answering in 1 ms; a is not called. ln(50) × 10 s ≈ 39 s later a reads cheaper.
    for _ in 0..45 {
        kit.clock().advance(Duration::from_secs(1));
        answer(&kit, "b", 1 * MS, OutcomeKind::Ok);
    }
    assert_eq!(share(&kit, 100, "a"), 100);
}

#[test]
fn a_failure_weighs_as_the_timeout_so_a_fast_failing_member_draws_nothing() {
    let mut kit = kit_of(PeakEwma::new(), &["a", "b", "c"]);
    kit.set_call_timeout(Some(Duration::from_secs(2)));
    for node in ["a", "b", "c"] {
        answer(&kit, node, 300 * US, OutcomeKind::Ok);
    }
    let unavailable = OutcomeKind::Error(ErrorCode::ServiceUnavailable);
    answer(&kit, "a", 10 * US, unavailable);
    assert!((cost(&kit, "a") - 2e9).abs() < 1.0, "{}", cost(&kit, "a"));
    assert_eq!(share(&kit, 1_000, "a"), 0);
    // A timeout too; a set penalty wins over the timeout.
    let mut kit = kit_of(PeakEwma::new().failure_penalty(50 * MS), &["a", "b"]);
    kit.set_call_timeout(Some(Duration::from_secs(2)));
    answer(&kit, "a", 10 * MS, OutcomeKind::Timeout);
    assert!((cost(&kit, "a") - 50e6).abs() < 1.0, "{}", cost(&kit, "a"));
    // Without a timeout or a penalty, a failure counts as its latency.
    let kit = kit_of(PeakEwma::new(), &["a", "b"]);
    answer(&kit, "a", 10 * US, unavailable);
    assert!((cost(&kit, "a") - 10e3).abs() < 1.0);
}

#[test]
fn a_bad_request_counts_as_a_reply_and_a_cancelled_pick_teaches_nothing() {
    let mut kit = kit_of(PeakEwma::new(), &["a", "b"]);
    kit.set_call_timeout(Some(Duration::from_secs(2)));
    answer(
        &kit,
        "a",
        300 * US,
        OutcomeKind::Error(ErrorCode::BadRequest),
    );
    assert!((cost(&kit, "a") - 300e3).abs() < 1.0);
    answer(&kit, "b", 5 * MS, OutcomeKind::Cancelled);
    let pick = kit.pick_excluding(&["a"], None).unwrap();
    kit.clock().advance(3 * MS);
    kit.release(pick);
    // b has no history: it costs the median of the estimates there are (a's).
    assert!((cost(&kit, "b") - 300e3).abs() < 1.0, "{}", cost(&kit, "b"));
}

#[test]
fn a_member_with_no_history_costs_the_median_of_the_others() {
    let mut kit = kit_of(PeakEwma::new(), &["a", "b", "c"]);
    for (node, latency) in [("a", 100), ("b", 200), ("c", 900)] {
        answer(&kit, node, latency * US, OutcomeKind::Ok);
    }
    kit.join(["d"]);
    assert!((cost(&kit, "d") - 200e3).abs() < 1.0, "{}", cost(&kit, "d"));
    // It takes calls beside the median member, not all of them and not none.
    let d = share(&kit, 3_000, "d");
    assert!((700..1_800).contains(&d), "d picked {d} of 3000");
    // A member that left and came back starts again with no history.
    answer(&kit, "c", 900 * US, OutcomeKind::Ok);
    kit.leave(["c"]);
    kit.join(["c"]);
    assert!(cost(&kit, "c") < 900e3);
}

#[test]
fn with_no_estimates_fewer_in_flight_wins() {
    let kit = kit_of(PeakEwma::new(), &["a", "b"]);
    kit.set_in_flight("a", 3);
    assert_eq!(share(&kit, 200, "b"), 200);
    // With equal estimates, in flight multiplies the cost.
    answer(&kit, "a", 100 * US, OutcomeKind::Ok);
    answer(&kit, "b", 100 * US, OutcomeKind::Ok);
    kit.set_in_flight("a", 0);
    kit.set_in_flight("b", 2);
    assert!((cost(&kit, "b") - 300e3).abs() < 1.0);
    assert_eq!(share(&kit, 200, "a"), 200);
}

#[test]
fn a_reselection_reads_the_estimates_by_node() {
    let kit = kit_of(PeakEwma::new(), &["a", "b", "c"]);
    for (node, latency) in [("a", 100), ("b", 5_000), ("c", 300)] {
        answer(&kit, node, latency * US, OutcomeKind::Ok);
    }
    for _ in 0..50 {
        let pick = kit.pick_excluding(&["a"], None).unwrap();
        assert_eq!(pick.node(), "c");
        kit.release(pick);
    }
}

#[test]
fn zero_options_are_refused_by_name() {
    for (algorithm, option) in [
        (PeakEwma::new().decay(Duration::ZERO), "decay"),
        (
            PeakEwma::new().failure_penalty(Duration::ZERO),
            "failure_penalty",
        ),
    ] {
        match SelectorKit::new(&algorithm) {
            Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option),
            other => panic!("{option}: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn the_estimate_peaks_then_averages_over_time() {
    let decay = 1e9;
    let estimate = Estimate::default();
    assert_eq!(estimate.load(0, decay), None);
    assert!(estimate.observe(1_000.0, 1_000, decay), "the first sample");
    assert_eq!(estimate.load(1_000, decay), Some(1_000.0));
    assert!(!estimate.observe(5_000.0, 1_000, decay));
    assert_eq!(
        estimate.load(1_000, decay),
        Some(5_000.0),
        "a peak replaces it"
    );
    // Read 1 s later: decayed to 1/e.
    let later = estimate.load(1_000_001_000, decay).unwrap();
    assert!(
        (later - 5_000.0 / std::f64::consts::E).abs() < 1e-6,
        "{later}"
    );
    // The cheap weight agrees with exp where it is used.
    for elapsed in [0, 1, 999_999, 1_000_000, 1_000_001, 5_000_000_000] {
        let exact = (-(elapsed as f64) / decay).exp();
        assert!((weight(elapsed, decay) - exact).abs() < 1e-6, "{elapsed}");
    }
}

#[test]
fn a_pick_between_two_slow_members_looks_again() {
    // Two of four members are 10x slower: plain two choices must take one of them whenever
    // both are sampled (1 pick in 6); the second look takes a fast one unless it draws
    // slow ones again.
    let kit = kit_of(PeakEwma::new(), &["a", "b", "c", "d"]);
    for (node, latency) in [("a", 1_000), ("b", 1_000), ("c", 100), ("d", 100)] {
        answer(&kit, node, latency * US, OutcomeKind::Ok);
    }
    let counts = kit.counts(6_000, None).unwrap();
    let slow = counts.get("a").copied().unwrap_or(0) + counts.get("b").copied().unwrap_or(0);
    // Expected 6,000 / 6 × (1/2)² = 250; plain two choices: 1,000.
    assert!(
        (150..400).contains(&slow),
        "slow members picked {slow} of 6000"
    );
    // Where the better sample is not poor, nothing more is drawn: two members with equal
    // estimates split the picks evenly.
    let even = kit_of(PeakEwma::new(), &["a", "b", "c"]);
    for node in ["a", "b", "c"] {
        answer(&even, node, 100 * US, OutcomeKind::Ok);
    }
    let a = share(&even, 3_000, "a");
    assert!((850..1_150).contains(&a), "a picked {a} of 3000");
}

#[test]
fn a_member_silent_with_calls_in_flight_costs_at_least_its_silence() {
    let kit = kit_of(PeakEwma::new(), &["a", "b"]);
    answer(&kit, "a", MS, OutcomeKind::Ok);
    answer(&kit, "b", MS, OutcomeKind::Ok);
    // One call goes to each; 20 ms later b has answered, a has not (paused).
    let held_a = kit.pick_excluding(&["b"], None).unwrap();
    let held_b = kit.pick_excluding(&["a"], None).unwrap();
    kit.clock().advance(20 * MS);
    kit.complete(held_b, 20 * MS, OutcomeKind::Ok);
    // a: max(1 ms, 20 ms silent) x (1 + 1); b: its estimate (now 20 ms, a peak) x 1.
    assert!((cost(&kit, "a") - 40e6).abs() < 1.0, "{}", cost(&kit, "a"));
    assert!((cost(&kit, "b") - 20e6).abs() < 1.0, "{}", cost(&kit, "b"));
    assert_eq!(share(&kit, 100, "a"), 0);
    // The silence counts from its last reply or from when it became busy, whichever is later:
    // an idle member picked now is not silent.
    kit.complete(held_a, 20 * MS, OutcomeKind::Ok);
    kit.clock().advance(Duration::from_secs(5));
    let again = kit.pick_excluding(&["b"], None).unwrap();
    let estimate = cost(&kit, "a") / 2.0;
    assert!(estimate < 20e6, "not silent: {estimate}");
    kit.release(again);
}

#[test]
fn a_silence_counts_once_per_call_in_flight_up_to_three() {
    let kit = kit_of(PeakEwma::new(), &["a", "b"]);
    answer(&kit, "a", 20 * MS, OutcomeKind::Ok);
    answer(&kit, "b", 20 * MS, OutcomeKind::Ok);
    // Three calls go to a and stay unanswered for 10 ms: one of them should have come back
    // within about 20 ms ÷ 3, so the silence counts 3 × 10 ms = 30 ms, above the estimate.
    let held: Vec<_> = (0..3)
        .map(|_| kit.pick_excluding(&["b"], None).unwrap())
        .collect();
    kit.clock().advance(10 * MS);
    // max(20 ms, 3 × 10 ms) x (3 + 1); the silence counted once would leave 20 ms x 4.
    assert!((cost(&kit, "a") - 120e6).abs() < 1.0, "{}", cost(&kit, "a"));
    for pick in held {
        kit.release(pick);
    }
}

#[test]
fn a_silence_counts_at_most_three_times() {
    let kit = kit_of(PeakEwma::new(), &["a", "b"]);
    answer(&kit, "a", 25 * MS, OutcomeKind::Ok);
    answer(&kit, "b", 25 * MS, OutcomeKind::Ok);
    // Five calls out, silent 10 ms: max(25 ms, min(5, 3) × 10 ms) x (5 + 1). Counted five
    // times the silence would be 50 ms (a member merely busy is not taken for paused).
    let held: Vec<_> = (0..5)
        .map(|_| kit.pick_excluding(&["b"], None).unwrap())
        .collect();
    kit.clock().advance(10 * MS);
    assert!((cost(&kit, "a") - 180e6).abs() < 1.0, "{}", cost(&kit, "a"));
    for pick in held {
        kit.release(pick);
    }
}

#[test]
fn with_slow_start_a_ramping_members_cost_is_divided_by_its_factor() {
    // d joined 25 s into a 100 s window: factor 0.25.
    let kit = ramping_kit(Arc::new(PeakEwma::new()), &["a", "b", "c"], &["d"], 25 * S);
    // Every member answers in 1 ms: equal estimates.
    for node in ["a", "b", "c", "d"] {
        answer(&kit, node, MS, OutcomeKind::Ok);
    }
    assert_eq!(cost(&kit, "d"), 4.0 * cost(&kit, "a"), "1 ms ÷ 0.25");
    // Idle, d costs four times any other: it loses every comparison.
    assert_eq!(share(&kit, 2_000, "d"), 0);
    // Idle against busy others, d (1 ms ÷ 0.25) beats them (1 ms × 11) wherever it is
    // sampled: in half the pairs, and in 7 of 16 second looks of the others (the better of
    // those costs over twice the median): 0.72 of the picks, none of them skipped. (The skip
    // on top would keep about a third.)
    for node in ["a", "b", "c"] {
        kit.set_in_flight(node, 10);
    }
    let d = share(&kit, 10_000, "d");
    assert!((6_900..=7_500).contains(&d), "{d}");
    for node in ["a", "b", "c"] {
        kit.set_in_flight(node, 0);
    }
    // 400 calls held, the oldest answered in 1 ms as each new one is picked: costs settle
    // where d's (in flight + 1) ÷ 0.25 is the others' (in flight + 1), so d holds — and gets
    // — about a quarter of an even member's calls (0.24 here; the skip on top would give
    // about 0.06).
    let mut held = VecDeque::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for step in 0..40_000 {
        let pick = kit.pick(None).unwrap();
        if step >= 4_000 {
            *counts.entry(pick.node().to_string()).or_default() += 1;
        }
        held.push_back(pick);
        if held.len() > 400 {
            kit.complete(held.pop_front().unwrap(), MS, OutcomeKind::Ok);
        }
    }
    let even = (counts["a"] + counts["b"] + counts["c"]) as f64 / 3.0;
    let ratio = counts["d"] as f64 / even;
    assert!((0.2..=0.3).contains(&ratio), "{ratio}: {counts:?}");
    let explained = kit.explain(3, None).unwrap();
    assert!(
        explained.rule.contains("÷ slow-start factor") && explained.rule.ends_with("d ×0.25"),
        "{}",
        explained.rule
    );
    for pick in held {
        kit.complete(pick, MS, OutcomeKind::Ok);
    }
    // After the window, d costs what the others do.
    kit.clock().advance(75 * S);
    kit.pick_and_release(None).unwrap();
    assert_eq!(cost(&kit, "d"), cost(&kit, "a"));
}
