//! The band rule and options of LeastCpu (reference §5.8, §11.20), on the test kit: readings
//! on the kit's manual clock.

use std::collections::BTreeSet;
use std::time::Duration;

use super::*;
use crate::testkit::SelectorKit;

/// A kit of `algorithm` whose members `nodes` have readings `cpu` (None = no reading) sampled
/// `age_ms` ago.
fn kit(algorithm: &LeastCpu, readings: &[(&str, Option<f64>, u64)]) -> SelectorKit {
    let mut kit = SelectorKit::new(algorithm).unwrap();
    for (node, cpu, age) in readings {
        if let Some(cpu) = cpu {
            kit.set_cpu(node, *cpu, Duration::from_millis(*age));
        }
    }
    kit.join(readings.iter().map(|(node, _, _)| *node));
    kit
}

/// The nodes picked over `n` selections.
fn picks(kit: &SelectorKit, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|_| kit.pick_and_release(None).unwrap())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_least_loaded_member_wins() {
    let lc = kit(
        &LeastCpu::seeded(1),
        &[
            ("a", Some(80.0), 0),
            ("b", Some(20.0), 0),
            ("c", Some(50.0), 0),
        ],
    );
    assert_eq!(picks(&lc, 50), set(&["b"]));
}

#[test]
fn the_band_is_inclusive_and_picked_at_random() {
    // The seed's example: 22, 25, 48 with threshold 5 → 22 or 25.
    let lc = kit(
        &LeastCpu::seeded(2),
        &[
            ("a", Some(22.0), 0),
            ("b", Some(25.0), 0),
            ("c", Some(48.0), 0),
        ],
    );
    assert_eq!(picks(&lc, 200), set(&["a", "b"]));
    // Threshold 2.0 with 22, 23.5, 25: a and b, never c.
    let lc = kit(
        &LeastCpu::seeded(3).cpu_threshold(2.0),
        &[
            ("a", Some(22.0), 0),
            ("b", Some(23.5), 0),
            ("c", Some(25.0), 0),
        ],
    );
    assert_eq!(picks(&lc, 200), set(&["a", "b"]));
    // Exactly at the band's edge counts (inclusive): 20 and 25 with threshold 5.
    let lc = kit(
        &LeastCpu::seeded(4),
        &[("a", Some(20.0), 0), ("b", Some(25.0), 0)],
    );
    assert_eq!(picks(&lc, 200), set(&["a", "b"]));
    // Threshold 0.5 with 20 and 22: only a.
    let lc = kit(
        &LeastCpu::seeded(5).cpu_threshold(0.5),
        &[("a", Some(20.0), 0), ("b", Some(22.0), 0)],
    );
    assert_eq!(picks(&lc, 100), set(&["a"]));
}

#[test]
fn a_missing_reading_counts_as_the_median_of_the_fresh_ones_a_stale_one_as_fifty_or_more() {
    // a = 60, c = 30, b missing → b counts as 30 (the lower median of 30 and 60): b or c.
    let lc = kit(
        &LeastCpu::seeded(6),
        &[("a", Some(60.0), 0), ("b", None, 0), ("c", Some(30.0), 0)],
    );
    assert_eq!(picks(&lc, 50), set(&["b", "c"]));
    // With the others at 60 and 70, the missing member counts as 60: a or b, never c.
    let lc = kit(
        &LeastCpu::seeded(6),
        &[("a", Some(60.0), 0), ("b", None, 0), ("c", Some(70.0), 0)],
    );
    assert_eq!(picks(&lc, 50), set(&["a", "b"]));
    // Stale a = 20 (older than the 1 s TTL at its source) vs fresh b = 30 → a counts as 50
    // (the original's rule for a reading that aged out), not 20 nor the median: b; the
    // readings are left unchanged (no refresh, no deletion).
    let lc = kit(
        &LeastCpu::seeded(7).cpu_cache_ttl(Duration::from_millis(1_000)),
        &[("a", Some(20.0), 5_000), ("b", Some(30.0), 0)],
    );
    assert_eq!(picks(&lc, 50), set(&["b"]));
    // A stale reading above 50 counts as itself: stale a = 90 vs fresh b = 60 → b.
    let hot = kit(
        &LeastCpu::seeded(7).cpu_cache_ttl(Duration::from_millis(1_000)),
        &[("a", Some(90.0), 5_000), ("b", Some(60.0), 0)],
    );
    assert_eq!(picks(&hot, 50), set(&["b"]));
    let now = lc.clock().clock().now_ms();
    let reading = |i: usize| lc.members()[i].cpu_reading(now).unwrap();
    assert_eq!((reading(0).cpu, reading(0).age_ms), (20.0, 5_000));
    assert_eq!((reading(1).cpu, reading(1).age_ms), (30.0, 0));
    // A reading ages out on the selector's clock: 1,000 ms is still fresh, 1,001 ms is not;
    // with no fresh reading at all, every member counts as 50.
    let lc = kit(
        &LeastCpu::seeded(7).cpu_cache_ttl(Duration::from_millis(1_000)),
        &[("a", Some(20.0), 0), ("b", Some(30.0), 0)],
    );
    lc.clock().advance(Duration::from_millis(1_000));
    assert_eq!(picks(&lc, 30), set(&["a"]), "both fresh at the TTL: a");
    lc.clock().advance(Duration::from_millis(1));
    assert_eq!(picks(&lc, 60), set(&["a", "b"]), "both stale: 50 and 50");
}

