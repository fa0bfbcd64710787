//! Every failure of a call comes back as a typed error, and the node keeps serving.

use std::time::{Duration, Instant};

use rpc_load_balancer::{Error, FunctionError, RemoteFailure, RemoteFunction};
use rpclb::harness::Cluster;

use crate::{Echo, Fail, Panic, Sleep, BIN, MESH_TIMEOUT};

/// A function no node registers.
struct Nope;
impl RemoteFunction for Nope {
    const NAME: &'static str = "nope";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        Ok(())
    }
}

/// `echo` called with bytes that are not valid UTF-8 where the node expects a `String`.
struct BadEcho;
impl RemoteFunction for BadEcho {
    const NAME: &'static str = "echo";
    type Args = Vec<u8>;
    type Reply = String;
    async fn call(&self, _: Vec<u8>) -> Result<String, FunctionError> {
        unreachable!()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_typed_and_the_node_keeps_serving() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let target = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    match me.call::<Nope>(target.clone(), ()).await {
        Err(Error::BadRequest { node, message }) => {
            assert_eq!(node, target);
            assert!(message.contains("unknown function `nope`"), "{message}");
        }
        other => panic!("unknown function gave {other:?}"),
    }

    match me.call::<BadEcho>(target.clone(), vec![0xc3, 0x28]).await {
        Err(Error::BadRequest { message, .. }) => {
            assert!(message.contains("cannot decode arguments"), "{message}")
        }
        other => panic!("undecodable arguments gave {other:?}"),
    }

    match me.call::<Fail>(target.clone(), "disk full".into()).await {
        Err(
            e @ Error::Remote {
                failure: RemoteFailure::Failed,
                ..
            },
        ) => {
            assert_eq!(e.code().as_str(), "service_unavailable");
            assert!(e.to_string().contains("disk full"), "{e}");
        }
        other => panic!("fail gave {other:?}"),
    }

    match me.call::<Panic>(target.clone(), "kaboom".into()).await {
        Err(Error::Remote {
            failure: RemoteFailure::Panicked,
            message,
            ..
        }) => assert_eq!(message, "kaboom"),
        other => panic!("panic gave {other:?}"),
    }
    let after = me.call::<Echo>(target.clone(), "still here".into()).await;
    assert_eq!(
        after.unwrap(),
        "still here",
        "the node serves after a panic"
    );

    let started = Instant::now();
    let timeout = Duration::from_millis(500);
    match me
        .call::<Sleep>(target.clone(), 5_000)
        .timeout(timeout)
        .await
    {
        Err(e @ Error::RequestTimeout { .. }) => {
            assert_eq!(e.node(), Some(target.as_str()));
            assert_eq!(e.code().as_str(), "request_timeout");
        }
        other => panic!("slow handler gave {other:?}"),
    }
    assert!(
        started.elapsed() < timeout + Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );

    match me.call::<Echo>("ghost@127.0.0.1", "x".into()).await {
        Err(e @ Error::ServiceUnavailable { .. }) => assert_eq!(e.node(), Some("ghost@127.0.0.1")),
        other => panic!("unknown node gave {other:?}"),
    }
    assert!(matches!(
        me.cast::<Echo>("ghost@127.0.0.1", "x".into()).await,
        Err(Error::ServiceUnavailable { .. })
    ));
    me.cast::<Echo>(&target, "cast".into()).await.unwrap();
    match me
        .call::<Echo>(target.clone(), "x".into())
        .timeout(Duration::ZERO)
        .await
    {
        Err(Error::InvalidConfig {
            option: "timeout", ..
        }) => {}
        other => panic!("zero timeout gave {other:?}"),
    }
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_wire_version_gets_an_answer_not_a_hang() {
    use ractor::rpc::CallResult;
    use ractor::ActorRef;
    use rpc_load_balancer::{RpcMessage, ENDPOINT_GROUP, SCOPE, WIRE_VERSION};

    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let endpoint: ActorRef<RpcMessage> =
        ractor::pg::get_scoped_members(&SCOPE.to_string(), &ENDPOINT_GROUP.to_string())
            .into_iter()
            .find(|cell| !cell.get_id().is_local())
            .expect("the child's endpoint is in pg")
            .into();
    let future_version = WIRE_VERSION + 98; // one varint byte
    let bytes = vec![future_version as u8, 0x00, 0x01];
    let reply = endpoint
        .call(
            |port| RpcMessage::Call(bytes, port),
            Some(Duration::from_secs(2)),
        )
        .await;
    match reply {
        // [our version][no value][status 4 = WireVersion, the version it got][the node's load
        // report][status length]
        Ok(CallResult::Success(reply)) => {
            assert_eq!(
                reply[..3],
                [WIRE_VERSION as u8, 4, future_version as u8],
                "{reply:?}"
            );
            let len = u32::from_le_bytes(reply[reply.len() - 4..].try_into().unwrap());
            assert_eq!(
                len as usize,
                reply.len() - 5,
                "one section after the version"
            );
        }
        other => panic!("no answer to another wire version: {other:?}"),
    }
    me.shutdown().await;
}
