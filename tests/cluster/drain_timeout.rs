//! The drain timeout across processes: an `rpclb node` with `--drain-timeout-ms 1000` serving
//! a 30 s call through its balancer exits 1–3 s after SIGTERM, SIGINT or SIGHUP (each drains
//! the same way), and the caller gets an error at once, not a hang. A second signal during the
//! drain exits at once — another signal, or the same one after the 100 ms in which it counts as
//! a repeat of the first (see `stop_signal.rs` for repeats).

use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, ControlReply, ControlRequest, Error, Node};
use rpclb::harness::Cluster;
use tokio::time::Instant;

use crate::{Sleep, BIN, MESH_TIMEOUT};

/// Waits (≤ 5 s) until `node` serves a call of `work`.
pub(crate) async fn serving(me: &Node, node: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match me
            .control(node, ControlRequest::Served("work".into()))
            .await
        {
            Ok(ControlReply::Served(Some(n))) if n > 0 => return,
            other => assert!(
                Instant::now() < deadline,
                "{node} serves nothing: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts a member serving a 30 s `sleep` through `work`, sends it `signal`, and checks the
/// drain is cut at the timeout.
async fn a_signal_drains_at_most_the_drain_timeout(signal: i32) {
    let mut cluster = Cluster::start(
        BIN,
        1,
        &[
            "--balancer",
            "work",
            "--drain-timeout-ms",
            "1000",
            "--leave-grace-ms",
            "100",
        ],
    )
    .await
    .unwrap();
    let member = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let call = {
        let work = work.clone();
        tokio::spawn(async move {
            let outcome = work
                .call::<Sleep>(30_000)
                .timeout(Duration::from_secs(60))
                .await;
            (outcome, Instant::now())
        })
    };
    serving(&me, &member).await;

    let signalled = Instant::now();
    cluster.nodes[0].signal(signal);
    let status = cluster.nodes[0]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the node exits");
    let took = signalled.elapsed();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(3)).contains(&took),
        "exited {took:?} after signal {signal} with a 1 s drain timeout"
    );
    let stopped = cluster.nodes[0]
        .wait_event("stopped", Duration::from_millis(500))
        .await;
    let stopped = stopped.unwrap_or_else(|e| panic!("no stopped line: {e:?}"));
    // It says which balancer gave up, with the call it was still serving.
    let drains = stopped["drains"].as_array().expect("a drains list");
    assert_eq!(drains.len(), 1, "{stopped}");
    assert_eq!(drains[0]["balancer"], "work", "{stopped}");
    assert_eq!(drains[0]["outcome"], "timed_out", "{stopped}");
    assert_eq!(drains[0]["served_in_flight"], 1, "{stopped}");
    let (outcome, ended) = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call hung after its node exited")
        .unwrap();
    assert!(
        matches!(outcome, Err(Error::ServiceUnavailable { ref node, .. }) if *node == member),
        "{outcome:?}"
    );
    assert!(
        ended - signalled < Duration::from_secs(4),
        "the call ended {:?} after the signal",
        ended - signalled
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_at_most_the_drain_timeout() {
    a_signal_drains_at_most_the_drain_timeout(libc::SIGTERM).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_drains_at_most_the_drain_timeout() {
    a_signal_drains_at_most_the_drain_timeout(libc::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_drains_at_most_the_drain_timeout() {
    a_signal_drains_at_most_the_drain_timeout(libc::SIGHUP).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_abandons_the_drain_at_once() {
    a_second_signal_abandons_the_drain(libc::SIGINT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_signal_again_after_the_repeat_window_abandons_the_drain() {
    // 500 ms after the first SIGTERM: past the 100 ms in which a repeat is the same request.
    a_second_signal_abandons_the_drain(libc::SIGTERM).await;
}

/// Starts a member serving a 30 s `sleep`, sends it SIGTERM and, 500 ms later, `second`, and
/// checks it exits at once with status 130 and a `drain_abandoned` line.
async fn a_second_signal_abandons_the_drain(second_signal: i32) {
    let mut cluster = Cluster::start(
        BIN,
        1,
        &["--balancer", "work", "--drain-timeout-ms", "30000"],
    )
    .await
    .unwrap();
    let member = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let call = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(30_000)
                .timeout(Duration::from_secs(60))
                .await
        })
    };
    serving(&me, &member).await;

    // The first signal starts a drain that would wait up to 30 s for the call.
    cluster.nodes[0].signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        cluster.nodes[0]
            .wait_exit(Duration::from_millis(10))
            .await
            .is_none(),
        "the node did not wait for its call"
    );
    let second = Instant::now();
    cluster.nodes[0].signal(second_signal);
    let status = cluster.nodes[0]
        .wait_exit(Duration::from_secs(5))
        .await
        .expect("the node exits after a second signal");
    assert!(
        second.elapsed() < Duration::from_secs(3),
        "{:?}",
        second.elapsed()
    );
    assert_eq!(status.code(), Some(130), "{status:?}");
    let abandoned = cluster.nodes[0]
        .wait_event("drain_abandoned", Duration::from_millis(500))
        .await;
    assert!(abandoned.is_ok(), "no drain_abandoned line: {abandoned:?}");
    let outcome = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call hung after its node exited")
        .unwrap();
    assert!(outcome.is_err(), "{outcome:?}");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
