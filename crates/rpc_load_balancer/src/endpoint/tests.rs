use super::*;
use crate::control::CpuReading;
use crate::function::{FunctionError, RemoteFunction};
use crate::transport::{CpuReadings, NoPeers, TransportConfig, NO_CPU_READINGS};
use crate::wire::header::{encode_call, CallHeader};
use crate::wire::WIRE_VERSION;

/// What answers the control requests a [`TestNode`] is handed.
type Answer = fn(ControlRequest) -> BoxFuture<'static, Result<ControlReply, crate::Error>>;

/// A node as the serving side sees it: its transport state, and what answers the control
/// requests the serving side hands up.
struct TestNode {
    transport: Arc<Transport>,
    answer: Answer,
}

impl Serving for TestNode {
    fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    fn answer(
        self: Arc<Self>,
        request: ControlRequest,
    ) -> BoxFuture<'static, Result<ControlReply, crate::Error>> {
        (self.answer)(request)
    }
}

/// Answers every request handed up with `BadRequest` naming it.
fn refusing(request: ControlRequest) -> BoxFuture<'static, Result<ControlReply, crate::Error>> {
    Box::pin(async move {
        Err(crate::Error::BadRequest {
            node: String::new(),
            message: format!("not answered here: {request:?}"),
        })
    })
}

/// The node of `transport`, refusing the requests handed up.
fn node_of(transport: Transport) -> Arc<TestNode> {
    Arc::new(TestNode {
        transport: Arc::new(transport),
        answer: refusing,
    })
}

/// A transport state named `name@127.0.0.1` with `config` and no peers.
fn transport_named(name: &str, config: TransportConfig) -> Transport {
    Transport::new(format!("{name}@127.0.0.1"), config, Arc::new(NoPeers))
}

/// Replies with its argument (also the call pipeline's tests' function).
pub(crate) struct Echo;
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

fn shared() -> Transport {
    let config = TransportConfig {
        max_payload_bytes: 1024,
        ..TransportConfig::default()
    };
    let shared = transport_named("t", config);
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
            trace: None,
        },
        args,
    )
    .unwrap()
}

async fn status_of(shared: &Transport, bytes: &[u8]) -> (String, Vec<u8>) {
    let reply = serve_call(shared, bytes.to_vec()).await;
    let (status, value) = reply::decode(&reply).unwrap();
    (format!("{status:?}"), value.to_vec())
}

/// Serves `request` and decodes the reply as a caller would.
async fn control_of(
    shared: &Arc<TestNode>,
    request: &ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
    decode_control(shared, serve_control(shared, &bytes).await)
}

/// Decodes a control reply of `shared` as a caller would.
fn decode_control(shared: &Arc<TestNode>, reply: Vec<u8>) -> Result<ControlReply, crate::Error> {
    crate::call::decode_reply(
        &shared.transport.name,
        "control",
        reply,
        std::time::Duration::from_secs(1),
    )
}

mod calls;
mod context;
mod control;
mod cpu;
mod pushback;
