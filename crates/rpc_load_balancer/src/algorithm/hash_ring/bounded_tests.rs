//! HashRing with bounded loads (`balance_factor`), on the test kit: the cap holds, keys stay
//! with their owner while loads are even, an overloaded owner passes its key to the next
//! member on the ring, and bad factors are refused by name.

use super::*;
use crate::routing::{Algorithm, Needs};
use crate::testkit::{Picked, SelectorKit};
use crate::Error;

const NODES: [&str; 5] = ["a@h", "b@h", "c@h", "d@h", "e@h"];

fn kit(algorithm: &HashRing, nodes: &[&str]) -> SelectorKit {
    let mut kit = SelectorKit::seeded(algorithm, 3).unwrap();
    kit.join(nodes);
    kit
}

/// `⌈factor × (total + 1) ÷ members⌉` over the kit's members' in-flight counts.
fn cap(kit: &SelectorKit, factor: f64) -> usize {
    let total: usize = kit.members().iter().map(MemberView::in_flight).sum();
    (factor * (total as f64 + 1.0) / kit.members().len() as f64).ceil() as usize
}

fn max_in_flight(kit: &SelectorKit) -> usize {
    kit.members()
        .iter()
        .map(MemberView::in_flight)
        .max()
        .unwrap_or(0)
}

/// Holds calls for a few hot keys (key `k % 7` with keys 0 and 1 three times as often as
/// the rest), releasing the oldest now and then; after each pick, no member's in-flight
/// count exceeds the cap computed before it. Returns the most in flight on any member.
fn hold_hot_keys(kit: &SelectorKit, factor: Option<f64>) -> usize {
    let mut held: std::collections::VecDeque<Picked> = std::collections::VecDeque::new();
    let mut most = 0;
    for i in 0..400u64 {
        let key = match i % 10 {
            0..=2 => 0u64,
            3..=5 => 1,
            k => k,
        }
        .to_be_bytes();
        let before = factor.map(|f| cap(kit, f));
        held.push_back(kit.pick(Some(&key)).unwrap());
        if let Some(cap) = before {
            assert!(
                max_in_flight(kit) <= cap,
                "pick {i}: {} in flight on a member, cap {cap}: {:?}",
                max_in_flight(kit),
                kit.members()
            );
        }
        most = most.max(max_in_flight(kit));
        if i % 3 == 2 {
            kit.release(held.pop_front().unwrap());
        }
    }
    most
}

#[test]
fn bounded_loads_keep_every_member_under_the_cap_with_hot_keys_held() {
    for factor in [1.0, 1.25, 2.0] {
        let bounded = kit(&HashRing::new().balance_factor(factor), &NODES);
        let most = hold_hot_keys(&bounded, Some(factor));
        // 400 picks, a third released: 267 held over 5 members.
        let bound = (factor * 268.0 / 5.0).ceil() as usize;
        assert!(most <= bound, "factor {factor}: {most} > {bound}");
    }
    // The control: a plain ring piles the hot keys on their owners (it counts no in-flight
    // calls itself, so count on a ring that does, with a factor too large to bind).
    let loose = kit(&HashRing::new().balance_factor(1e9), &NODES);
    let most = hold_hot_keys(&loose, None);
    assert!(most > (1.25 * 268.0 / 5.0) as usize + 1, "{most}");
}

#[test]
fn bounded_keys_go_to_their_owner_while_loads_are_even() {
    let plain = kit(&HashRing::new(), &NODES);
    let bounded = kit(&HashRing::new().balance_factor(1.25), &NODES);
    for load in [0, 1, 7] {
        for node in NODES {
            bounded.set_in_flight(node, load);
        }
        for k in 0..500u64 {
            let key = k.to_be_bytes();
            assert_eq!(
                bounded.pick_and_release(Some(&key)).unwrap(),
                plain.pick_and_release(Some(&key)).unwrap(),
                "key {k}, {load} in flight on each member"
            );
        }
    }
}

#[test]
fn bounded_overloaded_owner_passes_the_key_to_the_next_ring_member() {
    for weight in [1, 128] {
        let plain = kit(&HashRing::new().weight(weight), &NODES);
        let bounded = kit(&HashRing::new().weight(weight).balance_factor(1.25), &NODES);
        for k in 0..200u64 {
            let key = k.to_be_bytes();
            let order = plain.pick_many(3, Some(&key)).unwrap();
            for node in NODES {
                bounded.set_in_flight(node, 0);
            }
            // The owner at 10 of 10 in flight: cap ⌈1.25 × 11 ÷ 5⌉ = 3.
            bounded.set_in_flight(&order[0], 10);
            assert_eq!(bounded.pick_and_release(Some(&key)).unwrap(), order[1]);
            // Owner and successor at 10 of 20: cap ⌈1.25 × 21 ÷ 5⌉ = 6: the third.
            bounded.set_in_flight(&order[1], 10);
            assert_eq!(bounded.pick_and_release(Some(&key)).unwrap(), order[2]);
            // Exactly at the cap is over it: 2 + 2 of 4, cap ⌈1.25 × 5 ÷ 5⌉ = 2.
            bounded.set_in_flight(&order[0], 2);
            bounded.set_in_flight(&order[1], 2);
            assert_eq!(bounded.pick_and_release(Some(&key)).unwrap(), order[2]);
            // Below the cap, the owner keeps it: 0 on it, 2 on its successor, cap
            // ⌈1.25 × 3 ÷ 5⌉ = 1.
            bounded.set_in_flight(&order[0], 0);
            assert_eq!(bounded.pick_and_release(Some(&key)).unwrap(), order[0]);
        }
    }
}

