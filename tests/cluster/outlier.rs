//! Outlier ejection across real processes: a paused member is suspected and gets no more
//! calls once others reply while it does not, and gets calls again once it replies; members
//! that fail every call are ejected only up to the cap.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, OutlierEjection, RoundRobin};
use rpclb::harness::Cluster;
use tokio::time::Instant;

use crate::{Fail, Sleep, Whoami, BIN, MESH_TIMEOUT};

/// (started, node, ok) of each call.
type Log = Arc<Mutex<Vec<(Instant, Option<String>, bool)>>>;

/// Starts a `Sleep(1)` call every 2 ms (each its own task, 3 s timeout) for `length`.
async fn open_loop(
    work: &Balancer,
    length: Duration,
    log: &Log,
) -> Vec<tokio::task::JoinHandle<()>> {
    let end = Instant::now() + length;
    let mut calls = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    while Instant::now() < end {
        tick.tick().await;
        let (work, log) = (work.clone(), Arc::clone(log));
        calls.push(tokio::spawn(async move {
            let started = Instant::now();
            let outcome = work
                .call::<Sleep>(1)
                .timeout(Duration::from_secs(3))
                .with_node()
                .await;
            let entry = match outcome {
                Ok(((), node)) => (started, Some(node.to_string()), true),
                Err(e) => (started, e.node().map(str::to_string), false),
            };
            log.lock().unwrap().push(entry);
        }));
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_member_is_suspected_and_called_again_once_it_replies() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let paused = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .outlier_ejection(OutlierEjection::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    let log: Log = Arc::default();
    // Warm: every member replies.
    for call in open_loop(&work, Duration::from_millis(300), &log).await {
        call.await.unwrap();
    }
    // Paused for 1.5 s: under the heartbeat timeout (3 s) and the calls' timeout (3 s).
    cluster.nodes[0].signal(libc::SIGSTOP);
    // When the balancer first counts it suspected (polled each ms while the calls go out).
    let suspected = async {
        loop {
            if work.ejection_stats().is_some_and(|s| s.suspected >= 1) {
                return Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let (mut calls, suspected_at) = tokio::join!(
        open_loop(&work, Duration::from_millis(1_500), &log),
        tokio::time::timeout(Duration::from_millis(1_500), suspected)
    );
    let suspected_at = suspected_at.expect("suspected while paused");
    let stats = work.ejection_stats().expect("ejection is on");
    cluster.nodes[0].signal(libc::SIGCONT);
    let resumed_at = Instant::now();
    assert!(stats.suspicions >= 1, "{stats:?}");
    assert_eq!(stats.suspected, 1, "{stats:?}");
    calls.extend(open_loop(&work, Duration::from_millis(1_000), &log).await);
    for call in calls {
        call.await.unwrap();
    }
    let log = std::mem::take(&mut *log.lock().unwrap());
    let to_paused = |from: Instant, to: Instant| {
        log.iter()
            .filter(|(started, node, _)| {
                (from..to).contains(started) && node.as_deref() == Some(paused.as_str())
            })
            .count()
    };
    // A call logged after the suspicion (+ 10 ms for picks under way) must not go to it.
    // (Suspected within 50 ms of silence + 10 ms between looks on a quiet machine; the
    // instant is read, not assumed, so a starved machine cannot make the check fail.)
    let settled = suspected_at + Duration::from_millis(10);
    assert_eq!(
        to_paused(settled, resumed_at),
        0,
        "calls went to the paused member after it was suspected"
    );
    // Its calls were served once it resumed (none failed), and it takes calls again.
    assert!(log.iter().all(|(.., ok)| *ok), "a call failed");
    assert!(
        to_paused(resumed_at, Instant::now()) > 0,
        "no call went to it after it replied"
    );
    let stats = work.ejection_stats().unwrap();
    assert_eq!((stats.suspected, stats.ejected), (0, 0), "{stats:?}");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// Metric `name`'s value with `load_balancer` = `work` in `snapshot` (counters summed over their
/// other labels, with `reason` = `reason` when given; a gauge's value).
#[cfg(feature = "telemetry")]
fn metric(
    snapshot: &[(
        metrics_util::CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        metrics_util::debugging::DebugValue,
    )],
    name: &str,
    reason: Option<&str>,
) -> f64 {
    use metrics_util::debugging::DebugValue;
    snapshot
        .iter()
        .filter(|(key, ..)| {
            let labels: Vec<_> = key.key().labels().collect();
            key.key().name() == name
                && labels
                    .iter()
                    .any(|l| l.key() == "load_balancer" && l.value() == "work")
                && reason
                    .is_none_or(|r| labels.iter().any(|l| l.key() == "reason" && l.value() == r))
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => *n as f64,
            DebugValue::Gauge(g) => g.into_inner(),
            DebugValue::Histogram(_) => 0.0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_failing_every_call_are_ejected_only_up_to_the_cap() {
    #[cfg(feature = "telemetry")]
    let snapshotter = {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        snapshotter
    };
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .outlier_ejection(OutlierEjection::new().max_ejected_percent(34))
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(3, MESH_TIMEOUT).await.unwrap();
    for _ in 0..30 {
        let failed = work.call::<Fail>("no".into()).await;
        assert!(failed.is_err());
    }
    let stats = work.ejection_stats().unwrap();
    assert_eq!((stats.ejections, stats.ejected), (1, 1), "34 % of 3: one");
    // The two left share the calls.
    let mut served = std::collections::BTreeMap::<String, usize>::new();
    for _ in 0..40 {
        let node = work.call::<Whoami>(()).await.unwrap();
        *served.entry(node).or_default() += 1;
    }
    assert_eq!(served.len(), 2, "{served:?}");
    assert!(served.values().all(|&n| n == 20), "{served:?}");
    // The metrics say the same (the gauges as of the last look over the members: one more
    // call, 20 ms on, makes one).
    tokio::time::sleep(Duration::from_millis(20)).await;
    work.call::<Whoami>(()).await.unwrap();
    #[cfg(feature = "telemetry")]
    {
        use rpc_load_balancer::telemetry::{MEMBERS_EJECTED, MEMBER_EJECTED};
        // One snapshot: the debugging recorder's snapshots take the counters.
        let snapshot = snapshotter.snapshot().into_vec();
        let by_failures = metric(&snapshot, MEMBER_EJECTED, Some("consecutive_failures"));
        assert_eq!(by_failures, 1.0);
        assert_eq!(metric(&snapshot, MEMBERS_EJECTED, None), 1.0);
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
