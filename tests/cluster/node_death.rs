//! A node killed mid-call: its in-flight calls fail fast with service unavailable, and later
//! calls to it fail at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::{Error, Unavailable};
use rpclb::harness::Cluster;
use tokio::sync::Notify;

use crate::{Sleep, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_fails_in_flight_calls_fast() {
    let mut cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let target = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    // 8 callers stream 200 ms calls to the node until one fails; each returns its last error
    // and when it came back.
    let started = Arc::new(Notify::new());
    let mut callers = Vec::new();
    for _ in 0..8 {
        let (me, target, started) = (me.clone(), target.clone(), Arc::clone(&started));
        callers.push(tokio::spawn(async move {
            let mut ok = 0u32;
            for _ in 0..200 {
                match me
                    .call::<Sleep>(target.clone(), 200)
                    .timeout(Duration::from_secs(20))
                    .await
                {
                    Ok(()) => {
                        ok += 1;
                        started.notify_one();
                    }
                    Err(error) => return (ok, error, Instant::now()),
                }
            }
            panic!("the node never died");
        }));
    }
    // Let every caller get a call in flight, then kill.
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("calls succeed first");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed_at = Instant::now();
    cluster.nodes[0].kill().await;

    for caller in callers {
        let (ok, error, at) = tokio::time::timeout(Duration::from_secs(10), caller)
            .await
            .expect("every caller returns")
            .unwrap();
        assert!(ok > 0, "each caller had calls succeed before the kill");
        let after_kill = at.saturating_duration_since(killed_at);
        assert!(
            after_kill < Duration::from_secs(2),
            "failed {after_kill:?} after the kill"
        );
        match &error {
            Error::ServiceUnavailable { node, .. } => assert_eq!(node, &target),
            other => panic!("in-flight call gave {other:?}"),
        }
        assert_eq!(error.code().as_str(), "service_unavailable");
    }

    // The node is gone from the table; later calls fail at once.
    let down = Instant::now();
    while me.nodes().contains(&target) {
        assert!(down.elapsed() < Duration::from_secs(2), "node still listed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let later = Instant::now();
    match me.call::<Sleep>(target.clone(), 1).await {
        Err(Error::ServiceUnavailable {
            reason: Unavailable::UnknownNode,
            ..
        }) => {}
        other => panic!("call after the kill gave {other:?}"),
    }
    assert!(
        later.elapsed() < Duration::from_millis(100),
        "took {:?}",
        later.elapsed()
    );
    me.shutdown().await;
}
