//! Issue 22 item 4: a member stopped under load costs no caller an error. Four member
//! processes, two callers in two other processes (this test's own node, and an `rpclb load`
//! child), calls of a function that is not idempotent (so nothing may be sent twice: only
//! calls refused unrun may go elsewhere); one member is stopped mid-run.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{ControlReply, ControlRequest, RemoteFunction};
use rpclb::harness::Cluster;
use serde_json::Value;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::drain::{caller, leave_seen, load, outcomes, serving, Served};
use crate::{Whoami, BIN};

/// The members' flags: `work` on each, 20 ms calls, a 200 ms leave grace.
const MEMBER: &[&str] = &[
    "--balancer",
    "work",
    "--delay-ms",
    "20",
    "--leave-grace-ms",
    "200",
];

/// Starts the second caller: `rpclb load` through `work` (RoundRobin, 16 at a time) for
/// `secs` seconds, joined through `peer`.
fn second_caller(peer: &str, cookie: &str, secs: u64) -> Child {
    Command::new(BIN)
        .args([
            "load",
            "--peer",
            peer,
            "--cookie",
            cookie,
            "--balancer",
            "work",
        ])
        .args(["--algorithm", "round_robin", "--concurrency", "16"])
        .args(["--duration", &secs.to_string(), "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The second caller's report, once it ended (≤ 60 s): it exited 0 and no call failed.
async fn second_callers_report(child: Child) -> Value {
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("rpclb load ended in time")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{stdout}"));
    assert_eq!(output.status.code(), Some(0), "{report}");
    assert!(
        report["errors"].as_object().unwrap().is_empty(),
        "the second caller saw errors: {report}"
    );
    assert_eq!(report["calls"], report["ok"], "{report}");
    report
}

/// Waits (≤ 10 s) until `node` has no member `leaving` of `work` in its own view.
async fn gone_from(me: &rpc_load_balancer::Node, node: &str, leaving: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match me
            .control(node, ControlRequest::Members("work".into()))
            .await
        {
            Ok(ControlReply::Members(Some(list))) if !list.iter().any(|m| m == leaving) => return,
            other => assert!(
                Instant::now() < deadline,
                "{node} still lists {leaving}: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_sigtermed_under_two_callers_costs_no_call() {
    const { assert!(!Whoami::IDEMPOTENT, "the calls must not be idempotent") };
    let mut cluster = Cluster::start(BIN, 4, MEMBER).await.unwrap();
    let leaving = cluster.nodes[3].node().to_string();
    let (me, work) = caller(&cluster).await;
    let seen = leave_seen(&work, &leaving);
    let second = second_caller(cluster.nodes[0].addr(), cluster.cookie(), 4);
    let stop = Arc::new(AtomicBool::new(false));
    let callers = load(&work, &stop);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    serving(&me, &leaving).await;

    let signalled = Instant::now();
    cluster.nodes[3].signal(libc::SIGTERM);
    let stopped = cluster.nodes[3]
        .wait_event("stopped", Duration::from_secs(20))
        .await
        .expect("the member drains and says so");
    let status = cluster.nodes[3]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the member exits after draining");
    let exited = Instant::now();
    assert!(status.success(), "exit status {status:?}");
    assert_eq!(stopped["drains"][0]["outcome"], "drained", "{stopped}");
    let report = second_callers_report(second).await;
    stop.store(true, Ordering::Relaxed);
    let served = outcomes(callers).await;

    // Both callers used the member before it stopped, and neither saw an error (above).
    assert!(
        report["per_node"][&leaving].as_u64().unwrap() > 0,
        "{report}"
    );
    let on_leaving: Vec<&Served> = served.iter().filter(|c| c.node == leaving).collect();
    assert!(
        on_leaving
            .iter()
            .any(|c| c.started < signalled && c.replied > signalled),
        "no call of this caller was in flight on {leaving} at SIGTERM"
    );
    // Its served count stopped growing: nothing this caller started after it saw the leave
    // went there, and every reply from it came before it exited.
    let seen = seen.lock().unwrap().expect("the leave was seen");
    assert_eq!(on_leaving.iter().filter(|c| c.started > seen).count(), 0);
    assert!(on_leaving.iter().all(|c| c.replied <= exited));
    assert!(served.iter().any(|c| c.started > exited), "calls went on");
    // A figure, not a bound: how long callers went on picking the member.
    eprintln!(
        "SIGTERM to leave seen by this caller: {:?}; to exit: {:?}; drain {}",
        seen.saturating_duration_since(signalled),
        exited - signalled,
        stopped["drains"][0]
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_balancer_stopped_under_two_callers_costs_no_call_and_serves_no_more() {
    let cluster = Cluster::start(BIN, 4, MEMBER).await.unwrap();
    let leaving = cluster.nodes[3].node().to_string();
    let (me, work) = caller(&cluster).await;
    let seen = leave_seen(&work, &leaving);
    let second = second_caller(cluster.nodes[0].addr(), cluster.cookie(), 4);
    let stop = Arc::new(AtomicBool::new(false));
    let callers = load(&work, &stop);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    serving(&me, &leaving).await;

    let stop_started = Instant::now();
    let reply = me
        .control(&leaving, ControlRequest::StopBalancerReport("work".into()))
        .await;
    let stop_ended = Instant::now();
    match &reply {
        Ok(ControlReply::Stopped(report)) => assert!(report.drained(), "{report:?}"),
        other => panic!("{other:?}"),
    }
    // Every caller's view has dropped it (the stop waited for that), and its count of calls
    // served stays where it is while both callers go on calling (the node still runs).
    assert!(!work.members().contains(&leaving));
    for node in &cluster.nodes[..3] {
        gone_from(&me, node.node(), &leaving).await;
    }
    let total = || async {
        match me.control(&leaving, ControlRequest::Stats).await {
            Ok(ControlReply::Stats {
                served_in_flight,
                served_total,
            }) => (served_in_flight, served_total),
            other => panic!("{other:?}"),
        }
    };
    let (in_flight, before) = total().await;
    assert_eq!(in_flight, 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_, after) = total().await;
    assert_eq!(after, before, "the stopped member served more calls");

    let report = second_callers_report(second).await;
    stop.store(true, Ordering::Relaxed);
    let served = outcomes(callers).await;
    assert!(
        report["per_node"][&leaving].as_u64().unwrap() > 0,
        "{report}"
    );
    let on_leaving: Vec<&Served> = served.iter().filter(|c| c.node == leaving).collect();
    assert!(!on_leaving.is_empty());
    let seen = seen.lock().unwrap().expect("the leave was seen");
    assert_eq!(on_leaving.iter().filter(|c| c.started > seen).count(), 0);
    assert!(on_leaving.iter().all(|c| c.replied <= stop_ended));
    eprintln!(
        "stop to leave seen by this caller: {:?}; stop took {:?}",
        seen.saturating_duration_since(stop_started),
        stop_ended - stop_started
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
