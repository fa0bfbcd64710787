use super::*;
use crate::control::ControlRequest;
use crate::payload::Payload;
use crate::wire::header::{decode_call, encode_call, take_args, CallHeader};
use crate::wire::reply::{self, ReplyStatus};
use crate::wire::{start_message, WIRE_VERSION};

/// A field a newer release might append (a load report, a trace context): optional.
type Newer<'a> = Option<(u64, &'a str)>;

const NEWER: Newer<'static> = Some((42, "a field of a newer release"));

fn header() -> CallHeader<'static> {
    CallHeader {
        function: "echo",
        balancer: Some("b"),
        deadline_ms: 1_000,
        call_id: 7,
        raw_args: false,
        trace: None,
    }
}

/// A call as a newer release writes it: `header`'s fields, then `appended` in the section.
fn newer_call<A: Serialize>(args: &A, appended: &[u8]) -> Vec<u8> {
    let out = postcard::to_extend(args, start_message(64)).unwrap();
    let out = postcard::to_extend(&header(), out).unwrap();
    push_section_tail(
        out,
        postcard::to_allocvec(&header()).unwrap().len(),
        appended,
    )
}

/// Appends `appended` to a section of `known` bytes that ends `out`, then the section's length.
fn push_section_tail(mut out: Vec<u8>, known: usize, appended: &[u8]) -> Vec<u8> {
    out.extend_from_slice(appended);
    let len = u32::try_from(known + appended.len()).unwrap();
    out.extend_from_slice(&len.to_le_bytes());
    out
}

/// A reply as a newer release writes it: `value`'s bytes, `status`, then `appended`.
fn newer_reply(value: &[u8], status: &ReplyStatus<'_>, appended: &[u8]) -> Vec<u8> {
    let mut out = start_message(64);
    out.extend_from_slice(value);
    let out = postcard::to_extend(status, out).unwrap();
    push_section_tail(out, postcard::to_allocvec(status).unwrap().len(), appended)
}

#[test]
fn this_release_writes_the_bytes_of_version_2_as_before() {
    // Nodes of earlier releases read exactly these bytes (they refuse any byte after the
    // known fields), so nothing this release sends is new to them.
    let v = u8::try_from(WIRE_VERSION).unwrap();
    let call = encode_call(&header(), &"x".to_string()).unwrap();
    let section = [&[4][..], b"echo", &[1, 1], b"b", &[0xe8, 0x07, 7, 0]].concat();
    let expected = [
        &[v, 1, b'x'][..],
        &section,
        &u32::try_from(section.len()).unwrap().to_le_bytes(),
    ]
    .concat();
    assert_eq!(call, expected);
    assert_eq!(
        reply::encode_status(&ReplyStatus::Failed("no")),
        [v, 2, 2, b'n', b'o', 4, 0, 0, 0]
    );
    assert_eq!(
        encode_control(&ControlRequest::Cancel(300)).unwrap(),
        [v, 16, 0xac, 0x02]
    );
}

#[test]
fn a_call_header_with_an_unknown_trailing_field_decodes() {
    let newer = postcard::to_allocvec(&NEWER).unwrap();
    for appended in [&newer[..], &[0x09], &[0xff; 300]] {
        let bytes = newer_call(&"hello".to_string(), appended);
        let (decoded, args) = decode_call(&bytes).unwrap();
        assert_eq!(decoded, header());
        assert_eq!(take_args::<String>(bytes, args, false).unwrap(), "hello");
    }
    // A payload call keeps its arguments in place.
    let raw = CallHeader {
        raw_args: true,
        ..header()
    };
    let mut bytes = start_message(64);
    bytes.extend_from_slice(b"raw bytes");
    let bytes = postcard::to_extend(&raw, bytes).unwrap();
    let known = postcard::to_allocvec(&raw).unwrap().len();
    let bytes = push_section_tail(bytes, known, &newer);
    let (decoded, args) = decode_call(&bytes).unwrap();
    assert_eq!(decoded, raw);
    let payload: Payload = take_args(bytes, args, true).unwrap();
    assert_eq!(&payload[..], b"raw bytes");
}

#[test]
fn a_reply_status_with_an_unknown_trailing_field_decodes() {
    let newer = postcard::to_allocvec(&NEWER).unwrap();
    let value = postcard::to_allocvec(&vec![1u32, 2, 3]).unwrap();
    let bytes = newer_reply(&value, &ReplyStatus::Ok, &newer);
    let (status, range) = reply::decode_range(&bytes).unwrap();
    assert_eq!(status, ReplyStatus::Ok);
    assert_eq!(
        reply::take_value::<Vec<u32>>(bytes, range, false).unwrap(),
        vec![1, 2, 3]
    );
    for status in [
        ReplyStatus::Failed("why"),
        ReplyStatus::PayloadTooLarge { size: 10, limit: 5 },
        ReplyStatus::DeadlineExceeded,
    ] {
        let bytes = newer_reply(&[], &status, &newer);
        assert_eq!(reply::decode(&bytes).unwrap(), (status, &[][..]));
    }
    // A leaving member of a newer release hands back a newer call: both are read.
    let call = newer_call(&"args".to_string(), &newer);
    let bytes = newer_reply(&call[1..], &ReplyStatus::Leaving, &newer);
    let (status, range) = reply::decode_range(&bytes).unwrap();
    assert_eq!(status, ReplyStatus::Leaving);
    let handed_back = reply::refused_call(bytes, range).unwrap();
    assert_eq!(handed_back, call);
    assert_eq!(decode_call(&handed_back).unwrap().0, header());
}

