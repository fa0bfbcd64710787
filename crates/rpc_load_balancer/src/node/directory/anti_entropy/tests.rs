use std::time::Instant;

use super::super::{Directory, ENTRY_TTL};
use super::*;

fn entry(node: &str, incarnation: u64, counter: u64, serves: &[&str]) -> DirectoryEntry {
    DirectoryEntry {
        node: node.into(),
        addr: format!("{node}:1"),
        incarnation,
        counter,
        serves: serves.iter().map(|s| s.to_string()).collect(),
        calls: Vec::new(),
    }
}

fn item(e: &DirectoryEntry) -> DigestItem {
    DigestItem::of(e)
}

fn counter_of(directory: &Directory, node: &str) -> Option<u64> {
    directory
        .entries()
        .into_iter()
        .find(|e| e.node == node)
        .map(|e| e.counter)
}

/// Runs one digest exchange from `from` to `to` as `gossip.rs` does, at `now`.
fn exchange(from: &Directory, to: &Directory, now: Instant) -> (Delta, usize) {
    let delta = to.reconcile(from.digest(), now);
    let answer = Delta {
        entries: delta.entries.clone(),
        beats: delta.beats.clone(),
        wants: delta.wants.clone(),
    };
    from.merge(delta.entries, now);
    from.take_beats(delta.beats, now);
    let pushed = from.entries_of(&delta.wants);
    let sent = pushed.len();
    to.merge(pushed, now);
    (answer, sent)
}

#[test]
fn a_settled_pair_exchanges_only_counters_and_both_end_with_the_newer() {
    let now = Instant::now();
    let a = Directory::new("a@h", "a:1", 1);
    let b = Directory::new("b@h", "b:1", 1);
    a.set_own_roles(vec!["s".into()], Vec::new());
    // First contact: each lacks the other, so the entries go whole, both ways.
    let (first, pushed) = exchange(&a, &b, now);
    assert_eq!(first.wants, ["a@h"], "b wants a's entry");
    assert_eq!(pushed, 1);
    assert_eq!(first.entries.len(), 1, "b's own entry");
    assert_eq!(b.serving("s"), ["a@h"]);
    assert_eq!(
        a.entries(),
        b.entries().into_iter().rev().collect::<Vec<_>>()
    );
    // Both counters move on; the next exchange carries beats only, no whole entry.
    a.tick(now);
    b.tick(now);
    b.tick(now);
    let (second, pushed) = exchange(&a, &b, now);
    assert!(second.entries.is_empty(), "{second:?}");
    assert!(second.wants.is_empty(), "a's counter was in its digest");
    assert_eq!(pushed, 0);
    assert_eq!(second.beats.len(), 1);
    assert_eq!(
        (second.beats[0].node.as_str(), second.beats[0].counter),
        ("b@h", 2)
    );
    assert_eq!(counter_of(&a, "b@h"), Some(2));
    assert_eq!(counter_of(&b, "a@h"), Some(1), "taken from a's digest");
}

#[test]
fn a_changed_entry_goes_whole_and_a_relayed_counter_keeps_it_alive() {
    let start = Instant::now();
    let (a, b, c) = (
        Directory::new("a@h", "a:1", 1),
        Directory::new("b@h", "b:1", 1),
        Directory::new("c@h", "c:1", 1),
    );
    exchange(&a, &b, start);
    exchange(&c, &b, start);
    exchange(&a, &b, start);
    assert_eq!(counter_of(&c, "a@h"), Some(0), "relayed through b");
    assert_eq!(a.len(), 3);
    // a starts serving a balancer: the content differs, so c gets the whole entry (relayed
    // by b, which wanted it from a).
    a.set_own_roles(vec!["s".into()], Vec::new());
    a.tick(start);
    let (to_b, _) = exchange(&a, &b, start);
    assert_eq!(to_b.wants, ["a@h"]);
    let (to_c, _) = exchange(&c, &b, start);
    assert_eq!(to_c.entries.len(), 1, "{to_c:?}");
    assert_eq!(c.serving("s"), ["a@h"]);
    // Beats only from here on, and they keep a@h from expiring at c: its counter moves at a
    // and reaches c through b well within the TTL, again and again.
    for period in 1..=6u32 {
        let now = start + ENTRY_TTL / 4 * period;
        a.tick(now);
        b.tick(now);
        c.tick(now);
        let (to_b, _) = exchange(&a, &b, now);
        let (to_c, _) = exchange(&c, &b, now);
        assert!(
            to_b.entries.is_empty() && to_c.entries.is_empty(),
            "{to_b:?} {to_c:?}"
        );
        assert_eq!(c.serving("s"), ["a@h"], "period {period}");
    }
    assert_eq!(counter_of(&c, "a@h"), Some(7));
    assert_eq!((a.len(), c.len()), (3, 3), "nobody expired");
}

