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

fn counter_of(directory: &Directory, node: &str) -> Option<u64> {
    directory
        .entries()
        .into_iter()
        .find(|e| e.node == node)
        .map(|e| e.counter)
}

#[test]
fn entries_merge_by_incarnation_then_counter() {
    let now = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    directory.set_own_roles(vec!["b".into()], vec!["b".into(), "b".into()]);
    directory.merge(vec![entry("a@h", 5, 10, &["b"])], now);
    // An older counter, or an older run with a higher counter, is stale.
    directory.merge(vec![entry("a@h", 5, 9, &[])], now);
    directory.merge(vec![entry("a@h", 4, 99, &[])], now);
    assert_eq!(counter_of(&directory, "a@h"), Some(10));
    assert_eq!(directory.serving("b"), ["a@h", "me@h"]);
    assert_eq!(directory.calling("b"), ["me@h"], "own roles, deduplicated");
    // A restart (newer incarnation) wins with any counter, and its lists replace the old.
    directory.merge(vec![entry("a@h", 6, 0, &[])], now);
    assert_eq!(counter_of(&directory, "a@h"), Some(0));
    assert_eq!(directory.serving("b"), ["me@h"]);
    // Nobody speaks for this node but itself.
    directory.merge(vec![entry("me@h", 99, 99, &[])], now);
    assert_eq!(directory.entries()[0], {
        let mut own = entry("me@h", 1, 0, &["b"]);
        own.addr = "me:1".into();
        own.calls = vec!["b".into()];
        own
    });
}

#[test]
fn an_entry_whose_counter_stops_is_dropped_after_the_ttl() {
    let start = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    let mut shape = directory.watch();
    directory.merge(
        vec![entry("a@h", 1, 1, &[]), entry("z@h", 1, 1, &[])],
        start,
    );
    assert!(shape.has_changed().unwrap());
    shape.borrow_and_update();
    // a@h advances halfway through; z@h never does.
    let half = start + ENTRY_TTL / 2;
    directory.merge(vec![entry("a@h", 1, 2, &[]), entry("z@h", 1, 1, &[])], half);
    assert!(
        !shape.has_changed().unwrap(),
        "a counter bump is no change of shape"
    );
    directory.tick(start + ENTRY_TTL);
    assert_eq!(counter_of(&directory, "z@h"), None, "z@h did not advance");
    assert_eq!(counter_of(&directory, "a@h"), Some(2));
    assert_eq!(
        counter_of(&directory, "me@h"),
        Some(1),
        "own counter bumped"
    );
    assert!(shape.has_changed().unwrap());
    directory.tick(half + ENTRY_TTL);
    assert_eq!(directory.len(), 1);
}

#[test]
fn a_silent_node_dropped_here_is_not_brought_back_by_a_peer_that_drops_it_later() {
    let start = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    directory.merge(vec![entry("x@h", 1, 5, &["b"])], start);
    directory.tick(start + ENTRY_TTL);
    assert!(directory.serving("b").is_empty());
    // A peer that heard x's last word later still relays it: stale, not taken.
    directory.merge(vec![entry("x@h", 1, 5, &["b"])], start + ENTRY_TTL);
    assert!(directory.serving("b").is_empty());
    // Once the record has gone (every peer has dropped x by then), x may come back only by
    // speaking again; and a restart (newer incarnation) is taken at once.
    directory.merge(vec![entry("x@h", 2, 0, &["b"])], start + ENTRY_TTL);
    assert_eq!(directory.serving("b"), ["x@h"]);
}

#[test]
fn a_node_seen_down_comes_back_only_with_newer_word() {
    let now = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    directory.merge(vec![entry("a@h", 1, 7, &["b"])], now);
    directory.peer_down("a@h", now);
    assert_eq!(directory.serving("b"), Vec::<String>::new());
    // Peers still relay its last word: not taken.
    directory.merge(vec![entry("a@h", 1, 7, &["b"])], now);
    assert_eq!(directory.serving("b"), Vec::<String>::new());
    // It is alive after all (its counter moved on): back.
    directory.merge(vec![entry("a@h", 1, 8, &["b"])], now);
    assert_eq!(directory.serving("b"), ["a@h"]);
}

