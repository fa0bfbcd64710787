//! Pushback: a call over the node's or a function's concurrency cap is refused at once,
//! unrun, with a reply that hands it back, carries the node's load and says why.

use super::*;
use crate::wire::reply::Refusal;

/// Sends `bytes` as a call through `dispatch`, as the endpoint actor does: the reply's
/// receiver.
fn send(node: &Arc<TestNode>, bytes: Vec<u8>) -> ractor::concurrency::OneshotReceiver<Vec<u8>> {
    let (port, reply) = ractor::concurrency::oneshot();
    dispatch(node, RpcMessage::Call(bytes, port.into()));
    reply
}

fn capped(node: Option<usize>, functions: &[(&str, usize)]) -> Arc<TestNode> {
    let config = TransportConfig {
        max_concurrent_calls: node,
        function_max_concurrent_calls: functions
            .iter()
            .map(|(name, cap)| (name.to_string(), *cap))
            .collect(),
        ..TransportConfig::default()
    };
    let transport = transport_named("capped", config);
    transport.registry.register(Echo).unwrap();
    transport.registry.register(Sleep).unwrap();
    node_of(transport)
}

/// Whether `reply` is an overloaded refusal handing back `call`, with a report.
fn is_pushback(reply: Vec<u8>, call: &[u8]) -> bool {
    let (status, value, appended) = reply::decode_with_report(&reply).unwrap();
    status == ReplyStatus::Leaving
        && appended.refusal == Some(Refusal::Overloaded)
        && appended.report.is_some()
        && reply::refused_call(reply, value).as_deref() == Some(call)
}

#[tokio::test]
async fn a_call_over_the_nodes_cap_is_refused_at_once_and_unrun() {
    let node = capped(Some(2), &[]);
    let slow: Vec<_> = (0..2)
        .map(|_| send(&node, call("sleep", 5_000, &300u64)))
        .collect();
    // Let both start.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let over = call("echo", 5_000, &"x".to_string());
    let started = std::time::Instant::now();
    let refused = send(&node, over.clone()).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(100));
    assert!(is_pushback(refused.clone(), &over));
    // The caller sees `Overloaded`.
    let error =
        crate::call::decode_reply::<String>("capped", "echo", refused, Duration::from_secs(1))
            .unwrap_err();
    assert_eq!(
        error,
        crate::Error::ServiceUnavailable {
            node: "capped".into(),
            reason: crate::Unavailable::Overloaded
        }
    );
    // Served: the two slow calls only.
    assert_eq!(node.transport.served.total.load(Ordering::Relaxed), 2);
    for reply in slow {
        let reply = reply.await.unwrap();
        assert!(reply::is_ok(&reply));
    }
    // Places are given back when calls end: served again.
    let reply = send(&node, over).await.unwrap();
    assert!(reply::is_ok(&reply));
}

#[tokio::test]
async fn a_functions_cap_refuses_that_function_only_and_casts_are_not_counted() {
    let node = capped(None, &[("sleep", 1)]);
    let first = send(&node, call("sleep", 5_000, &200u64));
    tokio::time::sleep(Duration::from_millis(30)).await;
    let second = call("sleep", 5_000, &1u64);
    assert!(is_pushback(
        send(&node, second.clone()).await.unwrap(),
        &second
    ));
    // Another function is served, and so is a cast of the capped one.
    let echo = send(&node, call("echo", 5_000, &"x".to_string()))
        .await
        .unwrap();
    assert!(reply::is_ok(&echo));
    dispatch(&node, RpcMessage::Cast(call("sleep", 0, &1u64)));
    assert!(reply::is_ok(&first.await.unwrap()));
}
