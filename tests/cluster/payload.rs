//! The payload cap: oversized arguments and replies fail with `PayloadTooLarge`, and the
//! session stays up for the next call.

use rpc_load_balancer::{Error, PayloadDirection, DEFAULT_MAX_PAYLOAD_BYTES};
use rpclb::harness::Cluster;

use crate::{Blob, Echo, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_argument_and_reply_fail_and_the_session_survives() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let target = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let over = DEFAULT_MAX_PAYLOAD_BYTES + 1024;

    match me.call::<Echo>(target.clone(), "x".repeat(over)).await {
        Err(Error::PayloadTooLarge {
            direction: PayloadDirection::Argument,
            size,
            limit,
        }) => {
            assert!(
                size > over && limit == DEFAULT_MAX_PAYLOAD_BYTES,
                "{size} {limit}"
            );
        }
        other => panic!("oversized argument gave {:?}", other.map(|s| s.len())),
    }
    assert!(matches!(
        me.cast::<Echo>(&target, "x".repeat(over)).await,
        Err(Error::PayloadTooLarge { .. })
    ));
    assert_eq!(
        me.call::<Echo>(target.clone(), "small".into())
            .await
            .unwrap(),
        "small"
    );

    // `blob` refuses a length over the cap (BadRequest, tests/cluster/function_limits.rs); one
    // of exactly the cap encodes to a reply a few bytes over it.
    let at_cap = DEFAULT_MAX_PAYLOAD_BYTES;
    match me.call::<Blob>(target.clone(), at_cap as u64).await {
        Err(Error::PayloadTooLarge {
            direction: PayloadDirection::Reply,
            size,
            limit,
        }) => {
            assert!(
                size > at_cap && limit == DEFAULT_MAX_PAYLOAD_BYTES,
                "{size} {limit}"
            );
        }
        other => panic!("oversized reply gave {:?}", other.map(|s| s.len())),
    }
    assert_eq!(
        me.call::<Echo>(target.clone(), "small".into())
            .await
            .unwrap(),
        "small"
    );

    // Just under the cap still goes through, both ways.
    let near = DEFAULT_MAX_PAYLOAD_BYTES - 1024;
    assert_eq!(
        me.call::<Blob>(target.clone(), near as u64)
            .await
            .unwrap()
            .len(),
        near
    );
    assert_eq!(me.nodes(), vec![target], "the session stayed up");
    me.shutdown().await;
}
