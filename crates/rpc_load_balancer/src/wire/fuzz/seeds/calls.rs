//! Valid calls (each function, routed or not, with and without a deadline), casts, every
//! truncation of a valid call, and calls of other wire versions.

use super::{call, control, header, record, with_version, Seeds};
use crate::__fuzz::{Add, Echo, Fail, Kind, PayloadEcho, Record, RecordFn, Repeat};
use crate::control::ControlRequest;
use crate::function::RemoteFunction;
use crate::wire::header::{encode_call, CallHeader};
use crate::wire::reply::{encode_status, ReplyStatus};

pub(super) fn add(seeds: &mut Seeds) {
    let record = record();
    // Valid calls: each function, routed or not, with and without a deadline.
    seeds.add("call-echo", call(&header(Echo::NAME, None, 1_000), "hello"));
    seeds.add(
        "call-echo-balancer",
        call(&header(Echo::NAME, Some("reports"), 10_000), "hi"),
    );
    seeds.add(
        "call-echo-max-deadline-and-id",
        call(
            &CallHeader {
                call_id: u64::MAX,
                raw_args: false,
                ..header(Echo::NAME, Some("b"), u64::MAX)
            },
            "x",
        ),
    );
    seeds.add("call-echo-empty", call(&header(Echo::NAME, None, 1), ""));
    seeds.add(
        "call-payload-echo",
        encode_call(
            &header(PayloadEcho::NAME, Some("b"), 1_000),
            &crate::Payload::from_slice(b"raw bytes"),
        )
        .unwrap(),
    );
    seeds.add(
        "call-payload-echo-empty",
        encode_call(&header(PayloadEcho::NAME, None, 1), &crate::Payload::new()).unwrap(),
    );
    seeds.add(
        "call-echo-over-payload-cap",
        call(&header(Echo::NAME, None, 1_000), &"y".repeat(1_500)),
    );
    seeds.add(
        "call-add",
        call(&header(Add::NAME, None, 500), &(1u32, 2u32)),
    );
    seeds.add(
        "call-add-overflow",
        call(&header(Add::NAME, None, 500), &(u32::MAX, 1u32)),
    );
    seeds.add("call-fail", call(&header(Fail::NAME, None, 500), "why"));
    seeds.add(
        "call-repeat",
        call(&header(Repeat::NAME, None, 500), &(b'r', 16u16)),
    );
    seeds.add(
        "call-repeat-over-payload-cap",
        call(&header(Repeat::NAME, None, 500), &(0u8, u16::MAX)),
    );
    seeds.add(
        "call-record",
        call(&header(RecordFn::NAME, None, 500), &record),
    );
    for (kind, value) in [
        ("plain", Kind::Plain),
        ("bytes", Kind::Bytes(vec![0, 1, 0xff])),
    ] {
        let record = Record {
            name: None,
            kind: value,
            ..record.clone()
        };
        seeds.add(
            &format!("call-record-{kind}"),
            call(&header(RecordFn::NAME, Some("r"), 500), &record),
        );
    }
    seeds.add(
        "call-unknown-function",
        call(&header("nope", None, 500), &()),
    );
    seeds.add(
        "call-empty-function-name",
        call(&header("", None, 500), &()),
    );
    seeds.add(
        "call-long-function-name",
        call(&header(&"f".repeat(3_000), None, 500), &()),
    );
    seeds.add(
        "call-long-balancer-name",
        call(&header(Echo::NAME, Some(&"b".repeat(3_000)), 500), "x"),
    );
    seeds.add(
        "call-echo-wrong-argument-type",
        call(&header(Echo::NAME, None, 500), &u64::MAX),
    );
    seeds.add(
        "call-echo-trailing-bytes",
        [call(&header(Echo::NAME, None, 500), "x"), vec![0xde, 0xad]].concat(),
    );
    seeds.add(
        "call-add-missing-argument",
        call(&header(Add::NAME, None, 500), &1u32),
    );
    // Casts: the same format, no deadline.
    seeds.add("cast-echo", call(&header(Echo::NAME, None, 0), "fire"));
    seeds.add(
        "cast-fail-balancer",
        call(&header(Fail::NAME, Some("reports"), 0), "and forget"),
    );
    // Every truncation of a valid call.
    let valid = call(&header(Echo::NAME, Some("b"), 1_000), "x");
    for len in 0..valid.len() {
        seeds.add(&format!("call-truncated-{len:02}"), valid[..len].to_vec());
    }
    // Other wire versions, and version varints that are odd or too long for a u16.
    for (name, v) in [
        ("0", &[0x00][..]),
        ("1", &[0x01]),
        ("3", &[0x03]),
        ("max", &[0xff, 0xff, 0x03]),
        ("non-canonical-1", &[0x81, 0x00]),
        ("over-u16", &[0xff, 0xff, 0x04]),
        ("unterminated", &[0xff, 0xff, 0xff, 0xff]),
    ] {
        seeds.add(&format!("version-{name}-call"), with_version(v, &valid));
    }
    seeds.add(
        "version-1-control",
        with_version(&[0x01], &control(&ControlRequest::Ping)),
    );
    seeds.add(
        "version-1-reply",
        with_version(&[0x01], &encode_status(&ReplyStatus::DeadlineExceeded)),
    );
}
