//! Draining across real processes: a member that stops its balancer, or gets SIGTERM, while
//! 32 callers keep calling finishes what it was given, takes nothing new, and no call fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, ControlReply, ControlRequest, RoundRobin};
use rpclb::harness::Cluster;
use tokio::time::Instant;

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// One finished call: who served it, when it was started and when its reply arrived.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    pub(crate) node: String,
    pub(crate) started: Instant,
    pub(crate) replied: Instant,
}

/// 32 callers calling `whoami` through `work` until `stop` is set; every outcome.
pub(crate) fn load(
    work: &Balancer,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Result<Served, String>>>> {
    (0..32)
        .map(|_| {
            let (work, stop) = (work.clone(), Arc::clone(stop));
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let outcome = work
                        .call::<Whoami>(())
                        .timeout(Duration::from_secs(10))
                        .await
                        .map(|node| Served {
                            node,
                            started,
                            replied: Instant::now(),
                        })
                        .map_err(|e| e.to_string());
                    outcomes.push(outcome);
                }
                outcomes
            })
        })
        .collect()
}

/// Joins as a caller of `work` (RoundRobin, not a member) with every child a member.
pub(crate) async fn caller(cluster: &Cluster) -> (rpc_load_balancer::Node, Balancer) {
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

/// Waits (≤ 5 s) until `node` serves calls of `work`, so it has some in flight when stopped.
pub(crate) async fn serving(me: &rpc_load_balancer::Node, node: &str) {
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

/// Records when this node's snapshot of `work` first lacks `node`.
pub(crate) fn leave_seen(work: &Balancer, node: &str) -> Arc<Mutex<Option<Instant>>> {
    let seen: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (mut members, node, record) = (work.watch_members(), node.to_string(), Arc::clone(&seen));
    tokio::spawn(async move {
        if members.wait_for(|m| !m.contains(&node)).await.is_ok() {
            *record.lock().unwrap() = Some(Instant::now());
        }
    });
    seen
}

pub(crate) async fn outcomes(
    callers: Vec<tokio::task::JoinHandle<Vec<Result<Served, String>>>>,
) -> Vec<Served> {
    let mut served = Vec::new();
    let mut failed = Vec::new();
    for caller in callers {
        for outcome in caller.await.unwrap() {
            match outcome {
                Ok(call) => served.push(call),
                Err(error) => failed.push(error),
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} calls failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    served
}

/// Checks how `leaving` left, from the `served` calls: it held calls when its leaving began at
/// `began` (started before, replied after); every reply from it came by `ended`; no call
/// selected after its leave was `seen` went to it; and calls went on after `ended`. Returns
/// the calls it served.
pub(crate) fn left_cleanly<'a>(
    served: &'a [Served],
    leaving: &str,
    began: Instant,
    ended: Instant,
    seen: &Mutex<Option<Instant>>,
) -> Vec<&'a Served> {
    let on_leaving: Vec<&Served> = served.iter().filter(|c| c.node == leaving).collect();
    let held = on_leaving
        .iter()
        .filter(|c| c.started < began && c.replied > began)
        .count();
    assert!(
        held > 0,
        "no call was in flight on {leaving} when it began to leave"
    );
    let last = on_leaving.iter().map(|c| c.replied).max().unwrap();
    assert!(
        last <= ended,
        "a reply from {leaving} came {:?} after it was gone",
        last - ended
    );
    let seen = seen.lock().unwrap().expect("the leave was seen");
    let late = on_leaving.iter().filter(|c| c.started > seen).count();
    assert_eq!(
        late, 0,
        "{late} calls started after the leave was seen went to {leaving}"
    );
    assert!(served.iter().any(|c| c.started > ended), "calls went on");
    on_leaving
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_members_balancer_under_load_fails_no_call() {
    let cluster = Cluster::start(
        BIN,
        3,
        &[
            "--balancer",
            "work",
            "--delay-ms",
            "500",
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
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    serving(&me, &leaving).await;

    let stop_started = Instant::now();
    let reply = me
        .control(&leaving, ControlRequest::StopBalancer("work".into()))
        .await;
    let stop_ended = Instant::now();
    assert!(matches!(reply, Ok(ControlReply::Done)), "{reply:?}");
    // When stop returned the member served nothing: its balancer's state is gone (a served
    // count of `None`), and nothing runs on that node any more (its only calls came through
    // `work`; the node's count drops before the balancer's, so it reads 0 as well).
    let served = me
        .control(&leaving, ControlRequest::Served("work".into()))
        .await;
    assert!(
        matches!(served, Ok(ControlReply::Served(None))),
        "{served:?}"
    );
    let stats = me.control(&leaving, ControlRequest::Stats).await;
    assert!(
        matches!(
            stats,
            Ok(ControlReply::Stats {
                served_in_flight: 0,
                ..
            })
        ),
        "{stats:?}"
    );
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    stop.store(true, Ordering::Relaxed);
    let served = outcomes(callers).await;

    // stop() returned only after the member had served everything it took: every reply from
    // it came before the stop's own reply (one session, in order).
    let on_leaving = left_cleanly(&served, &leaving, stop_started, stop_ended, &seen);
    // …and it took at least the grace (100 ms) plus the rest of the longest call it held.
    let held_longest = on_leaving
        .iter()
        .filter(|c| c.started < stop_started)
        .map(|c| c.replied)
        .max()
        .unwrap();
    assert!(stop_ended >= held_longest);
    assert!(
        stop_ended - stop_started >= Duration::from_millis(100),
        "stop took {:?}",
        stop_ended - stop_started
    );
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_a_node_under_load() {
    let mut cluster = Cluster::start(
        BIN,
        3,
        &[
            "--balancer",
            "work",
            "--delay-ms",
            "500",
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
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    serving(&me, &leaving).await;

    let signalled = Instant::now();
    cluster.nodes[0].signal(libc::SIGTERM);
    let status = cluster.nodes[0]
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("the node exits after draining");
    let exited = Instant::now();
    assert!(status.success(), "exit status {status:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let served = outcomes(callers).await;

    let on_leaving: Vec<&Served> = served.iter().filter(|c| c.node == leaving).collect();
    assert!(
        on_leaving
            .iter()
            .any(|c| c.started < signalled && c.replied > signalled),
        "no call was in flight on {leaving} at SIGTERM: {} calls served there, {} in all, the last there replied {:?} before the signal",
        on_leaving.len(),
        served.len(),
        on_leaving.iter().map(|c| c.replied).max().map(|r| signalled.saturating_duration_since(r))
    );
    assert!(
        on_leaving.iter().all(|c| c.replied <= exited),
        "a reply came after it exited"
    );
    let seen = seen.lock().unwrap().expect("the leave was seen");
    assert_eq!(on_leaving.iter().filter(|c| c.started > seen).count(), 0);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_grace_still_loses_no_call() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work", "--leave-grace-ms", "0"])
        .await
        .unwrap();
    let leaving = cluster.nodes[0].node().to_string();
    let (me, work) = caller(&cluster).await;
    for _ in 0..5 {
        // Stopped and started again under load, with no grace: every call either ran or was
        // refused unrun and sent elsewhere.
        let stop = Arc::new(AtomicBool::new(false));
        let callers = load(&work, &stop);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let reply = me
            .control(&leaving, ControlRequest::StopBalancer("work".into()))
            .await;
        assert!(matches!(reply, Ok(ControlReply::Done)), "{reply:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        stop.store(true, Ordering::Relaxed);
        outcomes(callers).await;
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
