//! One stop, signalled twice: GNU `timeout` sends SIGTERM to the command and then to its whole
//! process group, so `rpclb node` gets the same signal twice within microseconds. The same
//! signal again within 100 ms of the first is the same stop request: the node drains its call
//! and exits 0 (no `drain_abandoned`). A second signal after that window, or another signal,
//! still abandons the drain (`drain_timeout.rs`).

use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig};
use rpclb::harness::{random_cookie, Cluster};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::Instant;

use crate::drain_timeout::serving;
use crate::{Sleep, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_repeated_at_once_drains_normally() {
    let mut cluster = Cluster::start(
        BIN,
        1,
        &[
            "--balancer",
            "work",
            "--drain-timeout-ms",
            "30000",
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
            work.call::<Sleep>(2_000)
                .timeout(Duration::from_secs(30))
                .await
        })
    };
    serving(&me, &member).await;

    // As `timeout` does (the command, then its group), and once more 20 ms later: a repeat
    // the node sees apart from the first (two sent at once may be merged into one).
    cluster.nodes[0].signal(libc::SIGTERM);
    cluster.nodes[0].signal(libc::SIGTERM);
    tokio::time::sleep(Duration::from_millis(20)).await;
    cluster.nodes[0].signal(libc::SIGTERM);
    let status = cluster.nodes[0]
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("the node exits once its call is done");
    let lines = cluster.nodes[0]
        .events_within(Duration::from_millis(200))
        .await;
    assert!(
        !lines.iter().any(|l| l["event"] == "drain_abandoned"),
        "a repeated SIGTERM abandoned the drain: {lines:?}"
    );
    assert!(status.success(), "exit status {status:?}, lines {lines:?}");
    assert!(
        lines.iter().any(|l| l["event"] == "stopped"),
        "no stopped line: {lines:?}"
    );
    let outcome = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call hung")
        .unwrap();
    assert!(
        outcome.is_ok(),
        "the drain did not wait for the call: {outcome:?}"
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// How long `timeout` gives the node: its start (ready line) must fit well within it on a
/// loaded machine.
const TIMEOUT_SECS: u64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_by_gnu_timeout_drains_normally() {
    let cookie = random_cookie();
    let started = Instant::now();
    // `timeout` puts itself and the node in a process group of their own and, when the time is
    // up, signals the node and then that group. `--preserve-status`: its status is the node's.
    let mut child = Command::new("timeout")
        .args(["--preserve-status", "-s", "TERM", &TIMEOUT_SECS.to_string()])
        .arg(BIN)
        .args(["node", "--name", "timed", "--listen", "127.0.0.1:0"])
        .args(["--cookie", &cookie, "--exit-with-stdin"])
        .args(["--balancer", "work", "--drain-timeout-ms", "30000"])
        .args(["--leave-grace-ms", "100"])
        .env("RUST_LOG", rpclb::DEFAULT_LOG_FILTER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("GNU timeout runs");
    let _stdin = child.stdin.take();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut events = Vec::new();
    let ready = tokio::time::timeout(Duration::from_secs(TIMEOUT_SECS - 3), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                if event["event"] == "ready" {
                    return Some(event);
                }
            }
        }
        None
    })
    .await
    .expect("the node is ready well before `timeout` signals it")
    .expect("the node exited before its ready line");
    let member = ready["node"].as_str().unwrap().to_string();

    let me = Node::start(NodeConfig::new("tester", "127.0.0.1:0").cookie(&cookie))
        .await
        .unwrap();
    me.connect(ready["listen"].as_str().unwrap()).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    // Still running 1.5 s after `timeout` signals the node.
    let until_signal = Duration::from_secs(TIMEOUT_SECS).saturating_sub(started.elapsed());
    let sleep_ms = (until_signal + Duration::from_millis(1_500)).as_millis() as u64;
    let call = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(sleep_ms)
                .timeout(Duration::from_secs(30))
                .await
        })
    };
    serving(&me, &member).await;

    let status = tokio::time::timeout(Duration::from_secs(TIMEOUT_SECS + 20), child.wait())
        .await
        .expect("the node exits once its call is done")
        .unwrap();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Ok(event) = serde_json::from_str::<Value>(&line) {
            events.push(event);
        }
    }
    assert!(
        !events.iter().any(|l| l["event"] == "drain_abandoned"),
        "`timeout`'s two SIGTERMs abandoned the drain: {events:?}"
    );
    assert!(status.success(), "exit status {status:?}, lines {events:?}");
    assert!(
        events.iter().any(|l| l["event"] == "stopped"),
        "no stopped line: {events:?}"
    );
    let outcome = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the call hung")
        .unwrap();
    assert!(
        outcome.is_ok(),
        "the drain did not wait for the call: {outcome:?}"
    );
    work.stop().await;
    me.shutdown().await;
}