#[test]
fn the_directory_holds_a_bounded_number_of_valid_entries() {
    let now = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    let many: Vec<DirectoryEntry> = (0..MAX_DIRECTORY_ENTRIES * 3)
        .map(|i| entry(&format!("n{i}@h"), 1, 1, &[]))
        .collect();
    directory.merge(many, now);
    directory.merge(vec![entry("late@h", 1, 1, &[])], now);
    assert_eq!(directory.len(), MAX_DIRECTORY_ENTRIES);
    assert_eq!(directory.addr_of("late@h"), None);

    let fresh = Directory::new("me@h", "me:1", 1);
    let long = "x".repeat(MAX_NAME_BYTES + 1);
    let mut bad_balancer = entry("c@h", 1, 1, &[]);
    bad_balancer.serves = vec![long.clone()];
    let mut too_many = entry("d@h", 1, 1, &[]);
    too_many.calls = vec!["b".into(); MAX_ENTRY_BALANCERS + 1];
    let mut no_addr = entry("e@h", 1, 1, &[]);
    no_addr.addr.clear();
    fresh.merge(
        vec![
            entry(&long, 1, 1, &[]),
            bad_balancer,
            too_many,
            no_addr,
            entry("ok@h", 1, 1, &[]),
        ],
        now,
    );
    assert_eq!(fresh.len(), 2, "{:?}", fresh.entries());
    assert_eq!(fresh.addr_of("ok@h").as_deref(), Some("ok@h:1"));
}

#[test]
fn entries_padded_to_the_caps_never_bring_the_directory_past_its_byte_budget() {
    let now = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    let pad = |i: usize, c: char| format!("{i}{}", c.to_string().repeat(MAX_NAME_BYTES - 8));
    let padded = |i: usize, counter: u64| DirectoryEntry {
        node: pad(i, 'n'),
        addr: pad(i, 'a'),
        incarnation: 1,
        counter,
        serves: (0..MAX_ENTRY_BALANCERS).map(|b| pad(b, 's')).collect(),
        calls: (0..MAX_ENTRY_BALANCERS).map(|b| pad(b, 'c')).collect(),
    };
    // Small entries first, then (as two exchanges would) padded ones, then the small ones
    // grown to the caps.
    let small: Vec<DirectoryEntry> = (0..100)
        .map(|i| entry(&format!("s{i}@h"), 1, 1, &["b"]))
        .collect();
    directory.merge(small, now);
    directory.merge((0..300).map(|i| padded(i, 1)).collect(), now);
    directory.merge(
        (300..MAX_DIRECTORY_ENTRIES).map(|i| padded(i, 1)).collect(),
        now,
    );
    let grown: Vec<DirectoryEntry> = (0..100)
        .map(|i| {
            let mut e = padded(i, 2);
            e.node = format!("s{i}@h");
            e
        })
        .collect();
    directory.merge(grown, now);
    let entries = directory.entries();
    let held: usize = entries.iter().map(DirectoryEntry::encoded_bound).sum();
    assert!(held <= MAX_DIRECTORY_BYTES, "{held}");
    let request = postcard::to_allocvec(&crate::control::ControlRequest::Gossip(entries.clone()));
    let reply = postcard::to_allocvec(&crate::control::ControlReply::Directory(entries));
    for encoded in [request.unwrap().len(), reply.unwrap().len()] {
        assert!(encoded <= MAX_DIRECTORY_BYTES, "{encoded} bytes encoded");
    }
    // The small entries are all still there; the budget took some padded ones, not all.
    assert_eq!(directory.serving("b").len(), 100);
    assert!(directory.len() > 101 && directory.len() < MAX_DIRECTORY_ENTRIES);
}

#[test]
fn a_peer_calling_a_balancer_served_here_is_told_apart() {
    let now = Instant::now();
    let directory = Directory::new("me@h", "me:1", 1);
    directory.set_own_roles(vec!["b".into()], vec!["c".into()]);
    let mut caller = entry("a@h", 1, 1, &["c"]);
    caller.calls = vec!["b".into()];
    let mut other = entry("z@h", 1, 1, &["b"]);
    other.calls = vec!["c".into()];
    directory.merge(vec![caller, other], now);
    assert!(directory.calls_a_balancer_served_here("a@h"));
    assert!(!directory.calls_a_balancer_served_here("z@h"));
    assert!(!directory.calls_a_balancer_served_here("unknown@h"));
}
