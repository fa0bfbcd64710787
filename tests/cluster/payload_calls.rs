//! `Payload` arguments and replies (the zero-copy path) between real processes: bytes arrive
//! unchanged through direct and balanced calls at every size, and a member that stops
//! without grace hands payload calls back unrun, so none is lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Payload, RoundRobin,
};
use rpclb::functions::BytesEcho;
use rpclb::harness::Cluster;

use crate::{BIN, MESH_TIMEOUT};

/// `len` bytes that differ from position to position (a shifted copy would not compare equal).
fn pattern(len: usize, seed: u8) -> Payload {
    let mut payload = Payload::with_capacity(len);
    payload.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    payload
}

/// Joins as a caller of `work` (RoundRobin over every child).
async fn caller(cluster: &Cluster) -> (rpc_load_balancer::Node, Balancer) {
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(cluster.nodes.len(), MESH_TIMEOUT)
        .await
        .unwrap();
    (me, work)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_cross_processes_unchanged_at_every_size() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let (me, work) = caller(&cluster).await;
    let target = cluster.names()[0].clone();
    for (seed, len) in [0, 1, 100, 1_024, 65_536, 300_000].into_iter().enumerate() {
        let sent = pattern(len, seed as u8);
        let direct = me
            .call::<BytesEcho>(target.clone(), sent.clone())
            .timeout(Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(direct, sent, "direct call of {len} bytes");
        // Round robin: both members answer each size.
        for _ in 0..2 {
            let balanced = work
                .call::<BytesEcho>(sent.clone())
                .timeout(Duration::from_secs(10))
                .await
                .unwrap();
            assert_eq!(balanced, sent, "balanced call of {len} bytes");
        }
    }
    // A payload built from a Vec (no room reserved) and an empty one go too.
    let from_vec = Payload::from(vec![7u8; 5_000]);
    let back = work.call::<BytesEcho>(from_vec.clone()).await.unwrap();
    assert_eq!(back, from_vec);
    assert!(work
        .call::<BytesEcho>(Payload::new())
        .await
        .unwrap()
        .is_empty());
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_calls_are_not_lost_when_a_member_stops_without_grace() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work", "--leave-grace-ms", "0"])
        .await
        .unwrap();
    let leaving = cluster.nodes[0].node().to_string();
    let (me, work) = caller(&cluster).await;
    for cycle in 0..3u8 {
        // Under load, the member leaves with no grace: each call ran, or was refused unrun and
        // handed back (its bytes, since a payload is not kept) to go to another member.
        let stop = Arc::new(AtomicBool::new(false));
        let callers: Vec<_> = (0..16u8)
            .map(|i| {
                let (work, stop) = (work.clone(), Arc::clone(&stop));
                tokio::spawn(async move {
                    let mut failures = Vec::new();
                    let mut calls = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let sent = pattern(2_000 + usize::from(i) * 100, i ^ cycle);
                        calls += 1;
                        match work
                            .call::<BytesEcho>(sent.clone())
                            .timeout(Duration::from_secs(10))
                            .await
                        {
                            Ok(back) if back == sent => {}
                            Ok(back) => failures.push(format!("{} bytes back", back.len())),
                            Err(error) => failures.push(error.to_string()),
                        }
                    }
                    (calls, failures)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let reply = me
            .control(&leaving, ControlRequest::StopBalancer("work".into()))
            .await;
        assert!(matches!(reply, Ok(ControlReply::Done)), "{reply:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        let mut calls = 0;
        for caller in callers {
            let (made, failures) = caller.await.unwrap();
            calls += made;
            assert!(failures.is_empty(), "cycle {cycle}: {failures:?}");
        }
        assert!(calls > 100, "cycle {cycle}: only {calls} calls");
        let started = me
            .control(
                &leaving,
                ControlRequest::StartBalancer {
                    name: "work".into(),
                    algorithm: "random".into(),
                    node_match_list: None,
                },
            )
            .await;
        assert!(matches!(started, Ok(ControlReply::Done)), "{started:?}");
        work.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
