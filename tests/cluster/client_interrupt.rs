//! Ctrl-C on `rpclb call` and `rpclb load` cancels their calls in flight on the serving node:
//! they exit 130 and the node's `served_in_flight` falls back to 0, instead of the call running
//! to its own (huge) deadline.

use std::process::Stdio;
use std::time::Duration;

use rpc_load_balancer::{ControlReply, ControlRequest, Node};
use rpclb::harness::Cluster;
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::{BIN, MESH_TIMEOUT};

/// The calls `node` serves now (control `stats`).
async fn served_in_flight(me: &Node, node: &str) -> u64 {
    match me.control(node, ControlRequest::Stats).await {
        Ok(ControlReply::Stats {
            served_in_flight, ..
        }) => served_in_flight,
        other => panic!("stats of {node}: {other:?}"),
    }
}

/// Waits (≤ `bound`) until `node` serves `count` calls; panics naming `what` if it does not.
async fn wait_served(me: &Node, node: &str, count: u64, bound: Duration, what: &str) {
    let deadline = Instant::now() + bound;
    loop {
        let now = served_in_flight(me, node).await;
        if now == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {node} serves {now} calls, not {count}, after {bound:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `rpclb ARGS` (stdout piped).
fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// SIGINTs `child` once `node` serves its call, then waits (≤ 10 s) for it: exit status and
/// stdout.
async fn interrupt_when_served(me: &Node, node: &str, child: Child) -> (i32, String) {
    wait_served(me, node, 1, Duration::from_secs(10), "before Ctrl-C").await;
    let pid = child.id().unwrap();
    // SAFETY: kill(2) has no memory effects; the pid is our own running child's.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGINT);
    }
    let output = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("exited within 10 s of Ctrl-C")
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// One node serving balancer `work`, a watcher node joined to it, the node's name and address.
async fn one_node() -> (Cluster, Node, String, String) {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let member = cluster.names()[0].clone();
    let peer = cluster.nodes[0].addr().to_string();
    let me = cluster.join("watcher", MESH_TIMEOUT).await.unwrap();
    assert_eq!(served_in_flight(&me, &member).await, 0);
    (cluster, me, member, peer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_call_cancels_its_call_on_the_serving_node_and_exits_130() {
    let (cluster, me, member, peer) = one_node().await;

    // An hour-long burn with an hour's timeout, to the node.
    let call = spawn(&[
        "call",
        "--peer",
        &peer,
        "--cookie",
        cluster.cookie(),
        "--node",
        &member,
        "--timeout-ms",
        "3600000",
        "--json",
        "burn",
        "3600000",
    ]);
    let (code, stdout) = interrupt_when_served(&me, &member, call).await;
    wait_served(
        &me,
        &member,
        0,
        Duration::from_secs(3),
        "after call's Ctrl-C",
    )
    .await;
    assert_eq!(code, 130, "{stdout}");
    let line: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(line["ok"], false, "{line}");
    assert_eq!(line["error"]["kind"], "interrupted", "{line}");

    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_on_load_cancels_its_calls_prints_its_report_and_exits_130() {
    let (cluster, me, member, peer) = one_node().await;
    // An hour-long burn through balancer `work`.
    let load = spawn(&[
        "load",
        "--peer",
        &peer,
        "--cookie",
        cluster.cookie(),
        "--balancer",
        "work",
        "--function",
        "burn",
        "--arg",
        "3600000",
        "--calls",
        "1",
        "--concurrency",
        "1",
        "--timeout-ms",
        "3600000",
        "--json",
    ]);
    let (code, stdout) = interrupt_when_served(&me, &member, load).await;
    wait_served(
        &me,
        &member,
        0,
        Duration::from_secs(3),
        "after load's Ctrl-C",
    )
    .await;
    assert_eq!(code, 130, "{stdout}");
    let report: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(report["interrupted"], true, "{report}");
    assert_eq!(report["calls"], 0, "{report}");
    assert!(report["error"].is_null(), "{report}");

    me.shutdown().await;
    cluster.shutdown().await;
}
