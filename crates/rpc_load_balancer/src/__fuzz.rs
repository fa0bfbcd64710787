//! Entry point of the `wire` fuzz target (`fuzz/` beside this crate) and of the corpus replay
//! test. **Not public API**: compiled only with the off-by-default `fuzzing` feature (and in
//! this crate's own tests), and free to change at any time.
//!
//! [`wire`] feeds one input to every decoder of bytes that come from another node — call
//! header, reply envelope (and the caller's decoding of the value after it), control request
//! — and serves it both as a call and as a control request on a fresh node state. It panics
//! only when something is wrong: a decoder panicked, or a reply the node produced does not
//! decode, or does not say what went wrong with the request.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::call::decode_reply;
use crate::control::{ControlReply, ControlRequest};
use crate::endpoint::{serve_call, serve_control};
use crate::function::{FunctionError, RemoteFunction};
use crate::node::shared::NodeShared;
use crate::node::NodeConfig;
use crate::payload::Payload;
use crate::wire::header::decode_call;
use crate::wire::reply::{self, ReplyStatus};
use crate::wire::{split_version, DecodeError};

/// The caller's timeout the decoded replies report (any value: nothing waits).
const FUZZ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// The payload cap of the fuzzed node: small, so replies over it are reachable.
pub const MAX_PAYLOAD: usize = 1024;

/// Checks one input: every decoder returns a value or a typed error, and serving it as a call
/// and as a control request replies with bytes that decode. Panics on a violation.
pub fn wire(bytes: &[u8]) {
    runtime().block_on(check(bytes));
}

/// [`wire`], on the caller's runtime.
pub async fn check(bytes: &[u8]) {
    decode_everything(bytes);
    let shared = Arc::new(fuzzed_node());
    check_call_reply(bytes, &serve_call(&shared.transport, bytes.to_vec()).await);
    check_control_reply(bytes, &serve_control(&shared, bytes).await);
}

/// One runtime for every input: building one per input would dominate the fuzzer's time.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime builds")
    })
}

/// Runs every decoder on `bytes`; their results are values or typed errors by construction,
/// so only a panic inside one can fail here.
fn decode_everything(bytes: &[u8]) {
    let _ = decode_call(bytes);
    let _ = reply::decode(bytes);
    // The caller's side of a reply, for value types of several shapes.
    let _ = decode_reply::<ControlReply>("fuzz", "control", bytes.to_vec(), FUZZ_TIMEOUT);
    let _ = decode_reply::<String>("fuzz", Echo::NAME, bytes.to_vec(), FUZZ_TIMEOUT);
    let _ = decode_reply::<Record>("fuzz", RecordFn::NAME, bytes.to_vec(), FUZZ_TIMEOUT);
    let _ = decode_reply::<Vec<u8>>("fuzz", Repeat::NAME, bytes.to_vec(), FUZZ_TIMEOUT);
    let _ = decode_reply::<()>("fuzz", Fail::NAME, bytes.to_vec(), FUZZ_TIMEOUT);
    let _ = decode_reply::<Payload>("fuzz", PayloadEcho::NAME, bytes.to_vec(), FUZZ_TIMEOUT);
    if let Ok(body) = split_version(bytes) {
        let _ = crate::wire::decode_control::<ControlRequest>(body);
    }
}

/// The reply to `bytes` served as a call decodes, says why a bad request was refused, and an
/// `Ok` value decodes as the called function's reply type.
fn check_call_reply(bytes: &[u8], answer: &[u8]) {
    let status = match reply::decode(answer) {
        Ok((status, _)) => status,
        Err(e) => panic!("undecodable reply {answer:?} to call {bytes:?}: {e}"),
    };
    let header = match decode_call(bytes) {
        Ok((header, _)) => header,
        Err(DecodeError::Version(remote)) => {
            assert_eq!(
                status,
                ReplyStatus::WireVersion { remote },
                "call {bytes:?}"
            );
            return;
        }
        Err(DecodeError::Malformed(_)) => {
            assert!(
                matches!(status, ReplyStatus::BadRequest(_)),
                "malformed call {bytes:?} answered {status:?}"
            );
            return;
        }
    };
    if !status.is_ok() {
        return;
    }
    let decoded = match header.function {
        Echo::NAME => {
            decode_reply::<String>("fuzz", Echo::NAME, answer.to_vec(), FUZZ_TIMEOUT).map(drop)
        }
        Add::NAME => {
            decode_reply::<u32>("fuzz", Add::NAME, answer.to_vec(), FUZZ_TIMEOUT).map(drop)
        }
        Repeat::NAME => {
            decode_reply::<Vec<u8>>("fuzz", Repeat::NAME, answer.to_vec(), FUZZ_TIMEOUT).map(drop)
        }
        RecordFn::NAME => {
            decode_reply::<Record>("fuzz", RecordFn::NAME, answer.to_vec(), FUZZ_TIMEOUT).map(drop)
        }
        PayloadEcho::NAME => {
            decode_reply::<Payload>("fuzz", PayloadEcho::NAME, answer.to_vec(), FUZZ_TIMEOUT)
                .map(drop)
        }
        other => panic!("`{other}` is not served, yet call {bytes:?} was answered Ok"),
    };
    if let Err(e) = decoded {
        panic!("Ok reply {answer:?} to call {bytes:?} does not decode: {e}");
    }
}