#[test]
fn one_member_is_picked_without_reading_and_other_lists_work() {
    let one = kit(&LeastCpu::new(), &[("a", None, 0)]);
    assert_eq!(one.pick_and_release(None).unwrap(), "a");
    // A list that is not the published one (a re-selection) reads the same readings.
    let lc = kit(
        &LeastCpu::seeded(8),
        &[
            ("a", Some(70.0), 0),
            ("b", Some(10.0), 0),
            ("c", Some(5.0), 0),
        ],
    );
    for _ in 0..20 {
        let pick = lc.pick_excluding(&["c"], None).unwrap();
        assert_eq!(pick.node(), "b");
        lc.release(pick);
    }
}

#[test]
fn membership_changes_leave_the_readings_alone() {
    let mut lc = kit(
        &LeastCpu::seeded(9),
        &[("a", Some(10.0), 0), ("b", Some(20.0), 0)],
    );
    // a leaves, x joins (no reading).
    lc.leave(["a"]);
    lc.join(["x"]);
    let now = lc.clock().clock().now_ms();
    assert_eq!(lc.members()[0].cpu_reading(now).map(|r| r.cpu), Some(20.0));
    assert_eq!(lc.members()[1].cpu_reading(now), None);
    // The new list reads b = 20 against x missing (the median of the fresh: 20).
    assert_eq!(picks(&lc, 30), set(&["b", "x"]));
    // a rejoins: its reading (10) was kept, and x counts as 10 (the lower median of 10, 20).
    lc.join(["a"]);
    assert_eq!(picks(&lc, 30), set(&["a", "x"]));
}

#[test]
fn readings_written_after_the_list_are_seen() {
    let mut lc = kit(
        &LeastCpu::seeded(10),
        &[("a", Some(10.0), 0), ("b", Some(90.0), 0)],
    );
    assert_eq!(picks(&lc, 20), set(&["a"]));
    lc.set_cpu("a", 99.0, Duration::ZERO);
    assert_eq!(picks(&lc, 20), set(&["b"]));
}

#[test]
fn the_explanation_gives_each_members_reading_age_and_value() {
    let lc = kit(
        &LeastCpu::seeded(11).cpu_cache_ttl(Duration::from_millis(1_000)),
        &[
            ("a", Some(30.0), 200),
            ("b", Some(20.0), 5_000),
            ("c", None, 0),
        ],
    );
    // Before any pick: a fresh a counts as its reading, stale b as 50 and missing c as the
    // median of the fresh readings (a's 30).
    lc.clock().advance(Duration::from_millis(7));
    let explanation = lc.explain(0, None).unwrap();
    assert_eq!(
        explanation.scores,
        [
            ("a".to_string(), 30.0),
            ("b".to_string(), NEUTRAL_CPU),
            ("c".to_string(), 30.0),
        ]
    );
    // The rule names the band, the TTL and the pick, and each member's reading with its age
    // as of the explanation (on the selector's clock).
    let rule = &explanation.rule;
    assert!(rule.starts_with("uniform random within 5 points"), "{rule}");
    assert!(
        rule.contains("never read = the median of the fresh readings, 50 without any; older than 1000 ms = 50 or its reading if higher"),
        "{rule}"
    );
    assert!(rule.contains("picked a"), "{rule}");
    assert!(rule.contains("0 picks since it changed"), "{rule}");
    assert!(rule.contains("a: 30 % 207 ms old"), "{rule}");
    assert!(rule.contains("b: 20 % 5007 ms old"), "{rule}");
    assert!(rule.contains("c: no reading"), "{rule}");
}

