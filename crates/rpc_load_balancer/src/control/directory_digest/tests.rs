use super::*;
use crate::control::{ControlReply, ControlRequest};

fn entry(serves: &[&str], calls: &[&str]) -> DirectoryEntry {
    DirectoryEntry {
        node: "a@127.0.0.1".into(),
        addr: "127.0.0.1:4100".into(),
        incarnation: 1,
        counter: 7,
        serves: serves.iter().map(|s| s.to_string()).collect(),
        calls: calls.iter().map(|s| s.to_string()).collect(),
    }
}

/// Golden vectors: every node must hash an entry alike, whatever its platform or build.
#[test]
fn the_content_hash_is_fixed_and_covers_address_and_both_lists_only() {
    assert_eq!(entry(&[], &[]).content_hash(), 0x76e4_71f6_5767_8cc1);
    assert_eq!(entry(&["b"], &[]).content_hash(), 0x589b_7ef0_8c7e_8a79);
    let base = entry(&["b"], &[]);
    // Not the counter, run or node.
    let mut moved = base.clone();
    (moved.counter, moved.incarnation, moved.node) = (99, 2, "z@h".into());
    assert_eq!(moved.content_hash(), base.content_hash());
    // The list a name is in, and the address, count.
    assert_ne!(entry(&[], &["b"]).content_hash(), base.content_hash());
    assert_ne!(entry(&["b", ""], &[]).content_hash(), base.content_hash());
    let mut readdressed = base.clone();
    readdressed.addr = "127.0.0.1:4101".into();
    assert_ne!(readdressed.content_hash(), base.content_hash());
}

#[test]
fn the_digest_exchange_keeps_its_wire_indices_and_round_trips() {
    let digest = ControlRequest::GossipDigest(vec![DigestItem::of(&entry(&["b"], &[]))]);
    let bytes = postcard::to_allocvec(&digest).unwrap();
    assert_eq!(bytes[0], 26);
    assert_eq!(
        postcard::from_bytes::<ControlRequest>(&bytes).unwrap(),
        digest
    );
    let delta = ControlReply::GossipDelta {
        entries: vec![entry(&[], &["c"])],
        beats: vec![DigestItem::of(&entry(&[], &[]))],
        wants: vec!["z@h".into()],
    };
    let bytes = postcard::to_allocvec(&delta).unwrap();
    assert_eq!(bytes[0], 17);
    assert_eq!(postcard::from_bytes::<ControlReply>(&bytes).unwrap(), delta);
    let bytes = postcard::to_allocvec(&ControlReply::Directory(Vec::new())).unwrap();
    assert_eq!(bytes[0], 16, "the whole-directory reply keeps its index");
}

#[test]
fn a_decoded_digest_and_delta_keep_the_first_items() {
    let many: Vec<DigestItem> = (0..MAX_DIRECTORY_ENTRIES + 10)
        .map(|i| DigestItem {
            node: format!("n{i}@h"),
            incarnation: 1,
            counter: i as u64,
            content: 0,
        })
        .collect();
    let bytes = postcard::to_allocvec(&ControlRequest::GossipDigest(many.clone())).unwrap();
    let ControlRequest::GossipDigest(back) = postcard::from_bytes(&bytes).unwrap() else {
        panic!("not a digest");
    };
    assert_eq!(back.len(), MAX_DIRECTORY_ENTRIES);
    let names: Vec<String> = many.iter().map(|i| i.node.clone()).collect();
    let delta = ControlReply::GossipDelta {
        entries: Vec::new(),
        beats: many,
        wants: names,
    };
    let bytes = postcard::to_allocvec(&delta).unwrap();
    let ControlReply::GossipDelta { beats, wants, .. } = postcard::from_bytes(&bytes).unwrap()
    else {
        panic!("not a delta");
    };
    assert_eq!(
        (beats.len(), wants.len()),
        (MAX_DIRECTORY_ENTRIES, MAX_DIRECTORY_ENTRIES)
    );
}
