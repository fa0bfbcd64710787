//! The payload cap on calls run in this process — to this node's own name, on a local member,
//! by `CallDirect`, with `call_directly`, a random-node call run here — is the one a call to
//! another node meets, measured on the same bytes: the call as it would be encoded (wire
//! version, arguments, header) and the reply as the serving node would encode it. So a call
//! gets the same outcome whoever serves it (the local/remote comparison is in
//! tests/cluster/payload_pick.rs). Arguments or a reply that cannot be encoded fail as they
//! would remotely too.
//!
//! One `Node` per process: nextest runs each test alone.

use std::ops::Range;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, CallDirect, Error, FunctionError, Node, NodeConfig, Payload,
    PayloadDirection, RemoteFailure, RemoteFunction,
};
use rpclb::functions::{register_all, Blob, BytesEcho, Echo};
use rpclb::harness::random_cookie;

/// This node's payload cap, in bytes.
const CAP: usize = 4096;

/// The encoded size of a `blob` reply of `len` bytes: version (1), the string's length (a
/// varint: 2 bytes for these lengths), its bytes, the `Ok` status (1) and its length (4).
fn blob_reply(len: usize) -> usize {
    len + 8
}

/// Asserts that `outcome` is `PayloadTooLarge` in `direction`, against [`CAP`], of a size in
/// `sizes`.
fn too_large<T>(
    what: &str,
    outcome: Result<T, Error>,
    direction: PayloadDirection,
    sizes: Range<usize>,
) {
    match outcome {
        Err(Error::PayloadTooLarge {
            direction: d,
            size,
            limit,
        }) => {
            assert_eq!((d, limit), (direction, CAP), "{what}");
            assert!(sizes.contains(&size), "{what}: {size} not in {sizes:?}");
        }
        Ok(_) => panic!("{what}: the call succeeded"),
        Err(other) => panic!("{what}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_run_here_meet_the_payload_cap_of_a_remote_call() {
    let node = Node::start(
        NodeConfig::new("capped", "127.0.0.1:0")
            .cookie(random_cookie())
            .max_payload_bytes(CAP),
    )
    .await
    .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    let me = node.name().to_string();
    let here = Balancer::start(BalancerConfig::new("here")).await.unwrap();
    assert!(here.members().as_slice()[0].is_local());
    let direct = Balancer::start(
        BalancerConfig::new("direct")
            .algorithm(CallDirect)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();

    // Arguments: the string alone is at the cap; with the header the call is over it.
    let over = "x".repeat(CAP);
    let arguments = CAP + 3..CAP + 64;
    let argument = PayloadDirection::Argument;
    let to_me = node.call::<Echo>(me.clone(), over.clone()).await;
    too_large("to this node", to_me, argument, arguments.clone());
    let local_member = here.call::<Echo>(over.clone()).await;
    too_large("local member", local_member, argument, arguments.clone());
    let call_direct = direct.call::<Echo>(over.clone()).await;
    too_large("CallDirect", call_direct, argument, arguments.clone());
    let directly = here.call::<Echo>(over.clone()).call_directly(true).await;
    too_large("call_directly", directly, argument, arguments.clone());
    let random = node
        .call_on_random_node::<Echo>("capped@", over.clone())
        .await;
    too_large("random node, here", random, argument, arguments.clone());
    let bytes = here.call::<BytesEcho>(Payload::from_slice(&[7; CAP])).await;
    too_large("a Payload", bytes, argument, arguments.clone());

    // Replies: measured as the serving node encodes them; the cap is inclusive.
    let reply = PayloadDirection::Reply;
    let at_cap = (CAP - 8) as u64;
    assert_eq!(blob_reply(CAP - 8), CAP);
    let over_cap = at_cap + 1;
    let exactly = blob_reply(CAP - 7)..blob_reply(CAP - 7) + 1;
    let to_me = node.call::<Blob>(me.clone(), over_cap).await;
    too_large("reply to this node", to_me, reply, exactly.clone());
    let local_member = here.call::<Blob>(over_cap).await;
    too_large("reply, local member", local_member, reply, exactly.clone());
    let call_direct = direct.call::<Blob>(over_cap).await;
    too_large("reply, CallDirect", call_direct, reply, exactly.clone());
    let directly = here.call::<Blob>(over_cap).call_directly(true).await;
    too_large("reply, call_directly", directly, reply, exactly.clone());
    let random = node.call_on_random_node::<Blob>("capped@", over_cap).await;
    too_large("reply, random node", random, reply, exactly);

    // At the cap, both ways, every path succeeds.
    let under = "x".repeat(CAP - 64);
    assert_eq!(
        node.call::<Echo>(me.clone(), under.clone()).await.unwrap(),
        under
    );
    assert_eq!(here.call::<Echo>(under.clone()).await.unwrap(), under);
    assert_eq!(direct.call::<Echo>(under.clone()).await.unwrap(), under);
    assert_eq!(
        node.call::<Blob>(me.clone(), at_cap).await.unwrap().len(),
        CAP - 8
    );
    assert_eq!(here.call::<Blob>(at_cap).await.unwrap().len(), CAP - 8);
    assert_eq!(direct.call::<Blob>(at_cap).await.unwrap().len(), CAP - 8);
    node.shutdown().await;
}

/// A value postcard cannot encode (its `Serialize` fails), as the arguments or the reply.
#[derive(Debug, serde::Deserialize)]
struct Unencodable;

impl serde::Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom("not encodable"))
    }
}

/// Takes what cannot be sent.
struct TakesUnencodable;
impl RemoteFunction for TakesUnencodable {
    const NAME: &'static str = "takes_unencodable";
    type Args = Unencodable;
    type Reply = ();
    async fn call(&self, _: Unencodable) -> Result<(), FunctionError> {
        Ok(())
    }
}

/// Returns what cannot be sent back.
struct GivesUnencodable;
impl RemoteFunction for GivesUnencodable {
    const NAME: &'static str = "gives_unencodable";
    type Args = ();
    type Reply = Unencodable;
    async fn call(&self, _: ()) -> Result<Unencodable, FunctionError> {
        Ok(Unencodable)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_that_cannot_be_encoded_fail_here_as_they_would_remotely() {
    let node = Node::start(NodeConfig::new("codec", "127.0.0.1:0").cookie(random_cookie()))
        .await
        .unwrap();
    node.register(TakesUnencodable).unwrap();
    node.register(GivesUnencodable).unwrap();
    let here = Balancer::start(BalancerConfig::new("here")).await.unwrap();
    let me = node.name().to_string();
    // Arguments: `Codec` before anything runs, as the encoding caller of a remote call gets.
    for outcome in [
        node.call::<TakesUnencodable>(me.clone(), Unencodable).await,
        here.call::<TakesUnencodable>(Unencodable).await,
    ] {
        match outcome {
            Err(Error::Codec { function, message }) => {
                assert_eq!(function, "takes_unencodable");
                // (postcard's own words: it does not keep the custom message)
                assert!(message.contains("Serialization"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
    // Reply: the serving node's answer, `Remote` (`Failed`) naming the encoding error.
    for outcome in [
        node.call::<GivesUnencodable>(me.clone(), ()).await,
        here.call::<GivesUnencodable>(()).await,
    ] {
        match outcome {
            Err(Error::Remote {
                failure: RemoteFailure::Failed,
                message,
                node: at,
                ..
            }) => {
                assert_eq!(at, me);
                assert!(
                    message.starts_with("reply could not be encoded: ")
                        && message.contains("Serialization"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    node.shutdown().await;
}