#[test]
fn a_control_request_with_an_unknown_trailing_field_decodes() {
    let mut bytes = encode_control(&ControlRequest::Members("work".into())).unwrap();
    bytes.extend_from_slice(&postcard::to_allocvec(&NEWER).unwrap());
    let body = crate::wire::split_version(&bytes).unwrap();
    let (request, mut tail) = decode_control::<ControlRequest>(body).unwrap();
    assert_eq!(request, ControlRequest::Members("work".into()));
    assert_eq!(tail.next_or_default::<Newer<'_>>().unwrap(), NEWER);
}

#[test]
fn a_field_an_older_sender_did_not_write_takes_its_default() {
    // Today's header read by a release that appended two fields.
    let bytes = encode_call(&header(), &()).unwrap();
    let section = split_trailer(crate::wire::split_version(&bytes).unwrap(), "call header")
        .unwrap()
        .1;
    let (decoded, mut tail) = decode_trailer::<CallHeader<'_>>(section, "call header").unwrap();
    assert_eq!(decoded, header());
    assert_eq!(tail.unknown_len(), 0);
    assert_eq!(tail.next_or_default::<Newer<'_>>().unwrap(), None);
    assert_eq!(tail.next_or_default::<u64>().unwrap(), 0);
    // A sender that wrote the first appended field but not the second.
    let appended = postcard::to_allocvec(&NEWER).unwrap();
    let bytes = newer_call(&(), &appended);
    let section = split_trailer(crate::wire::split_version(&bytes).unwrap(), "call header")
        .unwrap()
        .1;
    let (_, mut tail) = decode_trailer::<CallHeader<'_>>(section, "call header").unwrap();
    assert_eq!(tail.unknown_len(), appended.len());
    assert_eq!(tail.next_or_default::<Newer<'_>>().unwrap(), NEWER);
    assert_eq!(tail.unknown_len(), 0);
    assert_eq!(tail.next_or_default::<u64>().unwrap(), 0);
}

#[test]
fn an_appended_field_cut_short_or_bad_is_malformed_not_its_default() {
    for bad in [
        &[0x01][..],                     // `Some`, then nothing
        &[0x01, 0x2a, 0x05, b'a'],       // a string shorter than its length
        &[0x02],                         // no `Option` tag
        &[0x01, 0x2a, 0x02, 0xc3, 0x28], // invalid UTF-8
        &[0xff; 11],                     // an over-long varint
    ] {
        let mut tail = Tail {
            rest: bad,
            what: "call header",
        };
        assert!(
            matches!(
                tail.next_or_default::<Newer<'_>>(),
                Err(DecodeError::Malformed(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn section_lengths_that_do_not_fit_are_malformed() {
    let v = u8::try_from(WIRE_VERSION).unwrap();
    /// `message` with its section length replaced by `len`.
    fn with_len(message: &[u8], len: u32) -> Vec<u8> {
        let mut bytes = message[..message.len() - TRAILER_LEN].to_vec();
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes
    }
    let call = encode_call(&header(), &"x".to_string()).unwrap();
    let reply = reply::encode_ok(&"a value".to_string()).unwrap();
    let status = reply::encode_status(&ReplyStatus::Failed("a message"));
    let body_len = |message: &[u8]| u32::try_from(message.len() - 1 - TRAILER_LEN).unwrap();
    let calls = [
        ("one past the start", with_len(&call, body_len(&call) + 1)),
        ("u32::MAX", with_len(&call, u32::MAX)),
        ("empty: no known fields", with_len(&call, 0)),
        // "ho", 1, 1, "b"...: a function name longer than the section
        ("inside the known fields", with_len(&call, 10)),
        // the arguments read as header fields: "x", then an `Option` tag of 4
        ("the whole body", with_len(&call, body_len(&call))),
        ("no room for a length", vec![v, 0, 0]),
    ];
    for (why, bytes) in calls {
        assert!(
            matches!(decode_call(&bytes), Err(DecodeError::Malformed(_))),
            "call: {why}"
        );
    }
    let replies = [
        ("one past the start", with_len(&reply, body_len(&reply) + 1)),
        ("u32::MAX", with_len(&reply, u32::MAX)),
        ("empty: no known fields", with_len(&status, 0)),
        // "age": variant 97
        ("inside the known fields", with_len(&status, 3)),
        ("no room for a length", vec![v, 0, 0]),
    ];
    for (why, bytes) in replies {
        assert!(
            matches!(reply::decode(&bytes), Err(DecodeError::Malformed(_))),
            "reply: {why}"
        );
    }
    // A control request cut inside its fields.
    let request = encode_control(&ControlRequest::Members("work".into())).unwrap();
    for len in 1..request.len() {
        let body = &request[1..len];
        assert!(
            matches!(
                decode_control::<ControlRequest>(body),
                Err(DecodeError::Malformed(_))
            ),
            "{body:?}"
        );
    }
}
