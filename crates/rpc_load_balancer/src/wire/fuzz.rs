//! Hostile input: decoding arbitrary bytes as a call, a reply or a control request never
//! panics — every outcome is a value or a typed error — and serving such bytes as a call
//! always produces a reply that decodes.

use proptest::prelude::*;

use super::header::decode_call;
use super::reply;
use crate::control::ControlRequest;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_call(&bytes);
        let _ = reply::decode(&bytes);
        if let Ok(body) = super::split_version(&bytes) {
            let _ = super::decode_control::<ControlRequest>(body);
        }
    }

    #[test]
    fn a_valid_prefix_with_garbage_after_it_is_still_handled(
        garbage in proptest::collection::vec(any::<u8>(), 0..64),
        cut in 0usize..64,
    ) {
        let header = super::header::CallHeader {
            function: "echo",
            balancer: Some("b"),
            deadline_ms: 1_000,
            call_id: 7,
            raw_args: false,
        };
        let mut bytes = super::header::encode_call(&header, &"x".to_string()).unwrap();
        bytes.truncate(cut.min(bytes.len()));
        bytes.extend_from_slice(&garbage);
        let _ = decode_call(&bytes);
        let _ = reply::decode(&bytes);
    }
}

#[tokio::test]
async fn serving_garbage_always_replies_with_a_decodable_status() {
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::TestRunner;
    let config = crate::NodeConfig::new("fuzz", "127.0.0.1:0").cookie("c");
    let shared = crate::node::shared::NodeShared::new(
        "fuzz@127.0.0.1".into(),
        "127.0.0.1:0".into(),
        None,
        &config,
    );
    let mut runner = TestRunner::deterministic();
    let strategy = proptest::collection::vec(any::<u8>(), 0..128);
    for _ in 0..2_000 {
        let bytes = strategy.new_tree(&mut runner).unwrap().current();
        let answer = crate::endpoint::serve_call(&shared.transport, bytes.clone()).await;
        assert!(
            reply::decode(&answer).is_ok(),
            "undecodable reply to {bytes:?}"
        );
    }
}

// ---- The kept corpus (`fuzz/corpus/wire/`): replayed here, as CI runs it. ----

/// Where the `wire` fuzz target's corpus lives.
fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wire")
}

/// Every file of the kept corpus (deliberate `seed-*` inputs and the fuzzer's minimized
/// findings) goes through the fuzz target's own check: no decoder panics, and serving it as a
/// call and as a control request replies with bytes that decode.
#[test]
fn corpus_replays_without_a_panic_and_every_reply_decodes() {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", corpus_dir().display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 50,
        "the corpus has only {} files: is {} there?",
        files.len(),
        corpus_dir().display()
    );
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let replayed = std::panic::catch_unwind(|| crate::__fuzz::wire(&bytes));
        assert!(replayed.is_ok(), "corpus file {} failed", path.display());
    }
}

/// The `seed-*` files on disk are the ones [`corpus_seeds`] makes: a change of the wire format
/// shows up here. Regenerate them with
/// `cargo test -p rpc_load_balancer --lib write_corpus_seeds -- --ignored`.
#[test]
fn corpus_seeds_are_current() {
    for (name, bytes) in corpus_seeds() {
        let path = corpus_dir().join(&name);
        let on_disk = std::fs::read(&path).unwrap_or_default();
        assert_eq!(
            on_disk, bytes,
            "{name} is missing or stale: run `cargo test -p rpc_load_balancer --lib \
             write_corpus_seeds -- --ignored`"
        );
    }
}

