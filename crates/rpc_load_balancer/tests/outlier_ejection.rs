//! Outlier ejection's rules, on the test kit (manual clock, seeded algorithms).

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::routing::{OutcomeKind, OutlierEjection};
use rpc_load_balancer::testkit::{Picked, SelectorKit};
use rpc_load_balancer::{Error, ErrorCode, RoundRobin};

const MS: Duration = Duration::from_millis(1);
const FAILED: OutcomeKind = OutcomeKind::Error(ErrorCode::ServiceUnavailable);

/// A seeded kit of RoundRobin with `options` over `nodes`.
fn kit_of(options: OutlierEjection, nodes: &[&str]) -> SelectorKit {
    let algorithm = options.wrap(Arc::new(RoundRobin::new()));
    let mut kit = SelectorKit::seeded(&*algorithm, 7).unwrap();
    kit.join(nodes);
    kit
}

/// A pick of `node` alone (as a re-selection that excludes every other member).
fn pick_of(kit: &SelectorKit, node: &str) -> Picked {
    let others: Vec<String> = kit.nodes().into_iter().filter(|n| n != node).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let pick = kit.pick_excluding(&others, None).unwrap();
    assert_eq!(pick.node(), node);
    pick
}

/// Completes `times` calls of `node`, each ending as `kind` after 1 ms.
fn answer(kit: &SelectorKit, node: &str, times: usize, kind: OutcomeKind) {
    for _ in 0..times {
        let pick = pick_of(kit, node);
        kit.complete(pick, MS, kind);
    }
}

/// How often `node` is picked in `n` picks (released at once).
fn share(kit: &SelectorKit, n: usize, node: &str) -> usize {
    kit.counts(n, None).unwrap().get(node).copied().unwrap_or(0)
}

#[test]
fn consecutive_failures_eject_a_member_for_the_base_time() {
    let kit = kit_of(
        OutlierEjection::new().max_ejected_percent(50),
        &["a", "b", "c", "d"],
    );
    answer(&kit, "b", 4, FAILED);
    assert_eq!(
        share(&kit, 400, "b"),
        100,
        "4 failures in a row: still picked"
    );
    answer(&kit, "b", 1, FAILED);
    assert_eq!(share(&kit, 400, "b"), 0, "the 5th ejects it");
    assert_eq!(
        share(&kit, 300, "a"),
        100,
        "the others take its turns evenly"
    );
    kit.clock().advance(Duration::from_secs(29));
    assert_eq!(share(&kit, 400, "b"), 0, "still ejected at 29 s");
    kit.clock().advance(Duration::from_secs(1));
    assert_eq!(share(&kit, 400, "b"), 100, "back after 30 s");
}

#[test]
fn a_success_or_a_bad_request_ends_a_run_of_failures_and_cancelled_counts_nothing() {
    let kit = kit_of(OutlierEjection::new().max_ejected_percent(50), &["a", "b"]);
    answer(&kit, "b", 4, OutcomeKind::Timeout);
    answer(&kit, "b", 1, OutcomeKind::Error(ErrorCode::BadRequest));
    answer(&kit, "b", 4, FAILED);
    for _ in 0..10 {
        let pick = pick_of(&kit, "b");
        kit.release(pick);
    }
    assert_eq!(share(&kit, 100, "b"), 50, "never 5 failures in a row");
    answer(&kit, "b", 1, OutcomeKind::Error(ErrorCode::InternalError));
    assert_eq!(share(&kit, 100, "b"), 0, "the 5th in a row");
}

#[test]
fn each_ejection_lasts_longer_up_to_the_maximum() {
    let options = OutlierEjection::new()
        .max_ejected_percent(50)
        .base_ejection_time(Duration::from_secs(10))
        .max_ejection_time(Duration::from_secs(25))
        // (No interval ends between: none of the ejections decays.)
        .interval(Duration::from_secs(1_000));
    let kit = kit_of(options, &["a", "b"]);
    // Lengths: 10 s, 20 s, then 25 s (capped).
    for length in [10, 20, 25] {
        answer(&kit, "b", 5, FAILED);
        assert_eq!(share(&kit, 10, "b"), 0);
        kit.clock().advance(Duration::from_secs(length) - MS);
        assert_eq!(share(&kit, 10, "b"), 0, "ejected for {length} s");
        kit.clock().advance(MS);
        assert_eq!(share(&kit, 10, "b"), 5, "back after {length} s");
    }
}

