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

#[tokio::test]
async fn echo_replies_ok() {
    let shared = shared();
    let (status, value) = status_of(&shared, &call("echo", 1000, &"hi".to_string())).await;
    assert_eq!(status, "Ok");
    assert_eq!(postcard::from_bytes::<String>(&value).unwrap(), "hi");
    assert_eq!(shared.served.in_flight.load(Ordering::Relaxed), 0);
    assert_eq!(shared.served.total.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn unknown_function_and_bad_arguments_are_bad_requests() {
    let shared = shared();
    let (status, _) = status_of(&shared, &call("nope", 1000, &())).await;
    assert!(
        status.starts_with("BadRequest(\"unknown function `nope`"),
        "{status}"
    );
    // invalid UTF-8 where a String is expected
    let (status, _) = status_of(&shared, &call("echo", 1000, &vec![0xc3u8, 0x28])).await;
    assert!(
        status.starts_with("BadRequest(\"cannot decode arguments of `echo`"),
        "{status}"
    );
    let (status, _) = status_of(&shared, &[crate::WIRE_VERSION as u8, 0xff]).await;
    assert!(status.starts_with("BadRequest"), "{status}");
}

#[tokio::test]
async fn errors_and_panics_are_replied_and_serving_continues() {
    let shared = shared();
    let (status, _) = status_of(&shared, &call("fail", 1000, &"no disk".to_string())).await;
    assert_eq!(status, "Failed(\"no disk\")");
    let (status, _) = status_of(&shared, &call("panic", 1000, &())).await;
    assert_eq!(status, "Panicked(\"deliberate panic\")");
    let (status, _) = status_of(&shared, &call("echo", 1000, &"after".to_string())).await;
    assert_eq!(status, "Ok");
    assert_eq!(shared.served.in_flight.load(Ordering::Relaxed), 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_deadline_is_stopped() {
    let shared = shared();
    let (status, _) = status_of(&shared, &call("sleep", 50, &10_000u64)).await;
    assert_eq!(status, "DeadlineExceeded");
    assert_eq!(shared.served.in_flight.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn oversized_reply_becomes_payload_too_large() {
    let shared = shared();
    let (status, _) = status_of(&shared, &call("amplify", 1000, &2000usize)).await;
    assert!(status.starts_with("PayloadTooLarge { size: 20"), "{status}");
    assert!(status.ends_with("limit: 1024 }"), "{status}");
}

/// A caller with a larger cap may send more than this node accepts: the call is refused
/// before the function runs (`fail` would answer Failed if it ran).
#[tokio::test]
async fn a_call_over_this_nodes_cap_is_refused_unrun() {
    let shared = shared();
    let (status, _) = status_of(&shared, &call("fail", 1000, &"x".repeat(2000))).await;
    assert!(status.starts_with("BadRequest"), "{status}");
    assert!(
        status.contains("exceeds this node's max_payload_bytes of 1024; not run"),
        "{status}"
    );
    // Just under the cap, it runs.
    let (status, _) = status_of(&shared, &call("fail", 1000, &"x".repeat(900))).await;
    assert!(status.starts_with("Failed"), "{status}");
}

#[tokio::test]
async fn another_wire_version_is_answered_not_dropped() {
    let shared = shared();
    let mut bytes = postcard::to_allocvec(&(WIRE_VERSION + 1)).unwrap();
    bytes.extend_from_slice(&call("echo", 1000, &"x".to_string())[1..]);
    let (status, _) = status_of(&shared, &bytes).await;
    assert_eq!(
        status,
        format!("WireVersion {{ remote: {} }}", WIRE_VERSION + 1)
    );
    let reply = serve_control(&node_of(shared), &bytes).await;
    assert!(matches!(
        reply::decode(&reply).unwrap().0,
        ReplyStatus::WireVersion { .. }
    ));
}

#[tokio::test]
async fn control_requests_are_answered() {
    let shared = node_of(shared());
    let request =
        postcard::to_extend(&ControlRequest::Functions, crate::wire::start_message(8)).unwrap();
    let reply = serve_control(&shared, &request).await;
    let (status, value) = reply::decode(&reply).unwrap();
    assert_eq!(status, ReplyStatus::Ok);
    let answer: ControlReply = postcard::from_bytes(value).unwrap();
    assert_eq!(
        answer,
        ControlReply::Functions(vec![
            "amplify".into(),
            "echo".into(),
            "fail".into(),
            "panic".into(),
            "sleep".into()
        ])
    );
    let garbage = serve_control(&shared, &[crate::WIRE_VERSION as u8, 0x63]).await;
    assert!(matches!(
        reply::decode(&garbage).unwrap().0,
        ReplyStatus::BadRequest(_)
    ));
}

/// Serves `request` and decodes the reply as a caller would.
async fn control_of(
    shared: &Arc<TestNode>,
    request: &ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
    decode_control(shared, serve_control(shared, &bytes).await)
}

/// Serves `request` as a node built without the `test-hooks` feature would, and decodes the
/// reply as a caller would.
async fn control_without_hooks(
    shared: &Arc<TestNode>,
    request: &ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
    decode_control(shared, answer_control(shared, &bytes, false).await)
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

/// A node named `name@127.0.0.1` whose CPU readings are `readings` (in place of the
/// process's cache, which the node gives a started node's serving side).
fn shared_reading(name: &str, config: TransportConfig, readings: CpuReadings) -> Arc<TestNode> {
    let mut transport = transport_named(name, config);
    transport.cpu_readings = readings;
    node_of(transport)
}

/// No CPU reading at all.
const NO_READINGS: CpuReadings = NO_CPU_READINGS;

/// 37.5 % (20 ms old) for the node `cpu-answer@127.0.0.1`, none for any other.
const A_READING: CpuReadings = CpuReadings {
    own: |node| {
        (node == "cpu-answer@127.0.0.1").then_some(CpuReading {
            cpu: 37.5,
            age_ms: 20,
        })
    },
    all: || {
        vec![(
            "cpu-answer@127.0.0.1".to_string(),
            CpuReading {
                cpu: 37.5,
                age_ms: 20,
            },
        )]
    },
};

/// 10 % (fresh) for every node.
const TEN_PERCENT: CpuReadings = CpuReadings {
    own: |_| {
        Some(CpuReading {
            cpu: 10.0,
            age_ms: 0,
        })
    },
    all: Vec::new,
};

#[tokio::test]
async fn cpu_readings_are_answered_without_remote_admin() {
    let config = TransportConfig::default();
    let none = shared_reading("cpu-answer", config.clone(), NO_READINGS);
    assert!(!none.transport.config.remote_admin);
    assert_eq!(
        control_of(&none, &ControlRequest::CpuReading).await,
        Ok(ControlReply::CpuReading(None)),
        "no reading yet"
    );
    let shared = shared_reading("cpu-answer", config, A_READING);
    match control_of(&shared, &ControlRequest::CpuReading).await {
        Ok(ControlReply::CpuReading(Some(reading))) => {
            assert_eq!(reading.cpu, 37.5);
            assert!(reading.age_ms >= 20, "{reading:?}");
        }
        other => panic!("expected a reading, got {other:?}"),
    }
    match control_of(&shared, &ControlRequest::CpuReadings).await {
        Ok(ControlReply::CpuReadings(readings)) => {
            let own = readings
                .iter()
                .find(|(node, _)| *node == shared.transport.name);
            assert_eq!(own.map(|(_, r)| r.cpu), Some(37.5), "{readings:?}");
        }
        other => panic!("expected readings, got {other:?}"),
    }
}

#[tokio::test]
async fn a_garbage_cpu_reply_is_a_codec_error_on_the_caller() {
    let config = TransportConfig {
        cpu_reply_garbage: true,
        ..TransportConfig::default()
    };
    let shared = shared_reading("cpu-garbage", config, TEN_PERCENT);
    match control_of(&shared, &ControlRequest::CpuReading).await {
        Err(crate::Error::Codec { function, message }) => {
            assert_eq!(function, "control");
            assert!(message.contains("does not decode"), "{message}");
        }
        other => panic!("expected a codec error, got {other:?}"),
    }
    // Only the CPU reading is garbled.
    assert!(matches!(
        control_of(&shared, &ControlRequest::Ping).await,
        Ok(ControlReply::Pong { .. })
    ));
    assert!(matches!(
        control_of(&shared, &ControlRequest::CpuReadings).await,
        Ok(ControlReply::CpuReadings(_))
    ));
}

#[tokio::test]
async fn an_error_cpu_reply_is_a_remote_error_on_the_caller() {
    let config = TransportConfig {
        cpu_reply_error: true,
        ..TransportConfig::default()
    };
    let shared = shared_reading("cpu-error", config, TEN_PERCENT);
    match control_of(&shared, &ControlRequest::CpuReading).await {
        Err(crate::Error::Remote {
            function,
            failure,
            message,
            ..
        }) => {
            assert_eq!(function, "control");
            assert_eq!(failure, crate::RemoteFailure::Failed);
            assert_eq!(message, super::CPU_REPLY_ERROR);
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    // Only the CPU reading fails.
    assert!(matches!(
        control_of(&shared, &ControlRequest::CpuReadings).await,
        Ok(ControlReply::CpuReadings(_))
    ));
}

/// A node's handler that answers every request with `Members([the request])`.
fn echoing_admin(
    request: ControlRequest,
) -> BoxFuture<'static, Result<ControlReply, crate::Error>> {
    Box::pin(async move { Ok(ControlReply::Members(Some(vec![format!("{request:?}")]))) })
}

#[tokio::test]
async fn balancer_requests_reach_the_nodes_balancer_admin_after_the_admin_check() {
    let anyone = [
        ControlRequest::InFlight("b".into()),
        ControlRequest::Members("b".into()),
        ControlRequest::Served("b".into()),
        ControlRequest::CpuSelection,
    ];
    let admin = [
        ControlRequest::StartBalancer {
            name: "b".into(),
            algorithm: "random".into(),
            node_match_list: None,
        },
        ControlRequest::StopBalancer("b".into()),
        ControlRequest::StopBalancerReport("b".into()),
        ControlRequest::KillLoadBalancer("b".into()),
        ControlRequest::CrashPoller("b".into()),
        ControlRequest::EndBalancerParent {
            name: "b".into(),
            kill: true,
        },
    ];
    for remote_admin in [false, true] {
        let config = TransportConfig {
            remote_admin,
            ..TransportConfig::default()
        };
        let shared = Arc::new(TestNode {
            transport: Arc::new(transport_named("admin", config)),
            answer: echoing_admin,
        });
        for request in anyone
            .iter()
            .chain(remote_admin.then_some(&admin).into_iter().flatten())
        {
            assert_eq!(
                control_of(&shared, request).await.unwrap(),
                ControlReply::Members(Some(vec![format!("{request:?}")])),
                "remote_admin {remote_admin}"
            );
        }
        if !remote_admin {
            for request in &admin {
                match control_of(&shared, request).await {
                    Err(crate::Error::Remote { message, .. }) => {
                        assert!(message.contains("remote_admin"), "{message}")
                    }
                    other => panic!("expected a refusal of {request:?}, got {other:?}"),
                }
            }
        }
        // The node's own requests are not the handler's.
        assert!(matches!(
            control_of(&shared, &ControlRequest::Ping).await,
            Ok(ControlReply::Pong { .. })
        ));
    }
}

#[tokio::test]
async fn a_cancelled_call_is_aborted_while_running_and_skipped_if_it_comes_later() {
    let shared = std::sync::Arc::new(shared());
    // Running: the cancellation aborts the handler long before its 10 s deadline.
    let running = {
        let shared = std::sync::Arc::clone(&shared);
        tokio::spawn(async move { status_of(&shared, &call("sleep", 10_000, &5_000u64)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(shared.calls.cancel(1), "the call was running");
    let (status, _) = tokio::time::timeout(Duration::from_secs(1), running)
        .await
        .expect("aborted at once")
        .unwrap();
    assert_eq!(status, "DeadlineExceeded");
    assert_eq!(shared.served.in_flight.load(Ordering::Relaxed), 0);
    // Cancelled before it arrives: skipped without running (an echo would reply Ok).
    assert!(!shared.calls.cancel(1));
    let (status, _) = status_of(&shared, &call("echo", 1000, &"late".to_string())).await;
    assert_eq!(status, "DeadlineExceeded");
    // The id is forgotten once used: a new call with it runs.
    let (status, _) = status_of(&shared, &call("echo", 1000, &"again".to_string())).await;
    assert_eq!(status, "Ok");
}

/// Refuses every argument as a bad request.
struct Refuse;
impl RemoteFunction for Refuse {
    const NAME: &'static str = "refuse";
    type Args = u64;
    type Reply = ();
    async fn call(&self, n: u64) -> Result<(), FunctionError> {
        Err(FunctionError::bad_request(format!("{n} is too many")))
    }
}

#[tokio::test]
async fn a_refused_argument_is_a_bad_request() {
    let shared = shared();
    shared.registry.register(Refuse).unwrap();
    let (status, _) = status_of(&shared, &call("refuse", 1000, &7u64)).await;
    assert_eq!(status, "BadRequest(\"7 is too many\")");
}

/// Hands its call's context to the test (through `slot`), then waits for its cancellation
/// and replies how much time was left when it started, in ms (`None`: no deadline).
struct Watch(std::sync::Arc<std::sync::Mutex<Option<crate::CallContext>>>);
impl RemoteFunction for Watch {
    const NAME: &'static str = "watch";
    type Args = bool;
    type Reply = Option<u64>;
    async fn call(&self, wait: bool) -> Result<Option<u64>, FunctionError> {
        let context = crate::CallContext::current();
        *self.0.lock().unwrap() = Some(context.clone());
        let left = context.time_left().map(|left| left.as_millis() as u64);
        if wait {
            context.cancelled().await;
        }
        Ok(left)
    }
}

fn watched() -> (
    std::sync::Arc<Transport>,
    std::sync::Arc<std::sync::Mutex<Option<crate::CallContext>>>,
) {
    let shared = shared();
    let slot = std::sync::Arc::default();
    shared
        .registry
        .register(Watch(std::sync::Arc::clone(&slot)))
        .unwrap();
    (std::sync::Arc::new(shared), slot)
}

#[tokio::test]
async fn a_served_call_sees_its_deadline_and_a_cast_has_none() {
    let (shared, slot) = watched();
    let (status, value) = status_of(&shared, &call("watch", 30_000, &false)).await;
    assert_eq!(status, "Ok");
    let left = postcard::from_bytes::<Option<u64>>(&value)
        .unwrap()
        .unwrap();
    assert!((20_000..=30_000).contains(&left), "{left} ms left");
    let context = slot.lock().unwrap().take().unwrap();
    assert!(
        !context.is_cancelled(),
        "a call that returned is not cancelled"
    );
    // Deadline 0: a cast.
    let (status, value) = status_of(&shared, &call("watch", 0, &false)).await;
    assert_eq!(status, "Ok");
    assert_eq!(postcard::from_bytes::<Option<u64>>(&value).unwrap(), None);
    let context = slot.lock().unwrap().take().unwrap();
    assert_eq!(context.deadline(), None);
}

/// The context `Watch` handed over, once its call has started (≤ 5 s).
async fn started(slot: &std::sync::Mutex<Option<crate::CallContext>>) -> crate::CallContext {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(context) = slot.lock().unwrap().take() {
            return context;
        }
        assert!(tokio::time::Instant::now() < deadline, "the call started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn a_served_calls_context_is_cancelled_by_its_caller_its_deadline_and_an_abandoned_drain() {
    let (shared, slot) = watched();
    // The caller cancels (the cancel control request).
    let running = {
        let shared = std::sync::Arc::clone(&shared);
        tokio::spawn(async move { status_of(&shared, &call("watch", 10_000, &true)).await })
    };
    let context = started(&slot).await;
    assert!(!context.is_cancelled());
    assert!(shared.calls.cancel(1));
    let (status, _) = running.await.unwrap();
    assert_eq!(status, "DeadlineExceeded");
    assert!(context.is_cancelled(), "cancelled by its caller");

    // The deadline passes on this node (the function, awaiting its cancellation, may end
    // first and reply).
    let _ = status_of(&shared, &call("watch", 30, &true)).await;
    assert!(
        started(&slot).await.is_cancelled(),
        "cancelled at its deadline"
    );

    // The drain gives up on it (a cast: no deadline); the function ends on the signal.
    let abandoned = std::sync::Arc::new(crate::function::Signal::default());
    let running = {
        let shared = std::sync::Arc::clone(&shared);
        let abandoned = std::sync::Arc::clone(&abandoned);
        tokio::spawn(
            async move { serve_call_in(&shared, call("watch", 0, &true), abandoned).await },
        )
    };
    let context = started(&slot).await;
    assert!(!context.is_cancelled());
    abandoned.fire();
    let reply = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the function saw its cancellation")
        .unwrap();
    assert_eq!(reply::decode(&reply).unwrap().0, ReplyStatus::Ok);
    assert!(context.is_cancelled(), "cancelled by the abandoned drain");
}

#[tokio::test]
async fn the_nodes_own_requests_are_handed_up_and_test_hooks_only_in_a_build_with_them() {
    let config = TransportConfig {
        remote_admin: true,
        ..TransportConfig::default()
    };
    let shared = Arc::new(TestNode {
        transport: Arc::new(transport_named("up", config)),
        answer: echoing_admin,
    });
    for request in [
        ControlRequest::Nodes,
        ControlRequest::Peers,
        ControlRequest::ConnectionOf("x@h".into()),
        ControlRequest::Joined {
            node: "x@h".into(),
            addr: "h:1".into(),
        },
        ControlRequest::Leaving("x@h".into()),
        ControlRequest::KillLoadBalancer("work".into()),
    ] {
        assert_eq!(
            control_of(&shared, &request).await.unwrap(),
            ControlReply::Members(Some(vec![format!("{request:?}")])),
        );
    }
    // Built without the hooks, a hook is refused before it reaches the node.
    match control_without_hooks(&shared, &ControlRequest::KillLoadBalancer("work".into())).await {
        Err(crate::Error::BadRequest { node, message }) => {
            assert_eq!(node, shared.transport.name);
            assert!(message.contains("`test-hooks`"), "{message}");
        }
        other => panic!("expected BadRequest, got {other:?}"),
    }
}