/// Rewrites the deliberate `seed-*` files of the corpus (leaves the fuzzer's findings alone).
#[test]
#[ignore = "writes into the source tree; run by hand to regenerate the seeds"]
fn write_corpus_seeds() {
    let dir = corpus_dir();
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let is_seed = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("seed-"));
        if is_seed {
            std::fs::remove_file(path).unwrap();
        }
    }
    for (name, bytes) in corpus_seeds() {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// The deliberate inputs: valid calls, casts, control requests and replies of every kind, then
/// the ways they go wrong (truncation, other versions, huge lengths, bad UTF-8, bad tags).
fn corpus_seeds() -> Vec<(String, Vec<u8>)> {
    use super::header::{encode_call, CallHeader};
    use super::{start_message, WIRE_VERSION};
    use crate::__fuzz::{Add, Echo, Fail, Kind, PayloadEcho, Record, RecordFn, Repeat};
    use crate::control::ControlReply;
    use crate::cpu::CpuReading;
    use crate::function::RemoteFunction;
    use reply::{encode_leaving, encode_ok, encode_status, ReplyStatus};

    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |name: &str, bytes: Vec<u8>| {
        assert!(
            !seeds.iter().any(|(n, _)| n == name),
            "duplicate seed {name}"
        );
        seeds.push((format!("seed-{name}"), bytes));
    };
    fn header<'a>(
        function: &'a str,
        balancer: Option<&'a str>,
        deadline_ms: u64,
    ) -> CallHeader<'a> {
        CallHeader {
            function,
            balancer,
            deadline_ms,
            call_id: 7,
            raw_args: false,
        }
    }
    fn call<A: serde::Serialize + ?Sized>(header: &CallHeader<'_>, args: &A) -> Vec<u8> {
        // As `encode_call` lays out a call of any argument type but `Payload`.
        let out = postcard::to_extend(args, start_message(16)).unwrap();
        super::push_trailer(out, header).unwrap()
    }
    fn control(request: &ControlRequest) -> Vec<u8> {
        postcard::to_extend(request, start_message(8)).unwrap()
    }
    /// `bytes` with its leading wire version replaced by the varint bytes `version`.
    fn with_version(version: &[u8], bytes: &[u8]) -> Vec<u8> {
        let mut out = version.to_vec();
        out.extend_from_slice(&bytes[1..]);
        out
    }
    let version = postcard::to_allocvec(&WIRE_VERSION).unwrap();
    let raw = |tail: &[u8]| [&version[..], tail].concat();
    // A call by hand: the version, `args`, then `header` bytes and their length (u32 LE).
    let framed = |args: &[u8], header: &[u8]| {
        let len = u32::try_from(header.len()).unwrap().to_le_bytes();
        [&version[..], args, header, &len].concat()
    };
    let record = Record {
        id: -42,
        name: Some("ünïcødé".into()),
        score: 2.5,
        flag: true,
        tags: vec![("a".into(), 1), ("b".into(), u64::MAX)],
        kind: Kind::Pair {
            left: '→',
            right: 9,
        },
    };

    // Valid calls: each function, routed or not, with and without a deadline.
    add("call-echo", call(&header(Echo::NAME, None, 1_000), "hello"));
    add(
        "call-echo-balancer",
        call(&header(Echo::NAME, Some("reports"), 10_000), "hi"),
    );
    add(
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
    add("call-echo-empty", call(&header(Echo::NAME, None, 1), ""));
    add(
        "call-payload-echo",
        encode_call(
            &header(PayloadEcho::NAME, Some("b"), 1_000),
            &crate::Payload::from_slice(b"raw bytes"),
        )
        .unwrap(),
    );
    add(
        "call-payload-echo-empty",
        encode_call(&header(PayloadEcho::NAME, None, 1), &crate::Payload::new()).unwrap(),
    );
    add(
        "call-echo-over-payload-cap",
        call(&header(Echo::NAME, None, 1_000), &"y".repeat(1_500)),
    );
    add(
        "call-add",
        call(&header(Add::NAME, None, 500), &(1u32, 2u32)),
    );
    add(
        "call-add-overflow",
        call(&header(Add::NAME, None, 500), &(u32::MAX, 1u32)),
    );
    add("call-fail", call(&header(Fail::NAME, None, 500), "why"));
    add(
        "call-repeat",
        call(&header(Repeat::NAME, None, 500), &(b'r', 16u16)),
    );
    add(
        "call-repeat-over-payload-cap",
        call(&header(Repeat::NAME, None, 500), &(0u8, u16::MAX)),
    );
    add(
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
        add(
            &format!("call-record-{kind}"),
            call(&header(RecordFn::NAME, Some("r"), 500), &record),
        );
    }
    add(
        "call-unknown-function",
        call(&header("nope", None, 500), &()),
    );
    add(
        "call-empty-function-name",
        call(&header("", None, 500), &()),
    );
    add(
        "call-long-function-name",
        call(&header(&"f".repeat(3_000), None, 500), &()),
    );
    add(
        "call-long-balancer-name",
        call(&header(Echo::NAME, Some(&"b".repeat(3_000)), 500), "x"),
    );
    add(
        "call-echo-wrong-argument-type",
        call(&header(Echo::NAME, None, 500), &u64::MAX),
    );
    add(
        "call-echo-trailing-bytes",
        [call(&header(Echo::NAME, None, 500), "x"), vec![0xde, 0xad]].concat(),
    );
    add(
        "call-add-missing-argument",
        call(&header(Add::NAME, None, 500), &1u32),
    );
    // Casts: the same format, no deadline.
    add("cast-echo", call(&header(Echo::NAME, None, 0), "fire"));
    add(
        "cast-fail-balancer",
        call(&header(Fail::NAME, Some("reports"), 0), "and forget"),
    );
    // Every truncation of a valid call.
    let valid = call(&header(Echo::NAME, Some("b"), 1_000), "x");
    for len in 0..valid.len() {
        add(&format!("call-truncated-{len:02}"), valid[..len].to_vec());
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
        add(&format!("version-{name}-call"), with_version(v, &valid));
    }
    add(
        "version-1-control",
        with_version(&[0x01], &control(&ControlRequest::Ping)),
    );
    add(
        "version-1-reply",
        with_version(&[0x01], &encode_status(&ReplyStatus::DeadlineExceeded)),
    );
    // Header lengths that do not fit the message, and a header followed by stray bytes.
    add(
        "trailer-length-over-body",
        raw(&[0x00, 0xff, 0x00, 0x00, 0x00]),
    );
    add("trailer-length-max", raw(&[0xff; 4]));
    add("trailer-length-zero", framed(b"x", &[]));
    add("trailer-too-short", raw(&[0x01, 0x00]));
    add(
        "header-stray-bytes",
        framed(
            &[0x01, b'x'],
            &[0x04, b'e', b'c', b'h', b'o', 0x00, 0x01, 0x07, 0x09],
        ),
    );
    // Huge varint lengths where a string, an option or a sequence starts.
    let huge32 = [0xff, 0xff, 0xff, 0xff, 0x0f];
    let huge64 = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    add(
        "huge-function-length-u32",
        framed(&[], &[&huge32[..], b"echo"].concat()),
    );
    add(
        "huge-function-length-u64",
        framed(&[], &[&huge64[..], b"echo"].concat()),
    );
    add(
        "huge-varint-overlong",
        framed(
            &[],
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
    );
    add(
        "huge-balancer-length",
        framed(&[], &[&[0x04][..], b"echo", &[0x01], &huge64].concat()),
    );
    add(
        "huge-deadline-varint-overlong",
        framed(&[], &[&[0x04][..], b"echo", &[0x00], &[0xff; 11]].concat()),
    );
    let echo_header = [&[0x04][..], b"echo", &[0x00, 0x01, 0x07]].concat();
    add("huge-echo-argument-length", framed(&huge64, &echo_header));
    let record_header = [&[0x06][..], b"record", &[0x00, 0x01, 0x07]].concat();
    add(
        "huge-record-tags-length",
        // id -1, name None, score 0.0, flag false, then the tags' length
        framed(
            &[&[0x01, 0x00][..], &[0; 8], &[0x00], &huge64].concat(),
            &record_header,
        ),
    );
    add(
        "record-bad-bool",
        framed(
            &[&[0x01, 0x00][..], &[0; 8], &[0x02]].concat(),
            &record_header,
        ),
    );
    add(
        "record-bad-enum-tag",
        framed(
            &[&[0x01, 0x00][..], &[0; 8], &[0x00, 0x00, 0x09]].concat(),
            &record_header,
        ),
    );
    add(
        "record-surrogate-char",
        framed(
            &[
                &[0x01, 0x00][..],
                &[0; 8],
                &[0x00, 0x00, 0x02, 0x03, 0xed, 0xa0, 0x80, 0x01],
            ]
            .concat(),
            &record_header,
        ),
    );
    // Invalid UTF-8 in the function name, the balancer name and a string argument.
    for (name, bad) in [
        ("lone-continuation", &[0x80][..]),
        ("truncated-sequence", &[0xc3, 0x28]),
        ("overlong-nul", &[0xc0, 0x80]),
        ("surrogate", &[0xed, 0xa0, 0x80]),
        ("over-max", &[0xf4, 0x90, 0x80, 0x80]),
    ] {
        let len = u8::try_from(bad.len()).unwrap();
        add(
            &format!("utf8-function-{name}"),
            framed(&[], &[&[len][..], bad, &[0x00, 0x00, 0x00]].concat()),
        );
        add(
            &format!("utf8-balancer-{name}"),
            framed(
                &[0x01, b'x'],
                &[&[0x04][..], b"echo", &[0x01, len], bad, &[0x00, 0x00]].concat(),
            ),
        );
        add(
            &format!("utf8-echo-argument-{name}"),
            framed(&[&[len][..], bad].concat(), &echo_header),
        );
    }
    add(
        "bad-option-tag",
        framed(&[], &[&[0x04][..], b"echo", &[0x02, 0x00, 0x00]].concat()),
    );
    // Tiny inputs.
    add("empty", Vec::new());
    add("version-only", version.clone());
    add("zero", vec![0x00]);
    add("all-ff", vec![0xff; 16]);
    add("all-zero", vec![0x00; 16]);

    // Every control request (remote admin is off on the fuzzed node: admin ones are refused).
    let list = Some(vec!["a@".to_string(), "@h".to_string()]);
    let requests = [
        ("ping", ControlRequest::Ping),
        ("nodes", ControlRequest::Nodes),
        ("functions", ControlRequest::Functions),
        ("stats", ControlRequest::Stats),
        (
            "connection-of",
            ControlRequest::ConnectionOf("a@127.0.0.1".into()),
        ),
        ("peers", ControlRequest::Peers),
        ("members", ControlRequest::Members("reports".into())),
        ("in-flight", ControlRequest::InFlight("reports".into())),
        (
            "start-balancer",
            ControlRequest::StartBalancer {
                name: "reports".into(),
                algorithm: "round_robin".into(),
                node_match_list: None,
            },
        ),
        (
            "start-balancer-match-list",
            ControlRequest::StartBalancer {
                name: "r".into(),
                algorithm: "no such algorithm".into(),
                node_match_list: list,
            },
        ),
        (
            "stop-balancer",
            ControlRequest::StopBalancer("reports".into()),
        ),
        (
            "stop-balancer-report",
            ControlRequest::StopBalancerReport("reports".into()),
        ),
        (
            "kill-load-balancer",
            ControlRequest::KillLoadBalancer("reports".into()),
        ),
        ("cpu-reading", ControlRequest::CpuReading),
        ("cpu-readings", ControlRequest::CpuReadings),
        (
            "crash-poller",
            ControlRequest::CrashPoller("reports".into()),
        ),
        ("served", ControlRequest::Served("reports".into())),
        ("leaving", ControlRequest::Leaving("a@127.0.0.1".into())),
        ("cancel", ControlRequest::Cancel(7)),
        ("cancel-max", ControlRequest::Cancel(u64::MAX)),
        ("cpu-selection", ControlRequest::CpuSelection),
        (
            "joined",
            ControlRequest::Joined {
                node: "a@127.0.0.1".into(),
                addr: "127.0.0.1:1".into(),
            },
        ),
    ];
    for (name, request) in &requests {
        add(&format!("control-{name}"), control(request));
    }
    let ping = control(&ControlRequest::Ping);
    add("control-unknown-variant", raw(&[0x7f]));
    add("control-unknown-variant-huge", raw(&huge64));
    add(
        "control-trailing-bytes",
        [ping.clone(), vec![0x01, 0x02]].concat(),
    );
    let members = control(&ControlRequest::Members("reports".into()));
    add(
        "control-members-truncated",
        members[..members.len() - 2].to_vec(),
    );
    add(
        "control-members-huge-length",
        raw(&[&[0x06][..], &huge64].concat()),
    );

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
    ];
    for (name, bytes) in statuses {
        add(&format!("reply-{name}"), bytes);
    }

    // A field of a newer release appended to a header, a status and a control request: skipped.
    let newer = postcard::to_allocvec(&Some((42u64, "a field of a newer release"))).unwrap();
    let x = postcard::to_allocvec("x").unwrap();
    let echo = postcard::to_allocvec(&header(Echo::NAME, Some("b"), 1_000)).unwrap();
    add(
        "appended-field-call-echo",
        framed(&x, &[&echo[..], &newer].concat()),
    );
    add(
        "appended-field-call-echo-cut",
        framed(&x, &[&echo[..], &newer[..3]].concat()),
    );
    add(
        "appended-field-reply-ok",
        framed(&x, &[&[0x00][..], &newer].concat()),
    );
    add(
        "appended-field-reply-failed",
        framed(&[], &[&[0x02, 0x03][..], b"why", &newer].concat()),
    );
    add(
        "appended-field-control-ping",
        [control(&ControlRequest::Ping), newer.clone()].concat(),
    );
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
    ];
    for (name, value) in &replies {
        add(&format!("reply-ok-{name}"), encode_ok(value).unwrap());
    }
    add("reply-ok-echo", encode_ok(&"hello".to_string()).unwrap());
    add(
        "reply-ok-payload",
        encode_ok(&crate::Payload::from_slice(b"payload")).unwrap(),
    );
    add("reply-ok-record", encode_ok(&record).unwrap());
    let failed = encode_status(&ReplyStatus::Failed("a message"));
    add(
        "reply-failed-truncated",
        failed[..failed.len() - 3].to_vec(),
    );
    seeds
}
