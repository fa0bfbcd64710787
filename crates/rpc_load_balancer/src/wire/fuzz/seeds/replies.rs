//! Every reply status, an Ok reply of each control reply and of the functions' values, and a
//! truncated reply.

use super::{call, framed, header, record, Seeds};
use crate::__fuzz::Echo;
use crate::control::ControlReply;
use crate::cpu::CpuReading;
use crate::function::RemoteFunction;
use crate::load::LoadReport;
use crate::wire::reply::{
    encode_leaving, encode_ok, encode_refused, encode_status, Refusal, ReplyStatus,
};
use crate::wire::WIRE_VERSION;

pub(super) fn add(seeds: &mut Seeds) {
    // Every reply status, and an Ok reply of each control reply.
    let statuses = [
        ("ok-unit", encode_ok(&()).unwrap()),
        (
            "bad-request",
            encode_status(&ReplyStatus::BadRequest("unknown function")),
        ),
        ("failed", encode_status(&ReplyStatus::Failed("nope"))),
        ("panicked", encode_status(&ReplyStatus::Panicked("boom"))),
        (
            "wire-version",
            encode_status(&ReplyStatus::WireVersion { remote: u16::MAX }),
        ),
        (
            "payload-too-large",
            encode_status(&ReplyStatus::PayloadTooLarge {
                size: u64::MAX,
                limit: 1024,
            }),
        ),
        (
            "deadline-exceeded",
            encode_status(&ReplyStatus::DeadlineExceeded),
        ),
        ("leaving", encode_status(&ReplyStatus::Leaving)),
        ("unknown-status", framed(&[], &[0x63])),
        ("ok-garbage-value", framed(&[0xff; 6], &[0x00])),
        (
            "leaving-with-call",
            encode_leaving(call(&header(Echo::NAME, Some("b"), 9), "x")),
        ),
        // Pushback: the call handed back with the node's load report and the reason.
        (
            "leaving-overloaded",
            encode_refused(
                call(&header(Echo::NAME, Some("b"), 9), "x"),
                &LoadReport::default(),
                Refusal::Overloaded,
            ),
        ),
        (
            "leaving-drained-with-report",
            encode_refused(
                call(&header(Echo::NAME, None, 9), "x"),
                &LoadReport::default(),
                Refusal::Leaving,
            ),
        ),
    ];
    for (name, bytes) in statuses {
        seeds.add(&format!("reply-{name}"), bytes);
    }

    let reading = CpuReading {
        cpu: 12.5,
        age_ms: 300,
    };
    let replies = [
        (
            "pong",
            ControlReply::Pong {
                node: "a@127.0.0.1".into(),
                wire_version: WIRE_VERSION,
            },
        ),
        (
            "nodes",
            ControlReply::Nodes(vec!["a@h".into(), "b@h".into()]),
        ),
        ("functions", ControlReply::Functions(vec!["echo".into()])),
        (
            "stats",
            ControlReply::Stats {
                served_in_flight: 1,
                served_total: u64::MAX,
            },
        ),
        (
            "connection-of",
            ControlReply::ConnectionOf(Some("h:1".into())),
        ),
        ("members", ControlReply::Members(Some(vec!["a@h".into()]))),
        ("done", ControlReply::Done),
        (
            "peers",
            ControlReply::Peers(vec![("a@h".into(), "h:1".into())]),
        ),
        (
            "in-flight",
            ControlReply::InFlight(Some(vec![("a@h".into(), 3)])),
        ),
        ("cpu-reading", ControlReply::CpuReading(Some(reading))),
        (
            "cpu-reading-nan",
            ControlReply::CpuReading(Some(CpuReading {
                cpu: f64::NAN,
                age_ms: u64::MAX,
            })),
        ),
        (
            "cpu-readings",
            ControlReply::CpuReadings(vec![("a@h".into(), reading)]),
        ),
        ("served", ControlReply::Served(None)),
        (
            "cpu-selection",
            ControlReply::CpuSelection(vec![("work".into(), vec![("a@h".into(), 50.0)])]),
        ),
        (
            "stopped",
            ControlReply::Stopped(crate::DrainReport {
                balancer: "work".into(),
                outcome: crate::DrainOutcome::TimedOut,
                routed_in_flight: 2,
                served_in_flight: 1,
                took: std::time::Duration::from_millis(1500),
            }),
        ),
        (
            "load-report",
            ControlReply::LoadReport(crate::LoadReport {
                qps: 120,
                cpu: Some(40.0),
                ..crate::LoadReport::default()
            }),
        ),
        (
            "directory",
            ControlReply::Directory(vec![super::control::directory_entry()]),
        ),
        (
            "gossip-delta",
            ControlReply::GossipDelta {
                entries: vec![super::control::directory_entry()],
                beats: vec![crate::control::DigestItem::of(
                    &super::control::directory_entry(),
                )],
                wants: vec!["b@127.0.0.1".into()],
            },
        ),
    ];
    for (name, value) in &replies {
        seeds.add(&format!("reply-ok-{name}"), encode_ok(value).unwrap());
    }
    seeds.add("reply-ok-echo", encode_ok(&"hello".to_string()).unwrap());
    seeds.add(
        "reply-ok-payload",
        encode_ok(&crate::Payload::from_slice(b"payload")).unwrap(),
    );
    seeds.add("reply-ok-record", encode_ok(&record()).unwrap());
    let failed = encode_status(&ReplyStatus::Failed("a message"));
    seeds.add(
        "reply-failed-truncated",
        failed[..failed.len() - 3].to_vec(),
    );
}
