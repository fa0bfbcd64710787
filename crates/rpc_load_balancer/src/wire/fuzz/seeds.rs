//! The deliberate `seed-*` inputs of the `wire` fuzz target's corpus: valid calls, casts,
//! control requests and replies of every kind, then the ways they go wrong (truncation, other
//! versions, huge lengths, bad UTF-8, bad tags). Each kind of input is made in its own module;
//! this one collects them and holds the helpers they share.

mod appended;
mod calls;
mod control;
mod malformed;
mod replies;

use crate::__fuzz::{Kind, Record};
use crate::control::ControlRequest;
use crate::wire::header::CallHeader;
use crate::wire::{push_trailer, start_message, WIRE_VERSION};

/// A varint length of `u32::MAX`.
const HUGE32: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x0f];
/// A varint length of `u64::MAX`.
const HUGE64: [u8; 10] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];

/// The seeds made so far: file name (`seed-NAME`) and bytes.
#[derive(Default)]
struct Seeds(Vec<(String, Vec<u8>)>);

impl Seeds {
    /// Adds the seed `seed-{name}`; panics on a name given twice.
    fn add(&mut self, name: &str, bytes: Vec<u8>) {
        let name = format!("seed-{name}");
        assert!(
            !self.0.iter().any(|(n, _)| *n == name),
            "duplicate seed {name}"
        );
        self.0.push((name, bytes));
    }
}

/// Every deliberate input, as (file name, bytes).
pub(super) fn corpus_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Seeds::default();
    calls::add(&mut seeds);
    malformed::add(&mut seeds);
    control::add(&mut seeds);
    replies::add(&mut seeds);
    appended::add(&mut seeds);
    seeds.0
}

/// A call header for `function` with call id 7.
fn header<'a>(function: &'a str, balancer: Option<&'a str>, deadline_ms: u64) -> CallHeader<'a> {
    CallHeader {
        function,
        balancer,
        deadline_ms,
        call_id: 7,
        raw_args: false,
        trace: None,
    }
}

/// A call of `args` under `header`.
fn call<A: serde::Serialize + ?Sized>(header: &CallHeader<'_>, args: &A) -> Vec<u8> {
    // As `encode_call` lays out a call of any argument type but `Payload`.
    let out = postcard::to_extend(args, start_message(16)).unwrap();
    push_trailer(out, header).unwrap()
}

/// A control request as sent.
fn control(request: &ControlRequest) -> Vec<u8> {
    postcard::to_extend(request, start_message(8)).unwrap()
}

/// `bytes` with its leading wire version replaced by the varint bytes `version`.
fn with_version(version: &[u8], bytes: &[u8]) -> Vec<u8> {
    let mut out = version.to_vec();
    out.extend_from_slice(&bytes[1..]);
    out
}

/// This release's wire version, as its varint bytes.
fn version() -> Vec<u8> {
    postcard::to_allocvec(&WIRE_VERSION).unwrap()
}

/// The wire version, then `tail`.
fn raw(tail: &[u8]) -> Vec<u8> {
    [&version()[..], tail].concat()
}

/// A call by hand: the version, `args`, then `header` bytes and their length (u32 LE).
fn framed(args: &[u8], header: &[u8]) -> Vec<u8> {
    let len = u32::try_from(header.len()).unwrap().to_le_bytes();
    [&version()[..], args, header, &len].concat()
}

/// A record with every field set, for the `record` function.
fn record() -> Record {
    Record {
        id: -42,
        name: Some("ünïcødé".into()),
        score: 2.5,
        flag: true,
        tags: vec![("a".into(), 1), ("b".into(), u64::MAX)],
        kind: Kind::Pair {
            left: '→',
            right: 9,
        },
    }
}
