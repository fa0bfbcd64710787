//! Serving calls: replies, refusals, failures and panics, size caps, wire versions.

use super::*;

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