#[test]
fn bounded_hottest_key_spills_in_ring_order_as_calls_are_held() {
    let plain = kit(&HashRing::new(), &NODES);
    let bounded = kit(&HashRing::new().balance_factor(1.25), &NODES);
    let key = 42u64.to_be_bytes();
    let order = plain.pick_many(NODES.len(), Some(&key)).unwrap();
    // Held calls of one key fill the members in ring order, each up to the cap of its pick.
    let mut held = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..20 {
        let pick = bounded.pick(Some(&key)).unwrap();
        let node = pick.node().to_string();
        if seen.last() != Some(&node) && !seen.contains(&node) {
            seen.push(node);
        }
        held.push(pick);
    }
    assert!(
        seen.len() >= 3 && order.starts_with(&seen),
        "spilled in ring order: {seen:?}, ring {order:?}"
    );
    let most = max_in_flight(&bounded);
    assert!(most <= 5, "{most} of 20 on one member");
    for pick in held {
        bounded.release(pick);
    }
}

#[test]
fn bounded_factor_is_checked_and_named_and_counts_in_flight() {
    for bad in [0.0, 0.99, -1.25, f64::NAN, f64::INFINITY] {
        match SelectorKit::new(&HashRing::new().balance_factor(bad)) {
            Err(Error::InvalidConfig {
                option: "balance_factor",
                ..
            }) => {}
            other => panic!("factor {bad}: {other:?}"),
        }
    }
    for good in [1.0, 1.25, 10.0] {
        assert!(SelectorKit::new(&HashRing::new().balance_factor(good)).is_ok());
    }
    let bounded = HashRing::new().balance_factor(1.25);
    assert_eq!(bounded.needs(), Needs::default().in_flight());
    assert_eq!(bounded.name(), "hash_ring_bounded");
    assert_eq!(HashRing::new().needs(), Needs::NONE);
    assert_eq!(HashRing::new().name(), "hash_ring");
    let named = crate::algorithm::by_name("hash_ring_bounded").unwrap();
    assert_eq!(
        (named.name(), named.needs()),
        ("hash_ring_bounded", Needs::default().in_flight())
    );
}

#[test]
fn bounded_explain_shows_the_cap_and_the_owners_load_and_keyless_stays_random() {
    let config = HashRing::new().balance_factor(1.25).seeded(9);
    let bounded = kit(&config, &NODES);
    let key = 7u64.to_be_bytes();
    let owner = bounded.pick_and_release(Some(&key)).unwrap();
    bounded.set_in_flight(&owner, 10);
    let chosen = bounded.pick_and_release(Some(&key)).unwrap();
    let index = bounded.nodes().iter().position(|n| *n == chosen).unwrap();
    let rule = bounded.explain(index, Some(&key)).unwrap().rule;
    assert!(
        rule.contains(&format!("owner {owner} has load 10"))
            && rule.contains("cap 3")
            && rule.contains(&chosen),
        "{rule}"
    );
    // Keyless: uniform random over every member, loads or not.
    let picked: std::collections::BTreeSet<String> = (0..100)
        .map(|_| bounded.pick_and_release(None).unwrap())
        .collect();
    assert_eq!(picked.len(), NODES.len());
    assert_eq!(config.keyless_selections(), 100);
}

/// Reports from other callers count: a key's owner that reports many calls in flight (from
/// other callers) passes the key on though this caller sends it nothing; this caller's picks
/// since the report add to it; a new report resets them; a report older than 1 s no longer
/// counts.
#[test]
fn reported_loads_from_other_callers_bound_the_owner() {
    use crate::routing::LoadReport;
    use std::time::Duration;

    let kit = kit(&HashRing::new().balance_factor(1.25), &NODES);
    let key = 42u64.to_be_bytes();
    let owner = kit.pick_and_release(Some(&key)).unwrap();
    let busy = LoadReport {
        in_flight: 20,
        ..LoadReport::default()
    };
    assert!(kit.set_report(&owner, &busy, Duration::ZERO));
    // Total 20: cap ⌈1.25 × 21 ÷ 5⌉ = 6; the owner at 20 passes the key on, to one member.
    let moved = kit.pick_and_release(Some(&key)).unwrap();
    assert_ne!(moved, owner);
    assert_eq!(kit.pick_and_release(Some(&key)).unwrap(), moved);

    // A quiet report: the key goes home; picks since the report count until the next one.
    let quiet = LoadReport::default();
    kit.set_report(&owner, &quiet, Duration::ZERO);
    let mut homes = 0;
    for _ in 0..6 {
        if kit.pick_and_release(Some(&key)).unwrap() == owner {
            homes += 1;
        }
    }
    assert!(
        (1..6).contains(&homes),
        "the owner takes the key until its picks since the report reach the cap: {homes} of 6"
    );
    kit.clock().advance(Duration::from_millis(1));
    kit.set_report(&owner, &quiet, Duration::ZERO);
    assert_eq!(
        kit.pick_and_release(Some(&key)).unwrap(),
        owner,
        "a new report resets"
    );

    // An old busy report no longer counts.
    kit.set_report(&owner, &busy, Duration::from_millis(1_001));
    assert_eq!(kit.pick_and_release(Some(&key)).unwrap(), owner);
}
