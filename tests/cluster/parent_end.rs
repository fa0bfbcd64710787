//! A member's balancer whose parent actor ends without stopping it — stopped with
//! `stop(None)` and an empty `post_stop`, or killed — while 32 callers in another process keep
//! calling through the balancer: ractor kills the balancer's actor with its parent (a kill
//! skips `post_stop`), yet the member drains (node-owned machinery does it): it leaves at
//! once, finishes the calls it holds, and no caller sees an error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{ControlReply, ControlRequest};
use rpclb::harness::Cluster;
use tokio::time::Instant;

use crate::drain::{caller, leave_seen, left_cleanly, load, outcomes, serving};
use crate::BIN;

/// Runs the load, ends the parent of node 0's balancer (killed when `kill`), and checks that
/// no call failed and the member finished the calls it held.
async fn parent_end_under_load_fails_no_call(kill: bool) {
    let cluster = Cluster::start(
        BIN,
        3,
        &[
            "--balancer",
            "work",
            "--balancer-parent",
            "--delay-ms",
            "300",
            "--leave-grace-ms",
            "100",
        ],
    )
    .await
    .unwrap();
    let leaving = cluster.nodes[0].node().to_string();
    let (me, work) = caller(&cluster).await;
    let seen = leave_seen(&work, &leaving);
    let stop = Arc::new(AtomicBool::new(false));
    let callers = load(&work, &stop);
    tokio::time::sleep(Duration::from_millis(800)).await;
    serving(&me, &leaving).await;

    let ended = Instant::now();
    let end = ControlRequest::EndBalancerParent {
        name: "work".into(),
        kill,
    };
    assert_eq!(me.control(&leaving, end).await.unwrap(), ControlReply::Done);
    // The member drains and then its balancer is gone from the node (its served count is
    // `None` once its state has been released), within the drain's bounds.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match me
            .control(&leaving, ControlRequest::Served("work".into()))
            .await
        {
            Ok(ControlReply::Served(None)) => break,
            other => assert!(
                Instant::now() < deadline,
                "{leaving} still has its balancer: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let gone = Instant::now();
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, Ordering::Relaxed);
    // No caller saw an error (`outcomes` asserts it).
    let served = outcomes(callers).await;

    // It finished the calls it held before it went, and took nothing after its leave was seen.
    left_cleanly(&served, &leaving, ended, gone, &seen);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_stopped_with_an_empty_post_stop_loses_no_call() {
    parent_end_under_load_fails_no_call(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_parent_loses_no_call() {
    parent_end_under_load_fails_no_call(true).await;
}
