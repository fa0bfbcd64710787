//! The algorithm registry and what the built-in algorithms share, on the test kit (no actors,
//! no node). Each algorithm's own rules are tested beside it (`round_robin/tests.rs`, ...).

use std::collections::BTreeSet;
use std::time::Duration;

use super::test_support::*;
use super::*;
use crate::routing::{BuildContext, Clock, Needs, OutcomeKind};
use crate::testkit::SelectorKit;

#[test]
fn default_pick_many_gives_distinct_members() {
    let random = kit(&Random::new(), &["a", "b", "c", "d"]);
    for count in 0..6 {
        let picked = random.pick_many(count, None).unwrap();
        assert_eq!(picked.len(), count.min(4));
        let distinct: BTreeSet<_> = picked.iter().collect();
        assert_eq!(distinct.len(), picked.len());
    }
}

#[test]
fn built_in_algorithms_by_name() {
    for name in BUILT_IN {
        let algorithm = by_name(name).unwrap();
        assert_eq!(algorithm.name(), *name);
        assert!(algorithm.build(&BuildContext::new("b")).is_ok(), "{name}");
    }
    match by_name("fastest") {
        Err(Error::InvalidConfig {
            option: "algorithm",
            reason,
        }) => assert!(reason.contains("round_robin")),
        other => panic!("{:?}", other.map(|a| a.name())),
    }
    // What each asks the balancer to keep.
    let needs = |name: &str| by_name(name).unwrap().needs();
    assert!(needs("least_connections").in_flight && needs("power_of_two").in_flight);
    assert!(!needs("random").in_flight && needs("random").cpu.is_none());
    assert!(needs("least_cpu").cpu.is_some() && !needs("least_cpu").in_flight);
    assert!(needs("peak_ewma").in_flight && needs("peak_ewma").cpu.is_none());
    // LoadWeighted reads the reports the balancer keeps in every view: it asks only that they
    // be kept fresh where calls bring none (actor groups), every weight update period.
    assert_eq!(
        needs("load_weighted"),
        Needs::NONE.reports(LoadWeighted::DEFAULT_WEIGHT_UPDATE_PERIOD)
    );
    for name in BUILT_IN.iter().filter(|n| **n != "load_weighted") {
        assert_eq!(needs(name).reports, None, "{name}");
    }
    // Only PeakEwma learns from outcomes (the others' call path reads no clock for them).
    for name in BUILT_IN {
        let learns = build(&*by_name(name).unwrap()).learns();
        assert_eq!(learns, *name == "peak_ewma", "{name}");
    }
}

#[test]
fn one_configuration_builds_independent_selectors() {
    // The instance shared by two balancers keeps nothing of either: each selector has its
    // own position and list.
    let rr = RoundRobin::starting_at(0);
    let (one, two) = (kit(&rr, &["a", "b", "c"]), kit(&rr, &["x", "y"]));
    let mut picks = Vec::new();
    for _ in 0..3 {
        picks.push(one.pick_and_release(None).unwrap());
        picks.push(two.pick_and_release(None).unwrap());
    }
    assert_eq!(picks, ["a", "x", "b", "y", "c", "x"]);
    let clock = Clock::manual();
    let context = BuildContext {
        clock: clock.clock(),
        ..BuildContext::new("b")
    };
    assert!(HashRing::new().build(&context).is_ok());
}

/// The kit with built-in selectors that do not learn: outcomes only release.
#[test]
fn a_selector_that_does_not_learn_is_only_released() {
    let mut kit = SelectorKit::new(&LeastConnections::seeded(1)).unwrap();
    kit.join(["a@h"]);
    let pick = kit.pick(None).unwrap();
    kit.complete(pick, Duration::from_millis(1), OutcomeKind::Ok);
    assert_eq!(kit.in_flight("a@h"), Some(0));
    // Random needs no counts: the kit keeps none either.
    let mut random = SelectorKit::seeded(&Random::new(), 3).unwrap();
    random.join(["a@h", "b@h"]);
    let held = random.pick(None).unwrap();
    assert_eq!(random.in_flight(held.node()), Some(0));
    random.release(held);
    assert!(!random.set_in_flight("zz@h", 1));
    assert_eq!(random.counts(10, None).unwrap().values().sum::<usize>(), 10);
    assert_eq!(
        random.explain(0, None).unwrap().rule,
        "uniform random (seeded) among 2"
    );
}

/// The kit's `explain` of an index past the members is `None` (HashRing indexed the list and
/// panicked); a selector asked directly about a member it does not have says `?`.
#[test]
fn explain_of_an_index_past_the_members_does_not_panic() {
    let members = [crate::routing::MemberView::new("a@h", false)];
    let request = crate::routing::Request::new("b", Some(b"k"), 1);
    for algorithm in [&HashRing::new() as &dyn Algorithm, &PowerOfTwo::new()] {
        let mut kit = SelectorKit::new(algorithm).unwrap();
        kit.join(["a@h"]);
        assert!(kit.explain(0, Some(b"k")).is_some());
        assert!(kit.explain(5, Some(b"k")).is_none());
        let explanation = kit.selector().explain(&members, 5, &request);
        assert!(explanation.rule.contains('?'), "{explanation:?}");
    }
}