#[test]
fn at_most_the_set_share_of_members_is_ejected_at_once() {
    // 10 % of 4 members rounds down to 0: one member may still be ejected.
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    answer(&kit, "b", 5, FAILED);
    answer(&kit, "c", 5, FAILED);
    let counts = kit.counts(300, None).unwrap();
    assert_eq!(counts.get("b"), None, "{counts:?}");
    assert_eq!(counts.get("c"), Some(&100), "over the cap: kept {counts:?}");
}

#[test]
fn a_success_rate_far_below_the_others_ejects_at_the_end_of_the_interval() {
    let nodes = ["a", "b", "c", "d", "e", "f"];
    let options = OutlierEjection::new()
        .consecutive_failures(0)
        .max_ejected_percent(50);
    let kit = kit_of(options, &nodes);
    // Starts the interval.
    answer(&kit, "a", 1, OutcomeKind::Ok);
    for node in nodes {
        for i in 0..120 {
            // e fails every other call: 50 %, never 5 in a row.
            let kind = if node == "e" && i % 2 == 0 {
                FAILED
            } else {
                OutcomeKind::Ok
            };
            answer(&kit, node, 1, kind);
        }
    }
    assert_eq!(share(&kit, 600, "e"), 100, "not before the interval ends");
    kit.clock().advance(Duration::from_secs(10));
    answer(&kit, "a", 1, OutcomeKind::Ok);
    assert_eq!(share(&kit, 600, "e"), 0, "ejected once the interval ended");
}

#[test]
fn too_few_busy_members_run_no_success_rate_detector() {
    let nodes = ["a", "b", "c", "d"];
    let kit = kit_of(
        OutlierEjection::new()
            .consecutive_failures(0)
            .max_ejected_percent(50),
        &nodes,
    );
    answer(&kit, "a", 1, OutcomeKind::Ok);
    for node in nodes {
        for i in 0..120 {
            let kind = if node == "d" && i % 2 == 0 {
                FAILED
            } else {
                OutcomeKind::Ok
            };
            answer(&kit, node, 1, kind);
        }
    }
    kit.clock().advance(Duration::from_secs(10));
    answer(&kit, "a", 1, OutcomeKind::Ok);
    assert_eq!(share(&kit, 400, "d"), 100, "4 members < 5: no verdict");
}

/// Holds two calls of `node`, then lets `silence` pass with the other members replying.
fn go_silent(kit: &SelectorKit, node: &str, silence: Duration) -> Vec<Picked> {
    let held = vec![pick_of(kit, node), pick_of(kit, node)];
    // A reply elsewhere, past the 10 ms between looks over the members: the look sees `node`
    // busy from now.
    kit.clock().advance(10 * MS);
    answer(kit, "a", 1, OutcomeKind::Ok);
    kit.clock().advance(silence);
    answer(kit, "a", 1, OutcomeKind::Ok);
    held
}

#[test]
fn a_silent_member_with_calls_in_flight_is_suspected_until_it_replies() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    let mut held = go_silent(&kit, "b", 40 * MS);
    assert_eq!(
        share(&kit, 400, "b"),
        100,
        "40 ms of silence: under the 50 ms floor"
    );
    kit.clock().advance(10 * MS);
    answer(&kit, "a", 1, OutcomeKind::Ok);
    assert_eq!(share(&kit, 400, "b"), 0, "50 ms: suspected");
    // One of its calls ends: it replied.
    kit.complete(held.pop().unwrap(), 60 * MS, OutcomeKind::Ok);
    assert_eq!(share(&kit, 400, "b"), 100, "picked again after a reply");
}

