//! Locality's selector (`routing/locality.rs`) over a built-in algorithm: here, as the routing
//! core's own tests name no algorithm.

use std::sync::Arc;

use crate::algorithm::RoundRobin;
use crate::routing::{
    Algorithm, BuildContext, Change, Clock, Derived, Locality, MemberView, Request, Selector,
};
use crate::Error;

/// A list of members `a..` on `nodes`, those in `zone` preferred, announced to `selector` as
/// list `version`; returns the views and what the selector derived.
fn announce(
    selector: &dyn Selector,
    nodes: &[(&str, bool)],
    version: u64,
) -> (Vec<MemberView>, Option<Derived>) {
    let views: Vec<MemberView> = nodes
        .iter()
        .map(|(node, zone)| MemberView::new(*node, false).with_preferred(*zone))
        .collect();
    let joined: Vec<Arc<str>> = views.iter().map(|v| Arc::clone(v.node_arc())).collect();
    let change = Change {
        balancer: "b",
        joined: &joined,
        left: &[],
        members: &views,
        version,
    };
    selector.members_changed(&change);
    let derived = selector.derive(&change);
    (views, derived)
}

fn build(cap: Option<usize>) -> Box<dyn Selector> {
    let context = BuildContext {
        balancer: "b",
        clock: Clock::system(),
        seed: Some(1),
        cpu_sample_interval: None,
    };
    Locality::zone()
        .wrap(Arc::new(RoundRobin::new()), cap)
        .build(&context)
        .unwrap()
}

/// `count` picks over `views`, as node names.
fn picks(
    selector: &dyn Selector,
    views: &[MemberView],
    derived: &Option<Derived>,
    count: usize,
) -> Vec<String> {
    let request = Request {
        derived: derived.as_ref(),
        ..Request::new("b", None, 1)
    };
    (0..count)
        .map(|_| {
            views[selector.pick(views, &request).unwrap()]
                .node()
                .to_string()
        })
        .collect()
}

#[test]
fn picks_go_to_the_preferred_members_only_while_one_can_take_the_call() {
    let selector = build(Some(2));
    let (views, derived) = announce(
        &*selector,
        &[
            ("a1@h", true),
            ("b1@h", false),
            ("a2@h", true),
            ("b2@h", false),
        ],
        1,
    );
    let got = picks(&*selector, &views, &derived, 8);
    assert!(got.iter().all(|n| n.starts_with('a')), "{got:?}");
    assert!(got.contains(&"a1@h".to_string()) && got.contains(&"a2@h".to_string()));
    // a1 at the cap: a2 still can take calls, so picks stay in the zone.
    views[0].set_in_flight(2);
    let got = picks(&*selector, &views, &derived, 4);
    assert!(got.iter().all(|n| n.starts_with('a')), "{got:?}");
    // Both at the cap: every member, by the algorithm over all (round robin).
    views[2].set_in_flight(2);
    let got = picks(&*selector, &views, &derived, 4);
    assert!(got.iter().any(|n| n.starts_with('b')), "{got:?}");
    assert_eq!(got.len(), 4);
    let mut seen = got.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4, "round robin over all four: {got:?}");
    // Room again: back to the zone (the algorithm picks within it; the balancer's cap sends
    // a pick of a member at the cap to one under it).
    views[0].set_in_flight(0);
    let got = picks(&*selector, &views, &derived, 4);
    assert!(got.iter().all(|n| n.starts_with('a')), "{got:?}");
}

#[test]
fn without_a_cap_the_zone_takes_every_call_and_no_zone_member_means_all() {
    let selector = build(None);
    let (views, derived) = announce(&*selector, &[("a1@h", true), ("b1@h", false)], 1);
    views[0].set_in_flight(1_000);
    assert!(picks(&*selector, &views, &derived, 5)
        .iter()
        .all(|n| n == "a1@h"));
    // No member in this node's zone: round robin over all.
    let (views, derived) = announce(&*selector, &[("b1@h", false), ("b2@h", false)], 2);
    let mut got = picks(&*selector, &views, &derived, 4);
    got.sort();
    assert_eq!(got, ["b1@h", "b1@h", "b2@h", "b2@h"]);
}

#[test]
fn a_list_nothing_was_derived_for_is_narrowed_on_the_spot() {
    let selector = build(None);
    let (views, _) = announce(
        &*selector,
        &[("a1@h", true), ("b1@h", false), ("b2@h", false)],
        1,
    );
    let request = Request::new("b", None, Request::UNCACHED);
    for _ in 0..4 {
        assert_eq!(selector.pick(&views, &request).unwrap(), 0);
    }
    // A list where the zone's member is excluded: every other member.
    let rest = &views[1..];
    let mut got: Vec<usize> = (0..4)
        .map(|_| selector.pick(rest, &request).unwrap())
        .collect();
    got.sort();
    assert_eq!(got, [0, 0, 1, 1]);
}

#[test]
fn a_change_of_zone_alone_is_a_new_list_and_explained() {
    let selector = build(None);
    let (views, derived) = announce(&*selector, &[("a1@h", false), ("b1@h", false)], 1);
    let mut got = picks(&*selector, &views, &derived, 2);
    got.sort();
    assert_eq!(got, ["a1@h", "b1@h"]);
    // a1's labels arrive: the same members, a1 now preferred.
    let (views, derived) = announce(&*selector, &[("a1@h", true), ("b1@h", false)], 2);
    let request = Request {
        derived: derived.as_ref(),
        ..Request::new("b", None, 2)
    };
    assert!(picks(&*selector, &views, &derived, 3)
        .iter()
        .all(|n| n == "a1@h"));
    let explanation = selector.explain(&views, 0, &request);
    assert!(
        explanation.rule.starts_with("locality (1 of 2"),
        "{}",
        explanation.rule
    );
}

#[test]
fn hash_ring_and_call_direct_are_refused_and_keys_checked() {
    for algorithm in [
        Arc::new(crate::algorithm::HashRing::new()) as Arc<dyn Algorithm>,
        Arc::new(crate::algorithm::CallDirect),
    ] {
        match Locality::zone().check(&*algorithm) {
            Err(Error::InvalidConfig { option, .. }) => assert_eq!(option, "locality"),
            other => panic!("{}: {other:?}", algorithm.name()),
        }
    }
    assert!(Locality::zone().check(&RoundRobin::new()).is_ok());
    for key in ["", "a b", &"k".repeat(65)] {
        assert!(
            Locality::label(key).check(&RoundRobin::new()).is_err(),
            "{key:?}"
        );
    }
    assert_eq!(Locality::default(), Locality::zone());
}
