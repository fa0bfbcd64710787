//! Retry across processes: a balancer with no member on any connected node is tried exactly
//! `retry_count + 1` times; a call waiting on an empty pool succeeds once a connected node
//! starts the balancer; a call that timed out is not sent again.

use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Retry, RetryCount,
};
use rpclb::harness::Cluster;
use rpclb::retry_waits::RetryWaits;

use crate::{Sleep, Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balancer_no_connected_node_runs_is_tried_exactly_count_plus_one_times() {
    let waits = RetryWaits::install();
    // Two nodes run `work`; none runs `absent`.
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let absent = Balancer::start(
        BalancerConfig::new("absent")
            .node_match_list(Vec::<String>::new())
            .retry(Retry::new(RetryCount::Times(2), Duration::from_millis(100))),
    )
    .await
    .unwrap();
    let started = tokio::time::Instant::now();
    let outcome = absent.call::<Whoami>(()).await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(rpc_load_balancer::Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("absent") + 1, 3, "attempts");
    assert!(
        (Duration::from_millis(150)..Duration::from_secs(1)).contains(&took),
        "{took:?}"
    );
    // The connected nodes' own balancer is served meanwhile, without a wait.
    work.call::<Whoami>(()).await.unwrap();
    assert_eq!(waits.count("work"), 0);
    absent.stop().await;
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_call_succeeds_once_a_node_starts_the_balancer() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let child = cluster.nodes[0].node().to_string();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let later = Balancer::start(
        BalancerConfig::new("later")
            .node_match_list(Vec::<String>::new())
            .retry(Retry::new(
                RetryCount::Unlimited,
                Duration::from_millis(200),
            )),
    )
    .await
    .unwrap();
    let call = {
        let later = later.clone();
        tokio::spawn(async move {
            later
                .call::<Whoami>(())
                .timeout(Duration::from_secs(8))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!call.is_finished(), "the call gave up on the empty pool");
    let started = me
        .control(
            &child,
            ControlRequest::StartBalancer {
                name: "later".into(),
                algorithm: "random".into(),
                node_match_list: None,
            },
        )
        .await;
    assert!(matches!(started, Ok(ControlReply::Done)), "{started:?}");
    let served_by = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the waiting call ended")
        .unwrap()
        .unwrap();
    assert_eq!(served_by, child);
    // A cast waiting on an empty pool runs once a member appears, too.
    let total = || async {
        match me.control(&child, ControlRequest::Stats).await {
            Ok(ControlReply::Stats { served_total, .. }) => served_total,
            other => panic!("{other:?}"),
        }
    };
    let stopped = me
        .control(&child, ControlRequest::StopBalancer("later".into()))
        .await;
    assert!(matches!(stopped, Ok(ControlReply::Done)), "{stopped:?}");
    let mut members = later.watch_members();
    tokio::time::timeout(MESH_TIMEOUT, members.wait_for(|m| m.is_empty()))
        .await
        .unwrap()
        .unwrap();
    let before = total().await;
    let cast = {
        let later = later.clone();
        tokio::spawn(async move {
            later
                .cast::<Whoami>(())
                .timeout(Duration::from_secs(8))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!cast.is_finished(), "the cast gave up on the empty pool");
    let started = me
        .control(
            &child,
            ControlRequest::StartBalancer {
                name: "later".into(),
                algorithm: "random".into(),
                node_match_list: None,
            },
        )
        .await;
    assert!(matches!(started, Ok(ControlReply::Done)), "{started:?}");
    tokio::time::timeout(Duration::from_secs(5), cast)
        .await
        .expect("the waiting cast ended")
        .unwrap()
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while total().await == before {
        assert!(tokio::time::Instant::now() < deadline, "the cast never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    later.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_is_not_sent_again() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let child = cluster.nodes[0].node().to_string();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .node_match_list(Vec::<String>::new())
            .retry(Retry::new(RetryCount::Unlimited, Duration::from_millis(50))),
    )
    .await
    .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let total = || async {
        match me.control(&child, ControlRequest::Stats).await {
            Ok(ControlReply::Stats { served_total, .. }) => served_total,
            other => panic!("{other:?}"),
        }
    };
    let before = total().await;
    let outcome = work
        .call::<Sleep>(1_000)
        .timeout(Duration::from_millis(200))
        .await;
    assert!(
        matches!(
            outcome,
            Err(rpc_load_balancer::Error::RequestTimeout { .. })
        ),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(total().await - before, 1, "the call ran more than once");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