#[test]
fn a_suspect_takes_no_call_while_one_is_out_and_is_ejected_when_one_times_out() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    let mut held = go_silent(&kit, "b", 60 * MS);
    // One of its calls ends with an error reply: it replied, so it is picked again.
    kit.complete(held.pop().unwrap(), 60 * MS, FAILED);
    assert_eq!(share(&kit, 400, "b"), 100, "a reply clears the suspicion");
    let mut held = go_silent(&kit, "c", 60 * MS);
    assert_eq!(share(&kit, 400, "c"), 0, "suspected");
    // One call times out: one still out, so still no call.
    kit.complete(
        held.pop().unwrap(),
        Duration::from_secs(1),
        OutcomeKind::Timeout,
    );
    assert_eq!(share(&kit, 400, "c"), 0, "silent past the timeout: ejected");
    kit.complete(
        held.pop().unwrap(),
        Duration::from_secs(1),
        OutcomeKind::Timeout,
    );
    assert_eq!(share(&kit, 400, "c"), 0, "ejected, nothing in flight");
    kit.clock().advance(Duration::from_secs(30));
    assert_eq!(
        share(&kit, 400, "c"),
        100,
        "back after the base ejection time"
    );
}

#[test]
fn a_suspect_at_the_ejection_cap_takes_one_probe_at_a_time() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    answer(&kit, "d", 5, FAILED);
    assert_eq!(
        share(&kit, 400, "d"),
        0,
        "d takes the one ejection of 4 members"
    );
    let mut held = go_silent(&kit, "b", 60 * MS);
    assert_eq!(share(&kit, 300, "b"), 0, "suspected");
    kit.complete(
        held.pop().unwrap(),
        Duration::from_secs(1),
        OutcomeKind::Timeout,
    );
    kit.complete(
        held.pop().unwrap(),
        Duration::from_secs(1),
        OutcomeKind::Timeout,
    );
    // Nothing in flight and not ejected (the cap): one probe, then nothing while it is out.
    let picks: Vec<Picked> = (0..30).map(|_| kit.pick(None).unwrap()).collect();
    let probes = picks.iter().filter(|p| p.node() == "b").count();
    assert_eq!(probes, 1, "one probe");
    assert_eq!(kit.in_flight("b"), Some(1));
}

#[test]
fn a_member_holding_every_call_is_suspected_and_ejected_when_they_time_out() {
    // A caller with few calls at once: all of them stuck on b, so no outcome comes to run a
    // look over the members until they time out, and by then a's reply is a second old.
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    answer(&kit, "b", 1, OutcomeKind::Ok);
    let mut held: Vec<Picked> = (0..3).map(|_| pick_of(&kit, "b")).collect();
    kit.clock().advance(MS);
    answer(&kit, "a", 1, OutcomeKind::Ok);
    kit.clock().advance(Duration::from_secs(1));
    // The first timeout: b has not replied since that call was sent, a has: b is silent
    // past the limit, and a call of it timed out: ejected (3 failures would not eject it).
    // (Each call's latency: from its pick, 1.001 s ago.)
    let waited = Duration::from_millis(1_001);
    kit.complete(held.pop().unwrap(), waited, OutcomeKind::Timeout);
    for pick in held {
        kit.complete(pick, waited, OutcomeKind::Timeout);
    }
    assert_eq!(share(&kit, 400, "b"), 0, "ejected");
}

#[test]
fn a_timeout_at_a_member_that_replied_since_is_no_silence() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    let mut held: Vec<Picked> = (0..3).map(|_| pick_of(&kit, "b")).collect();
    kit.clock().advance(MS);
    answer(&kit, "a", 1, OutcomeKind::Ok);
    kit.clock().advance(Duration::from_secs(1));
    // b answers another call just before the held ones time out: not silent.
    answer(&kit, "b", 1, OutcomeKind::Ok);
    for pick in held.drain(..2) {
        kit.complete(pick, Duration::from_millis(1_001), OutcomeKind::Timeout);
    }
    assert_eq!(
        share(&kit, 400, "b"),
        100,
        "2 failures in a row, no silence"
    );
    drop(held);
}