#[test]
fn invalid_options_fail_naming_the_option() {
    let option = |lc: LeastCpu, sample: Option<Duration>| match lc.validate(sample) {
        Err(Error::InvalidConfig { option, .. }) => option,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    assert_eq!(
        option(LeastCpu::new().poll_interval(Duration::ZERO), None),
        "poll_interval"
    );
    assert_eq!(
        option(LeastCpu::new().cpu_cache_ttl(Duration::ZERO), None),
        "cpu_cache_ttl"
    );
    assert_eq!(
        option(
            LeastCpu::new().cpu_cache_ttl(Duration::from_millis(1_000)),
            Some(Duration::from_millis(1_000))
        ),
        "cpu_cache_ttl",
        "a TTL not above the sample interval"
    );
    assert_eq!(
        option(LeastCpu::new().cpu_threshold(-1.0), None),
        "cpu_threshold"
    );
    assert_eq!(
        option(LeastCpu::new().cpu_threshold(f64::NAN), None),
        "cpu_threshold"
    );
    assert!(LeastCpu::new()
        .validate(Some(Duration::from_millis(1_000)))
        .is_ok());
    assert!(LeastCpu::new()
        .poll_startup_jitter(Duration::ZERO)
        .cpu_threshold(0.0)
        .validate(None)
        .is_ok());
    // Build checks them against the context's sampling interval.
    let context = crate::routing::BuildContext {
        cpu_sample_interval: Some(Duration::from_millis(20_000)),
        ..crate::routing::BuildContext::new("b")
    };
    assert!(matches!(
        LeastCpu::new().build(&context),
        Err(Error::InvalidConfig {
            option: "cpu_cache_ttl",
            ..
        })
    ));
}

/// LeastCpu's, the node's CPU sampling and the Poller's defaults are the original's.
#[test]
fn the_defaults_are_the_originals() {
    use crate::algorithm::LeastCpuOptions;
    use crate::NodeConfig;
    let ms = std::time::Duration::from_millis;
    assert_eq!(
        LeastCpuOptions::default(),
        LeastCpuOptions {
            poll_interval: ms(5_000),
            poll_startup_jitter: ms(60_000),
            cpu_cache_ttl: ms(10_000),
            cpu_threshold: 5.0,
        }
    );
    assert_eq!(LeastCpu::new().options(), &LeastCpuOptions::default());
    let node = NodeConfig::new("a", "127.0.0.1:0");
    assert_eq!(node.cpu_sample_interval, ms(1_000));
    assert_eq!(node.cpu_sampler.to_string(), "system");
    assert_eq!(crate::cpu::NEUTRAL_CPU, 50.0);
}

/// Picks `n` times, 1 ms apart on the kit's clock; the picks per node.
fn picks_over_time(kit: &SelectorKit, n: usize) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..n {
        *counts
            .entry(kit.pick_and_release(None).unwrap())
            .or_default() += 1;
        kit.clock().advance(Duration::from_millis(1));
    }
    counts
}

#[test]
fn a_member_picked_more_since_its_reading_counts_higher_until_the_next_one() {
    // Three members at 40 for a second: even picks.
    let mut lc = kit(
        &LeastCpu::seeded(12),
        &[
            ("a", Some(40.0), 0),
            ("b", Some(40.0), 0),
            ("c", Some(40.0), 0),
        ],
    );
    let first = picks_over_time(&lc, 1_000);
    assert!(first.values().all(|n| *n > 250), "{first:?}");
    // a now reads 20, the others 40.01 (new readings all). Without the projection every pick
    // would go to a until its next reading; with it, a's value rises with its picks (at 1.75
    // times the rate its 20 % was read at it counts as 35, inside the others' band), so a
    // takes more than its old third but the others keep getting picks.
    lc.set_cpu("a", 20.0, Duration::ZERO);
    lc.set_cpu("b", 40.01, Duration::ZERO);
    lc.set_cpu("c", 40.01, Duration::ZERO);
    let second = picks_over_time(&lc, 1_000);
    let a = second["a"];
    assert!((400..=700).contains(&a), "{second:?}");
    assert!(second["b"] > 50 && second["c"] > 50, "{second:?}");
    // The explanation says how many picks each member had since its reading changed.
    let rule = lc.explain(0, None).unwrap().rule;
    assert!(
        rule.contains(&format!("a: 20 % 1000 ms old, {a} picks since it changed")),
        "{rule}"
    );
}

#[test]
fn a_member_pinned_far_above_the_others_is_never_picked() {
    // Threshold 30: the band reaches 60 from the others' 30, and a projection may fall two
    // bands (60 points). a first reads 30 and gets its share for a second; then it reads
    // 100 % and never changes (another process burns its cores), while b and c keep reading
    // about 30 with new readings each second. Fewer picks of a cannot relieve a saturated
    // node: its value never falls below its reading, so it never comes back into the band.
    let mut lc = kit(
        &LeastCpu::seeded(13).cpu_threshold(30.0),
        &[
            ("a", Some(30.0), 0),
            ("b", Some(30.0), 0),
            ("c", Some(30.0), 0),
        ],
    );
    let first = picks_over_time(&lc, 1_000);
    assert!(first.get("a").is_some_and(|n| *n > 200), "{first:?}");
    for second in 0..10 {
        lc.set_cpu("a", 100.0, Duration::ZERO);
        lc.set_cpu("b", 30.0 + f64::from(second % 2), Duration::ZERO);
        lc.set_cpu("c", 30.5 - f64::from(second % 2), Duration::ZERO);
        let counts = picks_over_time(&lc, 1_000);
        assert_eq!(counts.get("a"), None, "second {second}: {counts:?}");
    }
}

