//! The serving side, without a network: calls and control requests served from bytes. The
//! functions and helpers here are shared by the tests in `tests/`, one file per concept.

mod calls;
mod context;
mod control;
mod cpu;

use super::*;
use crate::function::{FunctionError, RemoteFunction};
use crate::node::NodeConfig;
use crate::wire::header::{encode_call, CallHeader};
use crate::wire::WIRE_VERSION;

struct Echo;
impl RemoteFunction for Echo {
    const NAME: &'static str = "echo";
    type Args = String;
    type Reply = String;
    async fn call(&self, args: String) -> Result<String, FunctionError> {
        Ok(args)
    }
}

struct Fail;
impl RemoteFunction for Fail {
    const NAME: &'static str = "fail";
    type Args = String;
    type Reply = ();
    async fn call(&self, args: String) -> Result<(), FunctionError> {
        Err(FunctionError::new(args))
    }
}

struct Panic;
impl RemoteFunction for Panic {
    const NAME: &'static str = "panic";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        panic!("deliberate panic")
    }
}

/// Replies with `n` bytes of text.
struct Amplify;
impl RemoteFunction for Amplify {
    const NAME: &'static str = "amplify";
    type Args = usize;
    type Reply = String;
    async fn call(&self, n: usize) -> Result<String, FunctionError> {
        Ok("x".repeat(n))
    }
}

struct Sleep;
impl RemoteFunction for Sleep {
    const NAME: &'static str = "sleep";
    type Args = u64;
    type Reply = ();
    async fn call(&self, ms: u64) -> Result<(), FunctionError> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    }
}

fn shared() -> NodeShared {
    let config = NodeConfig::new("t", "127.0.0.1:0")
        .cookie("c")
        .max_payload_bytes(1024);
    let shared = NodeShared::new("t@127.0.0.1".into(), "127.0.0.1:0".into(), None, &config);
    shared.registry.register(Echo).unwrap();
    shared.registry.register(Fail).unwrap();
    shared.registry.register(Panic).unwrap();
    shared.registry.register(Sleep).unwrap();
    shared.registry.register(Amplify).unwrap();
    shared
}

fn call<A: serde::Serialize + 'static>(function: &str, deadline_ms: u64, args: &A) -> Vec<u8> {
    encode_call(
        &CallHeader {
            function,
            balancer: None,
            deadline_ms,
            call_id: 1,
            raw_args: false,
        },
        args,
    )
    .unwrap()
}

async fn status_of(shared: &NodeShared, bytes: &[u8]) -> (String, Vec<u8>) {
    let reply = serve_call(shared, bytes.to_vec()).await;
    let (status, value) = reply::decode(&reply).unwrap();
    (format!("{status:?}"), value.to_vec())
}

/// A node's shared state named `name@127.0.0.1`, built from `config`.
fn shared_named(name: &str, config: NodeConfig) -> Arc<NodeShared> {
    Arc::new(NodeShared::new(
        format!("{name}@127.0.0.1"),
        "127.0.0.1:0".into(),
        None,
        &config,
    ))
}

/// Serves `request` and decodes the reply as a caller would.
async fn control_of(
    shared: &Arc<NodeShared>,
    request: &ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
    decode_control(shared, serve_control(shared, &bytes).await)
}

/// Serves `request` as a node built without the `test-hooks` feature would, and decodes the
/// reply as a caller would.
async fn control_without_hooks(
    shared: &Arc<NodeShared>,
    request: &ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
    decode_control(shared, answer_control(shared, &bytes, false).await)
}

/// Decodes a control reply of `shared` as a caller would.
fn decode_control(shared: &Arc<NodeShared>, reply: Vec<u8>) -> Result<ControlReply, crate::Error> {
    crate::call::decode_reply(
        &shared.name,
        "control",
        reply,
        std::time::Duration::from_secs(1),
    )
}