#[test]
fn a_stall_of_every_member_after_one_reply_suspects_nobody_at_the_timeouts() {
    // This caller's network stalls 1 ms after a's one reply: every other call times out.
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    for node in ["a", "b", "c", "d"] {
        answer(&kit, node, 3, OutcomeKind::Ok);
    }
    kit.clock().advance(20 * MS);
    let mut held: Vec<Picked> = Vec::new();
    for node in ["a", "b", "c", "d"] {
        held.push(pick_of(&kit, node));
        held.push(pick_of(&kit, node));
    }
    kit.clock().advance(MS);
    kit.complete(held.remove(0), MS, OutcomeKind::Ok);
    kit.clock().advance(Duration::from_secs(1));
    for pick in held {
        kit.complete(pick, Duration::from_millis(1_001), OutcomeKind::Timeout);
    }
    let counts = kit.counts(400, None).unwrap();
    for node in ["a", "b", "c", "d"] {
        assert_eq!(counts.get(node).copied(), Some(100), "{node}: {counts:?}");
    }
}

#[test]
fn a_member_that_replied_after_the_timed_out_call_was_sent_is_not_silent() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    for node in ["a", "b", "c", "d"] {
        answer(&kit, node, 3, OutcomeKind::Ok);
    }
    let slow = pick_of(&kit, "b");
    kit.clock().advance(100 * MS);
    answer(&kit, "b", 1, OutcomeKind::Ok);
    kit.clock().advance(100 * MS);
    answer(&kit, "a", 1, OutcomeKind::Ok);
    kit.clock().advance(799 * MS);
    let fresh = pick_of(&kit, "b");
    kit.clock().advance(MS);
    // One slow call times out; b answered since it was sent: one failure, no ejection.
    kit.complete(slow, Duration::from_secs(1), OutcomeKind::Timeout);
    assert_eq!(share(&kit, 400, "b"), 100);
    kit.release(fresh);
}

#[test]
fn nobody_is_suspected_while_no_member_replies() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    let _held = go_silent(&kit, "b", 10 * MS);
    // Everyone silent from here: no reply to compare with.
    kit.clock().advance(Duration::from_secs(1));
    let pick = pick_of(&kit, "c");
    kit.complete(pick, Duration::from_secs(1), OutcomeKind::Timeout);
    assert_eq!(share(&kit, 400, "b"), 100);
}

#[test]
fn the_silence_that_suspects_grows_with_the_members_p99() {
    let kit = kit_of(OutlierEjection::new(), &["a", "b", "c", "d"]);
    // b's replies take 20 ms: p99 bucket [16, 32) ms, so 320 ms of silence.
    for _ in 0..50 {
        let pick = pick_of(&kit, "b");
        kit.complete(pick, 20 * MS, OutcomeKind::Ok);
    }
    let _held = go_silent(&kit, "b", 200 * MS);
    assert_eq!(share(&kit, 400, "b"), 100, "200 ms < 10 × p99");
    kit.clock().advance(130 * MS);
    answer(&kit, "a", 1, OutcomeKind::Ok);
    assert_eq!(share(&kit, 400, "b"), 0, "330 ms ≥ 10 × p99");
}

#[test]
fn with_suspicion_off_a_silent_member_keeps_its_turns() {
    let kit = kit_of(
        OutlierEjection::new().suspicion(false),
        &["a", "b", "c", "d"],
    );
    let _held = go_silent(&kit, "b", Duration::from_secs(1));
    assert_eq!(share(&kit, 400, "b"), 100);
}

#[test]
fn when_every_member_is_out_the_algorithms_pick_stands() {
    let kit = kit_of(OutlierEjection::new().max_ejected_percent(100), &["a", "b"]);
    answer(&kit, "a", 5, FAILED);
    answer(&kit, "b", 5, FAILED);
    assert_eq!(share(&kit, 100, "a"), 50, "fail open");
}