/// The reply to `bytes` served as a control request decodes, and an `Ok` value decodes as a
/// [`ControlReply`].
fn check_control_reply(bytes: &[u8], answer: &[u8]) {
    let status = match reply::decode(answer) {
        Ok((status, _)) => status,
        Err(e) => panic!("undecodable reply {answer:?} to control request {bytes:?}: {e}"),
    };
    match split_version(bytes) {
        Err(DecodeError::Version(remote)) => {
            assert_eq!(
                status,
                ReplyStatus::WireVersion { remote },
                "control {bytes:?}"
            );
        }
        Err(DecodeError::Malformed(_)) => assert!(
            matches!(status, ReplyStatus::BadRequest(_)),
            "malformed control request {bytes:?} answered {status:?}"
        ),
        Ok(_) if status.is_ok() => {
            if let Err(e) =
                decode_reply::<ControlReply>("fuzz", "control", answer.to_vec(), FUZZ_TIMEOUT)
            {
                panic!("Ok reply {answer:?} to control request {bytes:?} does not decode: {e}");
            }
        }
        Ok(_) => {}
    }
}

/// A node state as the endpoint sees it (no actors, no network), with a few functions of
/// different argument shapes. Remote admin stays off: with it on, a fuzzed `StartBalancer`
/// would start actors, which this harness does not run.
fn fuzzed_node() -> NodeShared {
    let config = NodeConfig::new("fuzz", "127.0.0.1:0")
        .cookie("fuzz")
        .max_payload_bytes(MAX_PAYLOAD);
    let shared = NodeShared::new("fuzz@127.0.0.1".into(), "127.0.0.1:0".into(), None, &config)
        .with_balancer_admin(crate::balancer::admin::answer);
    let registered = [
        shared.transport.registry.register(Echo),
        shared.transport.registry.register(Add),
        shared.transport.registry.register(Fail),
        shared.transport.registry.register(Repeat),
        shared.transport.registry.register(RecordFn),
        shared.transport.registry.register(PayloadEcho),
    ];
    assert!(registered.iter().all(Result::is_ok), "names are distinct");
    shared
}

/// Replies with its argument.
pub struct Echo;
impl RemoteFunction for Echo {
    const NAME: &'static str = "echo";
    type Args = String;
    type Reply = String;
    async fn call(&self, text: String) -> Result<String, FunctionError> {
        Ok(text)
    }
}

/// Adds two numbers; fails on overflow.
pub struct Add;
impl RemoteFunction for Add {
    const NAME: &'static str = "add";
    type Args = (u32, u32);
    type Reply = u32;
    async fn call(&self, (a, b): (u32, u32)) -> Result<u32, FunctionError> {
        a.checked_add(b)
            .ok_or_else(|| FunctionError::new("overflow"))
    }
}

/// Always fails with its argument as the message.
pub struct Fail;
impl RemoteFunction for Fail {
    const NAME: &'static str = "fail";
    type Args = String;
    type Reply = ();
    async fn call(&self, why: String) -> Result<(), FunctionError> {
        Err(FunctionError::new(why))
    }
}

/// `count` copies of `byte` (a large count makes a reply over [`MAX_PAYLOAD`]).
pub struct Repeat;
impl RemoteFunction for Repeat {
    const NAME: &'static str = "repeat";
    type Args = (u8, u16);
    type Reply = Vec<u8>;
    async fn call(&self, (byte, count): (u8, u16)) -> Result<Vec<u8>, FunctionError> {
        Ok(vec![byte; usize::from(count)])
    }
}

/// Replies with its argument, a [`Payload`] (the zero-copy path).
pub struct PayloadEcho;
impl RemoteFunction for PayloadEcho {
    const NAME: &'static str = "payload_echo";
    type Args = Payload;
    type Reply = Payload;
    async fn call(&self, payload: Payload) -> Result<Payload, FunctionError> {
        Ok(payload)
    }
}

/// Replies with its argument: a value of many serde shapes.
pub struct RecordFn;
impl RemoteFunction for RecordFn {
    const NAME: &'static str = "record";
    type Args = Record;
    type Reply = Record;
    async fn call(&self, record: Record) -> Result<Record, FunctionError> {
        Ok(record)
    }
}

/// The argument and reply of [`RecordFn`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// A signed varint.
    pub id: i64,
    /// An optional string.
    pub name: Option<String>,
    /// A float (any bit pattern decodes).
    pub score: f64,
    /// A bool (only 0 and 1 decode).
    pub flag: bool,
    /// A sequence of tuples.
    pub tags: Vec<(String, u64)>,
    /// An enum.
    pub kind: Kind,
}

/// The enum inside a [`Record`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Kind {
    /// A unit variant.
    Plain,
    /// A newtype variant.
    Bytes(Vec<u8>),
    /// A struct variant.
    Pair {
        /// A char (a scalar value, not a surrogate).
        left: char,
        /// A fixed-width field.
        right: u16,
    },
}
