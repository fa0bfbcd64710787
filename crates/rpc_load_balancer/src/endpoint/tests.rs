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
    shared
}

fn call<A: serde::Serialize>(function: &str, deadline_ms: u64, args: &A) -> Vec<u8> {
    encode_call(
        &CallHeader {
            function,
            balancer: None,
            deadline_ms,
            call_id: 1,
        },
        args,
    )
    .unwrap()
}

async fn status_of(shared: &NodeShared, bytes: &[u8]) -> (String, Vec<u8>) {
    let reply = serve_call(shared, bytes).await;
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
    let (status, _) = status_of(&shared, &[0x01, 0xff]).await;
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
    let (status, _) = status_of(&shared, &call("echo", 1000, &"x".repeat(2000))).await;
    assert!(status.starts_with("PayloadTooLarge { size: 20"), "{status}");
    assert!(status.ends_with("limit: 1024 }"), "{status}");
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
    let reply = serve_control(&Arc::new(shared), &bytes).await;
    assert!(matches!(
        reply::decode(&reply).unwrap().0,
        ReplyStatus::WireVersion { .. }
    ));
}

#[tokio::test]
async fn control_requests_are_answered() {
    let shared = Arc::new(shared());
    let request =
        postcard::to_extend(&ControlRequest::Functions, crate::wire::start_message(8)).unwrap();
    let reply = serve_control(&shared, &request).await;
    let (status, value) = reply::decode(&reply).unwrap();
    assert_eq!(status, ReplyStatus::Ok);
    let answer: ControlReply = postcard::from_bytes(value).unwrap();
    assert_eq!(
        answer,
        ControlReply::Functions(vec![
            "echo".into(),
            "fail".into(),
            "panic".into(),
            "sleep".into()
        ])
    );
    let garbage = serve_control(&shared, &[0x01, 0x63]).await;
    assert!(matches!(
        reply::decode(&garbage).unwrap().0,
        ReplyStatus::BadRequest(_)
    ));
}
