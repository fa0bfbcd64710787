//! A member on the calling node is served in-process, with the same error contract and
//! timeout as a remote member.

use std::time::{Duration, Instant};

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, Node, NodeConfig, RemoteFailure,
};
use rpclb::harness::random_cookie;

use crate::{Echo, Fail, Panic, Sleep, Whoami};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_member_keeps_the_remote_error_contract() {
    let node = Node::start(NodeConfig::new("solo", "127.0.0.1:0").cookie(random_cookie()))
        .await
        .unwrap();
    rpclb::functions::register_all(&node, Duration::ZERO).unwrap();
    let balancer = Balancer::start(BalancerConfig::new("here")).await.unwrap();
    assert!(balancer.is_member());
    assert_eq!(
        balancer.members().nodes(),
        vec![node.name().to_string()],
        "selectable as soon as start returns"
    );
    assert!(balancer.members().as_slice()[0].is_local());

    let (reply, served_by) = balancer.call::<Whoami>(()).with_node().await.unwrap();
    assert_eq!((reply.as_str(), &*served_by), (node.name(), node.name()));
    assert_eq!(balancer.call::<Echo>("x".into()).await.unwrap(), "x");
    match balancer.call::<Fail>("bad".into()).await {
        Err(Error::Remote {
            failure: RemoteFailure::Failed,
            message,
            node: at,
            ..
        }) => {
            assert_eq!((message.as_str(), at.as_str()), ("bad", node.name()))
        }
        other => panic!("local failure gave {other:?}"),
    }
    match balancer.call::<Panic>("boom".into()).await {
        Err(Error::Remote {
            failure: RemoteFailure::Panicked,
            message,
            ..
        }) => assert_eq!(message, "boom"),
        other => panic!("local panic gave {other:?}"),
    }
    let started = Instant::now();
    match balancer
        .call::<Sleep>(5_000)
        .timeout(Duration::from_millis(200))
        .await
    {
        Err(Error::RequestTimeout { node: at, timeout }) => {
            assert_eq!(
                (at.as_str(), timeout),
                (node.name(), Duration::from_millis(200))
            )
        }
        other => panic!("local timeout gave {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "took {:?}",
        started.elapsed()
    );
    // The timed-out call's task was stopped: nothing is left running.
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match node
            .control(node.name(), ControlRequest::Stats)
            .await
            .unwrap()
        {
            ControlReply::Stats {
                served_in_flight: 0,
                ..
            } => break,
            other => assert!(Instant::now() < deadline, "still in flight: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    balancer.cast::<Echo>("cast".into()).await.unwrap();
    match balancer
        .call::<Echo>("x".into())
        .timeout(Duration::ZERO)
        .await
    {
        Err(Error::InvalidConfig {
            option: "timeout", ..
        }) => {}
        other => panic!("zero timeout gave {other:?}"),
    }
    let members = balancer
        .wait_for_members(1, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(members.len(), 1);
    match balancer
        .wait_for_members(2, Duration::from_millis(100))
        .await
    {
        Err(Error::NoMembers { .. }) => {}
        other => panic!("waiting for a second member gave {other:?}"),
    }

    balancer.stop().await;
    assert!(matches!(
        Balancer::lookup("here"),
        Err(Error::UnknownBalancer { .. })
    ));
    match balancer.call::<Echo>("x".into()).await {
        Err(Error::UnknownBalancer { balancer }) => assert_eq!(balancer, "here"),
        other => panic!("call on a stopped balancer gave {other:?}"),
    }
    node.shutdown().await;
    assert!(Node::current().is_none());
    match node.call::<Echo>(node.name(), "x".into()).await {
        Err(Error::ServiceUnavailable {
            reason: rpc_load_balancer::Unavailable::NodeStopped,
            ..
        }) => {}
        other => panic!("a call after shutdown gave {other:?}"),
    }
    assert!(matches!(
        Balancer::start(BalancerConfig::new("late")).await,
        Err(Error::NodeNotRunning)
    ));
}
