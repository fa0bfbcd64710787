use super::*;
use crate::control::ControlReply;

fn peers_of(bytes: &[u8]) -> Vec<(String, String)> {
    match postcard::from_bytes(bytes) {
        Ok(ControlReply::Peers(peers)) => peers,
        other => panic!("not a peer list: {other:?}"),
    }
}

#[test]
fn a_decoded_peer_list_keeps_the_first_pairs_of_bounded_names() {
    let long = "x".repeat(MAX_PEER_NAME_BYTES + 1);
    let mut sent: Vec<(String, String)> = vec![
        (long.clone(), "h:1".into()),
        ("n@h".into(), long),
        ("n@h".into(), "y".repeat(MAX_PEER_NAME_BYTES)),
    ];
    sent.extend((0..MAX_PEERS + 500).map(|i| (format!("n{i}@h"), format!("h:{i}"))));
    let bytes = postcard::to_allocvec(&ControlReply::Peers(sent.clone())).unwrap();
    let kept = peers_of(&bytes);
    assert_eq!(kept.len(), MAX_PEERS);
    // The over-long pairs are dropped (not counted); a pair at the bound is kept.
    assert_eq!(kept[0], sent[2]);
    assert_eq!(kept[1], ("n0@h".to_string(), "h:0".to_string()));
    assert_eq!(kept[MAX_PEERS - 1].0, format!("n{}@h", MAX_PEERS - 2));
    // A short list decodes whole.
    let few = vec![("a@h".to_string(), "h:1".to_string())];
    let bytes = postcard::to_allocvec(&ControlReply::Peers(few.clone())).unwrap();
    assert_eq!(peers_of(&bytes), few);
}

#[test]
fn a_peer_list_claiming_more_pairs_than_its_bytes_hold_fails_to_decode() {
    // Variant 7 (Peers), then a length of 2^32 pairs, then one empty pair.
    let bytes = [7u8, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 0];
    assert!(postcard::from_bytes::<ControlReply>(&bytes).is_err());
}

#[test]
fn a_decoded_member_list_keeps_the_first_names_and_none_stays_none() {
    let decode = |reply: &ControlReply| -> ControlReply {
        postcard::from_bytes(&postcard::to_allocvec(reply).unwrap()).unwrap()
    };
    // Empty names: 1 byte each on the wire, 24 in memory — the amplification the bound stops.
    let many: Vec<String> = (0..MAX_MEMBERS + 5_000)
        .map(|i| {
            if i == 0 {
                "first@h".into()
            } else {
                String::new()
            }
        })
        .collect();
    let ControlReply::Members(Some(kept)) = decode(&ControlReply::Members(Some(many))) else {
        panic!("not a member list");
    };
    assert_eq!(kept.len(), MAX_MEMBERS);
    assert_eq!(kept[0], "first@h");
    assert_eq!(
        decode(&ControlReply::Members(None)),
        ControlReply::Members(None)
    );
    let few = ControlReply::Members(Some(vec!["a@h".into(), "b@h".into()]));
    assert_eq!(decode(&few), few);
}