#[test]
fn a_digest_never_brings_back_a_node_seen_down_nor_speaks_for_the_receiver() {
    let now = Instant::now();
    let me = Directory::new("me@h", "me:1", 1);
    me.merge(vec![entry("x@h", 1, 5, &[])], now);
    me.peer_down("x@h", now);
    let digest = vec![
        item(&entry("x@h", 1, 5, &[])),
        item(&entry("me@h", 9, 9, &[])),
        item(&entry("", 1, 1, &[])),
        item(&entry(&"n".repeat(300), 1, 1, &[])),
    ];
    let delta = me.reconcile(digest, now);
    assert!(delta.wants.is_empty(), "{delta:?}");
    assert!(
        delta.entries.is_empty() && delta.beats.is_empty(),
        "{delta:?}"
    );
    assert_eq!(me.entries()[0].incarnation, 1);
    // Newer word of the node seen down is wanted (it is alive after all).
    let delta = me.reconcile(vec![item(&entry("x@h", 1, 6, &[]))], now);
    assert_eq!(delta.wants, ["x@h"]);
    // Its own entry goes back when the peer holds it older, as a beat when alike.
    me.tick(now);
    let stale = item(&me.entries()[0]);
    me.tick(now);
    let delta = me.reconcile(vec![stale], now);
    assert_eq!(delta.beats.len(), 1);
    assert_eq!(delta.beats[0].counter, 2);
}

#[test]
fn beats_of_entries_held_otherwise_are_ignored_and_the_shape_does_not_change() {
    let now = Instant::now();
    let me = Directory::new("me@h", "me:1", 1);
    me.merge(vec![entry("a@h", 1, 1, &["s"])], now);
    let mut shape = me.watch();
    shape.borrow_and_update();
    let other_content = entry("a@h", 1, 9, &["t"]);
    let other_run = entry("a@h", 2, 9, &["s"]);
    let unknown = entry("z@h", 1, 9, &[]);
    me.take_beats(
        vec![item(&other_content), item(&other_run), item(&unknown)],
        now,
    );
    assert_eq!(counter_of(&me, "a@h"), Some(1));
    assert_eq!(me.len(), 2);
    me.take_beats(vec![item(&entry("a@h", 1, 7, &["s"]))], now);
    assert_eq!(counter_of(&me, "a@h"), Some(7));
    assert!(
        !shape.has_changed().unwrap(),
        "a counter is not a shape change"
    );
    // In another run or content, a digest item asks for the whole entry.
    let delta = me.reconcile(vec![item(&other_content), item(&other_run)], now);
    assert_eq!(delta.wants, ["a@h", "a@h"]);
    assert_eq!(counter_of(&me, "a@h"), Some(7));
}

#[test]
fn entries_of_answers_the_held_entries_asked_for_in_order() {
    let now = Instant::now();
    let me = Directory::new("me@h", "me:1", 1);
    me.merge(vec![entry("a@h", 1, 1, &[]), entry("b@h", 1, 1, &[])], now);
    let asked = ["b@h", "nobody@h", "me@h"].map(String::from);
    let got: Vec<String> = me.entries_of(&asked).into_iter().map(|e| e.node).collect();
    assert_eq!(got, ["b@h", "me@h"]);
}
