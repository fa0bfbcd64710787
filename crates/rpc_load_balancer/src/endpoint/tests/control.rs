//! Control requests: answered by the serving side, or handed up to the node (after the
//! admin and test-hook checks).

use super::*;

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

/// Serves `request` as a node built without the `test-hooks` feature would, and decodes the
/// reply as a caller would.
async fn control_without_hooks(
    shared: &Arc<TestNode>,
    request: &ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let bytes = postcard::to_extend(request, crate::wire::start_message(8)).unwrap();
    decode_control(shared, answer_control(shared, &bytes, false).await)
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

#[tokio::test]
async fn a_load_report_is_answered_with_the_nodes_figures_without_remote_admin() {
    let shared = node_of(shared());
    assert!(!shared.transport.config.remote_admin);
    shared.transport.serving_load.set_utilization(Some(0.75));
    for ok in [true, true, false] {
        shared.transport.serving_load.finished(ok);
    }
    match control_of(&shared, &ControlRequest::LoadReport).await {
        Ok(ControlReply::LoadReport(report)) => {
            assert_eq!(report.utilization, Some(0.75));
            assert_eq!((report.in_flight, report.node_in_flight), (0, 0));
            assert!(report.eps <= report.qps, "{report:?}");
        }
        other => panic!("{other:?}"),
    }
    shared.transport.serving_load.set_utilization(None);
    match control_of(&shared, &ControlRequest::LoadReport).await {
        Ok(ControlReply::LoadReport(report)) => assert_eq!(report.utilization, None),
        other => panic!("{other:?}"),
    }
}
