//! What an admin stop of a balancer reports, across processes: `rpclb control stop_balancer`
//! (`--json`) and `ControlRequest::StopBalancerReport` say whether the member drained or gave up
//! at its drain timeout with calls still running, and how long it took.

use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, DrainOutcome, Error, Node,
};
use rpclb::harness::Cluster;
use serde_json::Value;
use tokio::process::Command;
use tokio::time::Instant;

use crate::{Sleep, BIN, MESH_TIMEOUT};

/// Waits (≤ 5 s) until `node` serves `count` calls of `work`.
async fn serving(me: &Node, node: &str, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match me
            .control(node, ControlRequest::Served("work".into()))
            .await
        {
            Ok(ControlReply::Served(Some(n))) if n >= count => return,
            other => assert!(
                Instant::now() < deadline,
                "{node} does not serve {count}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs `rpclb control ... --json stop_balancer work` against `node`: exit status and the
/// JSON document.
async fn stop_balancer_cli(cluster: &Cluster, node: &str) -> (i32, Value) {
    let peer = cluster.nodes[0].addr().to_string();
    let child = Command::new(BIN)
        .args(["control", "--peer", &peer, "--cookie", cluster.cookie()])
        .args(["--node", node, "--json", "stop_balancer", "work"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("rpclb control finished in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let line = stdout.lines().next().unwrap_or_default();
    let value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    (output.status.code().unwrap_or(-1), value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_stop_reports_a_timed_out_and_a_drained_drain() {
    let cluster = Cluster::start(
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

    // Timed out: a 30 s call is still running at the 1 s drain timeout.
    let slow = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(30_000)
                .timeout(Duration::from_secs(60))
                .await
        })
    };
    serving(&me, &member, 1).await;
    let (code, line) = stop_balancer_cli(&cluster, &member).await;
    assert_eq!(code, 0, "{line}");
    assert_eq!(line["ok"], true, "{line}");
    let reply = &line["reply"];
    assert_eq!(reply["balancer"], "work", "{line}");
    assert_eq!(reply["outcome"], "timed_out", "{line}");
    assert_eq!(reply["served_in_flight"], 1, "{line}");
    assert_eq!(reply["routed_in_flight"], 0, "{line}");
    let took = reply["took_ms"].as_u64().unwrap();
    assert!((1_000..5_000).contains(&took), "{line}");
    let cut = tokio::time::timeout(Duration::from_secs(5), slow)
        .await
        .expect("the cut call ended")
        .unwrap();
    assert!(
        matches!(cut, Err(Error::ServiceUnavailable { .. })),
        "{cut:?}"
    );

    // Started again by admin request; drained: the call in flight finishes first.
    let start = ControlRequest::StartBalancer {
        name: "work".into(),
        algorithm: "random".into(),
        node_match_list: None,
    };
    assert_eq!(
        me.control(&member, start).await.unwrap(),
        ControlReply::Done
    );
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    let short = {
        let work = work.clone();
        tokio::spawn(async move { work.call::<Sleep>(400).await })
    };
    serving(&me, &member, 1).await;
    let stopped_at = Instant::now();
    let report = match me
        .control(&member, ControlRequest::StopBalancerReport("work".into()))
        .await
        .unwrap()
    {
        ControlReply::Stopped(report) => report,
        other => panic!("unexpected reply {other:?}"),
    };
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert_eq!((report.routed_in_flight, report.served_in_flight), (0, 0));
    assert!(report.took <= stopped_at.elapsed(), "{report:?}");
    assert!(report.took >= Duration::from_millis(100), "{report:?}");
    assert!(short.is_finished(), "the stop returned before the call");
    short.await.unwrap().unwrap();

    // Nothing runs under the name any more: a remote error naming it, no report.
    match me
        .control(&member, ControlRequest::StopBalancerReport("work".into()))
        .await
    {
        Err(Error::Remote { message, .. }) => {
            assert!(message.contains("work"), "{message}")
        }
        other => panic!("a stop of a stopped balancer gave {other:?}"),
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// `rpclb control stop_balancer` waits for a drain longer than the 10 s every other request
/// waits (its default is 60 s), so a drain that times out at 11 s is reported, not lost to
/// the client's own `request_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_stop_outwaits_a_drain_longer_than_other_requests_wait() {
    let cluster = Cluster::start(
        BIN,
        1,
        &[
            "--balancer",
            "work",
            "--drain-timeout-ms",
            "11000",
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
    let slow = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(30_000)
                .timeout(Duration::from_secs(60))
                .await
        })
    };
    serving(&me, &member, 1).await;
    let (code, line) = stop_balancer_cli(&cluster, &member).await;
    assert_eq!(code, 0, "{line}");
    assert_eq!(line["reply"]["outcome"], "timed_out", "{line}");
    let took = line["reply"]["took_ms"].as_u64().unwrap();
    assert!((11_000..20_000).contains(&took), "{line}");
    let _ = tokio::time::timeout(Duration::from_secs(5), slow).await;
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