#[test]
fn with_slow_start_and_readings_a_ramping_member_gets_about_its_factor_of_a_share() {
    use crate::algorithm::test_support::ramping_kit;
    // Four members whose CPU follows their calls: each second's reading is 160 × its share of
    // the last second's picks (an even share reads 40 %). d joined 25 s into a
    // 100 s window (factor 0.25 to 0.37 over the 12 s run): its value is divided by its
    // factor, so it settles where its reading ÷ factor meets the others' readings — about
    // its factor of their share, not starved and not a full fourth.
    let mut lc = ramping_kit(
        std::sync::Arc::new(LeastCpu::seeded(16)),
        &["a", "b", "c"],
        &["d"],
        Duration::from_secs(25),
    );
    let nodes = ["a", "b", "c", "d"];
    let mut shares = [0.25; 4];
    let mut d = 0;
    for second in 0..12 {
        for (node, share) in nodes.iter().zip(shares) {
            lc.set_cpu(node, 160.0 * share, Duration::ZERO);
        }
        let counts = picks_over_time(&lc, 1_000);
        for (share, node) in shares.iter_mut().zip(nodes) {
            *share = counts.get(node).copied().unwrap_or(0) as f64 / 1_000.0;
        }
        if second >= 4 {
            d += counts.get("d").copied().unwrap_or(0);
        }
    }
    let share = d as f64 / 8_000.0;
    assert!((0.04..=0.16).contains(&share), "d's share {share}");
}

#[test]
fn members_never_heard_from_share_the_picks_evenly() {
    // No reading anywhere: every member counts as 50, projected by its picks against an
    // even share, so each is picked about as often as the others (not uniform at random:
    // a member picked more than its share counts higher).
    let lc = kit(
        &LeastCpu::seeded(14),
        &[
            ("a", None, 0),
            ("b", None, 0),
            ("c", None, 0),
            ("d", None, 0),
        ],
    );
    let counts = picks_over_time(&lc, 400);
    assert!(
        counts.values().all(|n| (90..=110).contains(n)),
        "{counts:?}"
    );
    // A member over its even share counts higher than 50, one under it lower.
    let scores = lc.explain(0, None).unwrap().scores;
    let spread = scores.iter().map(|(_, v)| *v).fold(0.0f64, f64::max)
        - scores.iter().map(|(_, v)| *v).fold(f64::MAX, f64::min);
    assert!(spread < 5.0, "{scores:?}");
}

#[test]
fn with_slow_start_a_ramping_members_value_is_divided_by_its_factor() {
    use crate::algorithm::test_support::ramping_kit;
    // a, b, c from the start, d joined 25 s into a 100 s window (factor 0.25); no readings:
    // every member counts as 50, projected by its picks against an even share, d's counted
    // four times. d settles at about 0.25 / 3.25 ≈ 7.7 % of the picks (25 % without slow
    // start; about 2 % were slow start's skip applied on top).
    let ramping = ramping_kit(
        std::sync::Arc::new(LeastCpu::seeded(15)),
        &["a", "b", "c"],
        &["d"],
        Duration::from_secs(25),
    );
    let counts = picks_over_time(&ramping, 4_000);
    let d = counts.get("d").copied().unwrap_or(0) as f64 / 4_000.0;
    assert!((0.05..=0.11).contains(&d), "{counts:?}");
    // The explanation (slow start's, over LeastCpu's) names the factor for d alone (0.25–0.29
    // at 25–29 s of 100 s), applied by the algorithm.
    let rule = ramping.explain(0, None).unwrap().rule;
    assert_eq!(rule.matches(" ×0.").count(), 1, "{rule}");
    assert!(rule.contains("applied by the algorithm"), "{rule}");
    // Without slow start, d joining as late takes a fourth.
    let mut plain = kit(
        &LeastCpu::seeded(15),
        &[("a", None, 0), ("b", None, 0), ("c", None, 0)],
    );
    plain.join(["d"]);
    plain.clock().advance(Duration::from_secs(25));
    let counts = picks_over_time(&plain, 4_000);
    let d = counts.get("d").copied().unwrap_or(0) as f64 / 4_000.0;
    assert!((0.2..=0.3).contains(&d), "{counts:?}");
}
