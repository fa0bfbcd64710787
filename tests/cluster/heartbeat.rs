//! Heartbeats across processes: a paused node is dropped within `heartbeat_timeout` (+ 2 s)
//! — out of every snapshot, its in-flight calls failed, no later call sent to it — and is a
//! member again within 10 s of resuming.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, ControlReply, ControlRequest};
use rpclb::harness::Cluster;
use tokio::time::Instant;

use crate::{Sleep, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_is_dropped_within_the_heartbeat_timeout_and_comes_back() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let names = cluster.names();
    let paused = names[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(BalancerConfig::new("work").node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    work.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    // 8 callers streaming 50 ms calls with a 10 s timeout: (started, node, outcome).
    type Outcome = (Instant, Option<String>, Result<(), String>);
    let log: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (work, log, stop) = (work.clone(), Arc::clone(&log), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let outcome = work
                        .call::<Sleep>(50)
                        .timeout(Duration::from_secs(10))
                        .with_node()
                        .await;
                    let entry = match outcome {
                        Ok(((), node)) => (started, Some(node.to_string()), Ok(())),
                        Err(e) => (started, e.node().map(str::to_string), Err(e.to_string())),
                    };
                    log.lock().unwrap().push(entry);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    cluster.nodes[0].signal(libc::SIGSTOP);
    let paused_at = Instant::now();
    // Out of this node's snapshot within heartbeat_timeout (3 s) + 2 s…
    let mut members = work.watch_members();
    tokio::time::timeout(
        Duration::from_secs(5),
        members.wait_for(|m| !m.contains(&paused)),
    )
    .await
    .expect("the paused node is still a member after 5 s")
    .unwrap();
    let dropped_at = Instant::now();
    // …and out of the other nodes' snapshots too.
    for other in &names[1..] {
        let deadline = paused_at + Duration::from_secs(5);
        loop {
            match me
                .control(other, ControlRequest::Members("work".into()))
                .await
            {
                Ok(ControlReply::Members(Some(list))) if !list.contains(&paused) => break,
                reply => assert!(
                    Instant::now() < deadline,
                    "{other} still lists it: {reply:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.await.unwrap();
    }
    let log = std::mem::take(&mut *log.lock().unwrap());
    // Calls in flight to it when it paused failed (not after their 10 s timeout).
    let failed: Vec<&Outcome> = log.iter().filter(|(.., o)| o.is_err()).collect();
    assert!(
        !failed.is_empty(),
        "no call was in flight to the paused node"
    );
    for (started, node, outcome) in &failed {
        assert_eq!(node.as_deref(), Some(paused.as_str()), "{outcome:?}");
        assert!(
            *started < dropped_at,
            "a call selected after the drop failed: {outcome:?}"
        );
    }
    // No call selected after the drop went to it.
    assert!(log
        .iter()
        .filter(|(started, ..)| *started > dropped_at)
        .all(|(_, node, _)| node.as_deref() != Some(paused.as_str())));
    // Resumed, it is a member again within 10 s.
    cluster.nodes[0].signal(libc::SIGCONT);
    work.wait_for_members(3, Duration::from_secs(10))
        .await
        .expect("the resumed node is a member again");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