#[test]
fn a_member_that_rejoins_starts_with_a_clean_record() {
    let mut kit = kit_of(OutlierEjection::new(), &["a", "b", "c"]);
    answer(&kit, "b", 5, FAILED);
    assert_eq!(share(&kit, 300, "b"), 0);
    kit.leave(["b"]);
    kit.join(["b"]);
    assert_eq!(share(&kit, 300, "b"), 100);
}

#[test]
fn options_are_checked_by_name() {
    let cases = [
        ("interval", OutlierEjection::new().interval(Duration::ZERO)),
        (
            "base_ejection_time",
            OutlierEjection::new().base_ejection_time(Duration::ZERO),
        ),
        (
            "max_ejection_time",
            OutlierEjection::new().max_ejection_time(Duration::from_secs(1)),
        ),
        (
            "max_ejected_percent",
            OutlierEjection::new().max_ejected_percent(0),
        ),
        (
            "max_ejected_percent",
            OutlierEjection::new().max_ejected_percent(101),
        ),
        (
            "success_rate_min_calls",
            OutlierEjection::new().success_rate_min_calls(0),
        ),
        (
            "success_rate_stdev_factor",
            OutlierEjection::new().success_rate_stdev_factor(f64::NAN),
        ),
        (
            "success_rate_stdev_factor",
            OutlierEjection::new().success_rate_stdev_factor(-1.0),
        ),
        (
            "suspicion_floor",
            OutlierEjection::new().suspicion_floor(Duration::ZERO),
        ),
        (
            "suspicion_p99_factor",
            OutlierEjection::new().suspicion_p99_factor(0.0),
        ),
        (
            "suspicion_p99_factor",
            OutlierEjection::new().suspicion_p99_factor(f64::INFINITY),
        ),
        (
            "suspicion_min_in_flight",
            OutlierEjection::new().suspicion_min_in_flight(0),
        ),
    ];
    for (name, options) in cases {
        match SelectorKit::new(&*options.wrap(Arc::new(RoundRobin::new()))) {
            Err(Error::InvalidConfig { option, .. }) => assert_eq!(option, name),
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(OutlierEjection::new().validate().is_ok());
}

#[test]
fn a_wrapped_algorithm_is_named_after_it_and_counts_calls_in_flight() {
    let wrapped = OutlierEjection::new().wrap(Arc::new(RoundRobin::new()));
    assert_eq!(wrapped.name(), "round_robin+ejection");
    assert!(wrapped.needs().in_flight);
    let by_name = rpc_load_balancer::algorithm::by_name("round_robin+ejection").unwrap();
    assert_eq!(by_name.name(), "round_robin+ejection");
    assert!(matches!(
        rpc_load_balancer::algorithm::by_name("round_robin+ejection+ejection"),
        Err(Error::InvalidConfig {
            option: "algorithm",
            ..
        })
    ));
    assert!(matches!(
        rpc_load_balancer::algorithm::by_name("fastest+ejection"),
        Err(Error::InvalidConfig {
            option: "algorithm",
            ..
        })
    ));
}

#[test]
fn an_ejected_members_share_spreads_when_the_algorithm_keeps_choosing_it() {
    // LeastConnections always wants the idle (ejected) member: its calls must not all go to
    // the next member in the list.
    let algorithm =
        OutlierEjection::new().wrap(Arc::new(rpc_load_balancer::LeastConnections::new()));
    let mut kit = SelectorKit::seeded(&*algorithm, 7).unwrap();
    kit.join(["a", "b", "c", "d"]);
    answer(&kit, "b", 5, FAILED);
    let held: Vec<Picked> = (0..300).map(|_| kit.pick(None).unwrap()).collect();
    assert_eq!(kit.in_flight("b"), Some(0));
    for node in ["a", "c", "d"] {
        let n = kit.in_flight(node).unwrap();
        assert!((60..=140).contains(&n), "{node}: {n} of 300");
    }
    drop(held);
}

/// The picks that land away from an ejected member (LeastConnections keeps choosing it, so
/// they fall back to a random member) under seed `seed`, as node names.
fn fallback_picks(seed: u64) -> Vec<String> {
    let algorithm =
        OutlierEjection::new().wrap(Arc::new(rpc_load_balancer::LeastConnections::new()));
    let mut kit = SelectorKit::seeded(&*algorithm, seed).unwrap();
    kit.join(["a", "b", "c", "d"]);
    answer(&kit, "b", 5, FAILED);
    let held: Vec<Picked> = (0..60).map(|_| kit.pick(None).unwrap()).collect();
    held.iter().map(|pick| pick.node().to_string()).collect()
}

#[test]
fn picks_away_from_an_ejected_member_repeat_under_the_same_seed() {
    // The lab runs seeded kits: a fallback pick drawn from thread entropy would make its
    // ejection rows differ from run to run.
    assert_eq!(fallback_picks(7), fallback_picks(7));
    assert_eq!(fallback_picks(11), fallback_picks(11));
    assert_ne!(
        fallback_picks(7),
        fallback_picks(11),
        "another seed draws other members"
    );
}

#[test]
fn durations_beyond_u64_nanoseconds_saturate() {
    let huge = Duration::MAX;
    let options = OutlierEjection::new()
        .max_ejected_percent(50)
        .base_ejection_time(huge)
        .max_ejection_time(huge)
        .suspicion_floor(huge)
        .interval(huge);
    let kit = kit_of(options, &["a", "b", "c", "d"]);
    answer(&kit, "b", 5, FAILED);
    kit.clock().advance(Duration::from_secs(1_000_000));
    assert_eq!(share(&kit, 400, "b"), 0, "ejected for ever, not for 0 ns");
    let _held = go_silent(&kit, "c", Duration::from_secs(3_600));
    assert_eq!(
        share(&kit, 300, "c"),
        100,
        "a floor of centuries never passes"
    );
}

#[test]
fn equal_success_rates_eject_nobody_even_with_a_zero_factor() {
    let nodes = ["a", "b", "c", "d", "e", "f"];
    let options = OutlierEjection::new()
        .consecutive_failures(0)
        .success_rate_stdev_factor(0.0)
        .max_ejected_percent(100);
    let kit = kit_of(options, &nodes);
    // (This call and the one that ends the interval count for a: 98 more.)
    answer(&kit, "a", 1, OutcomeKind::Ok);
    for node in nodes {
        let calls = if node == "a" { 98 } else { 100 };
        for i in 0..calls {
            // 99 % each: the same rate, up to rounding.
            let kind = if i == 0 { FAILED } else { OutcomeKind::Ok };
            answer(&kit, node, 1, kind);
        }
    }
    kit.clock().advance(Duration::from_secs(10));
    answer(&kit, "a", 1, OutcomeKind::Ok);
    let counts = kit.counts(600, None).unwrap();
    assert_eq!(counts.len(), 6, "{counts:?}");
}

#[test]
fn ejection_counts_decay_over_idle_intervals_too() {
    let options = OutlierEjection::new()
        .max_ejected_percent(50)
        .base_ejection_time(Duration::from_secs(10))
        .interval(Duration::from_secs(100));
    let kit = kit_of(options, &["a", "b"]);
    answer(&kit, "a", 1, OutcomeKind::Ok);
    for _ in 0..3 {
        answer(&kit, "b", 5, FAILED);
        kit.clock().advance(Duration::from_secs(40));
        assert_eq!(share(&kit, 10, "b"), 5);
    }
    // Three ejections: the next would last 40 s. An idle hour (36 intervals) decays them all.
    kit.clock().advance(Duration::from_secs(3_600));
    answer(&kit, "a", 1, OutcomeKind::Ok);
    answer(&kit, "b", 5, FAILED);
    kit.clock().advance(Duration::from_secs(10));
    assert_eq!(
        share(&kit, 10, "b"),
        5,
        "back after 10 s: the count decayed"
    );
}
