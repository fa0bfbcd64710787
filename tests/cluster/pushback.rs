//! Pushback across processes: a member at its concurrency cap (`--max-concurrent-calls`,
//! `--function-max-concurrent-calls`) refuses the extra calls at once without running them;
//! the caller sends them to another member within the same deadline, and gets `Overloaded`
//! at once (not at its timeout) when every member is at its cap.

use std::time::{Duration, Instant};

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, Node, OutlierEjection,
    RoundRobin, Unavailable,
};
use rpclb::harness::Cluster;

use crate::{Echo, Sleep, BIN, MESH_TIMEOUT};

/// The calls `node` has served in all (refused calls are not served).
async fn served_total(me: &Node, node: &str) -> u64 {
    match me.control(node, ControlRequest::Stats).await {
        Ok(ControlReply::Stats { served_total, .. }) => served_total,
        other => panic!("{other:?}"),
    }
}

/// Whether `outcome` is a refusal at a concurrency cap.
fn is_overloaded<T: std::fmt::Debug>(outcome: &Result<T, Error>) -> bool {
    matches!(
        outcome,
        Err(Error::ServiceUnavailable {
            reason: Unavailable::Overloaded,
            ..
        })
    )
}

/// A RoundRobin balancer `work` with outlier ejection on the tester (not a member), once it
/// sees `members`.
async fn balancer(members: usize) -> Balancer {
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .outlier_ejection(OutlierEjection::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(members, MESH_TIMEOUT).await.unwrap();
    work
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_calls_over_a_members_cap_go_to_another_member_at_once_and_all_succeed() {
    let cluster = Cluster::start_each(
        BIN,
        &[
            &["--balancer", "work", "--max-concurrent-calls", "2"],
            &["--balancer", "work"],
        ],
    )
    .await
    .unwrap();
    let (capped, open) = (cluster.names()[0].clone(), cluster.names()[1].clone());
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = balancer(2).await;
    let before = served_total(&me, &capped).await;
    // 10 calls of 600 ms at once: round robin sends 5 to the capped member, which runs 2.
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let work = work.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let outcome = work
                    .call::<Sleep>(600)
                    .timeout(Duration::from_secs(5))
                    .with_node()
                    .await;
                (outcome, started.elapsed())
            })
        })
        .collect();
    let (mut on_capped, mut on_open) = (0, 0);
    for call in calls {
        let (outcome, took) = call.await.unwrap();
        let ((), node) = outcome.unwrap_or_else(|e| panic!("every call succeeds: {e}"));
        // Refused at once and re-sent: one run's time, not two (nobody queued).
        assert!(took < Duration::from_millis(1_100), "took {took:?}");
        match &*node {
            n if n == capped => on_capped += 1,
            n if n == open => on_open += 1,
            other => panic!("served by {other}"),
        }
    }
    assert_eq!((on_capped, on_open), (2, 8));
    // The refused calls never ran on the capped member: it served 2.
    assert_eq!(served_total(&me, &capped).await - before, 2);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_member_at_its_cap_callers_get_overloaded_at_once() {
    // n0 also writes a field of a newer release after every status: the reason still reads.
    let cluster = Cluster::start_each(
        BIN,
        &[
            &[
                "--balancer",
                "work",
                "--max-concurrent-calls",
                "1",
                "--wire-extra-field",
            ],
            &["--balancer", "work", "--max-concurrent-calls", "1"],
        ],
    )
    .await
    .unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = balancer(2).await;
    let before = [
        served_total(&me, &names[0]).await,
        served_total(&me, &names[1]).await,
    ];
    // One slow call on each member (round robin), then every member is at its cap.
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let work = work.clone();
            tokio::spawn(async move {
                work.call::<Sleep>(1_500)
                    .timeout(Duration::from_secs(5))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // More refusals per member than ejection's 5 consecutive failures.
    for _ in 0..6 {
        let started = Instant::now();
        let outcome = work
            .call::<Echo>("x".to_string())
            .timeout(Duration::from_secs(5))
            .await;
        let took = started.elapsed();
        assert!(is_overloaded(&outcome), "{outcome:?}");
        assert!(took < Duration::from_millis(500), "refused after {took:?}");
    }
    // A direct call is refused at once too, by either member.
    for node in &names {
        let started = Instant::now();
        let outcome = me.call::<Echo>(node.clone(), "x".to_string()).await;
        assert!(is_overloaded(&outcome), "{node}: {outcome:?}");
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    for call in slow {
        call.await.unwrap().unwrap();
    }
    // A load signal, not a failure: nobody was ejected.
    let stats = work.ejection_stats().expect("ejection is on");
    assert_eq!((stats.ejections, stats.ejected), (0, 0), "{stats:?}");
    // Each ran its slow call only; then places are free again.
    for (node, before) in names.iter().zip(before) {
        assert_eq!(served_total(&me, node).await - before, 1, "{node}");
    }
    assert_eq!(work.call::<Echo>("y".to_string()).await.unwrap(), "y");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_functions_cap_refuses_that_function_and_serves_the_others() {
    let cluster = Cluster::start(
        BIN,
        1,
        &[
            "--balancer",
            "work",
            "--function-max-concurrent-calls",
            "sleep=1",
        ],
    )
    .await
    .unwrap();
    let node = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = balancer(1).await;
    let before = served_total(&me, &node).await;
    let slow = {
        let work = work.clone();
        tokio::spawn(async move {
            work.call::<Sleep>(1_000)
                .timeout(Duration::from_secs(5))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The only member is at `sleep`'s cap: refused at once, with nobody else to take it.
    let started = Instant::now();
    let second = work.call::<Sleep>(1).timeout(Duration::from_secs(5)).await;
    assert!(is_overloaded(&second), "{second:?}");
    assert!(started.elapsed() < Duration::from_millis(500));
    // Other functions are served meanwhile.
    assert_eq!(work.call::<Echo>("x".to_string()).await.unwrap(), "x");
    slow.await.unwrap().unwrap();
    // Served: the slow `sleep` and the `echo`; the refused `sleep` never ran.
    assert_eq!(served_total(&me, &node).await - before, 2);
    work.call::<Sleep>(1).await.unwrap();
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
