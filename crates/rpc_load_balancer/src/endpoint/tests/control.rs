//! Control requests: answered, gated by remote admin, handed to the node's balancer admin
//! handler, and test hooks refused by a build without them.

use super::*;

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

/// A balancer admin handler that answers every request with `Members([the request])`.
fn echoing_admin(
    _shared: Arc<NodeShared>,
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
    ];
    for remote_admin in [false, true] {
        let config = NodeConfig::new("admin", "127.0.0.1:0")
            .cookie("c")
            .remote_admin(remote_admin);
        let mut shared = NodeShared::new("admin@127.0.0.1".into(), String::new(), None, &config);
        shared.balancer_admin = echoing_admin;
        let shared = Arc::new(shared);
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
async fn balancer_requests_about_no_balancer_are_answered_by_the_default_handler() {
    let shared = shared_named(
        "no-balancers",
        NodeConfig::new("no-balancers", "127.0.0.1:0").cookie("c"),
    );
    assert_eq!(
        control_of(&shared, &ControlRequest::Members("none".into()))
            .await
            .unwrap(),
        ControlReply::Members(None)
    );
    assert_eq!(
        control_of(&shared, &ControlRequest::InFlight("none".into()))
            .await
            .unwrap(),
        ControlReply::InFlight(None)
    );
    assert_eq!(
        control_of(&shared, &ControlRequest::CpuSelection)
            .await
            .unwrap(),
        ControlReply::CpuSelection(Vec::new())
    );
}

#[tokio::test]
async fn crash_poller_is_admin_gated() {
    let closed = shared_named(
        "crash-closed",
        NodeConfig::new("crash-closed", "127.0.0.1:0").cookie("c"),
    );
    let request = ControlRequest::CrashPoller("no-such-balancer".into());
    match control_of(&closed, &request).await {
        Err(crate::Error::Remote { message, .. }) => {
            assert!(message.contains("remote_admin"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let open = shared_named(
        "crash-open",
        NodeConfig::new("crash-open", "127.0.0.1:0")
            .cookie("c")
            .remote_admin(true),
    );
    match control_of(&open, &request).await {
        Err(crate::Error::Remote { message, .. }) => {
            assert!(message.contains("no-such-balancer"), "{message}")
        }
        other => panic!("expected the poller's error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_node_built_without_test_hooks_refuses_them_with_bad_request_and_serves_the_rest() {
    let shared = shared_named(
        "no-hooks",
        NodeConfig::new("no-hooks", "127.0.0.1:0")
            .cookie("c")
            .remote_admin(true),
    );
    for request in [
        ControlRequest::KillLoadBalancer("work".into()),
        ControlRequest::CrashPoller("work".into()),
    ] {
        // Built with the hooks (as this test build is), the request is carried out: no such
        // balancer or Poller here, a remote error naming it.
        match control_of(&shared, &request).await {
            Err(crate::Error::Remote { message, .. }) => {
                assert!(message.contains("work"), "{message}")
            }
            other => panic!("expected the hook's own error for {request:?}, got {other:?}"),
        }
        // Built without them, it is refused unrun, as an unknown request is.
        match control_without_hooks(&shared, &request).await {
            Err(crate::Error::BadRequest { node, message }) => {
                assert_eq!(node, shared.name);
                assert!(message.contains("`test-hooks`"), "{message}");
            }
            other => panic!("expected BadRequest for {request:?}, got {other:?}"),
        }
    }
    assert!(matches!(
        control_without_hooks(&shared, &ControlRequest::Ping).await,
        Ok(ControlReply::Pong { .. })
    ));
}
