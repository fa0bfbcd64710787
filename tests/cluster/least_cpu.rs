//! LeastCpu across real processes: nodes with pinned, failing or stopped CPU samplers, and a
//! caller (this process) whose Poller fetches their readings. Routing tests pin the readings;
//! real sampling is tested in `cpu_sampling.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_load_balancer::cpu::{readings, CpuReading};
use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, LeastCpu, Node, NodeConfig,
};
use rpclb::harness::Cluster;

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// TTL of the callers' readings in these tests, ms.
pub(crate) const TTL_MS: u64 = 1_000;

/// `rpclb node` flags: a member of `work` sampling with `sampler` every 100 ms.
pub(crate) fn member(sampler: &str) -> Vec<String> {
    [
        "--balancer",
        "work",
        "--cpu-sampler",
        sampler,
        "--cpu-sample-interval-ms",
        "100",
    ]
    .map(String::from)
    .to_vec()
}

/// [`member`] flags that also make the node's `work` a LeastCpu balancer polling every
/// 100 ms from the start, trusting readings for [`TTL_MS`], with heartbeats that tolerate a
/// paused peer for 30 s: an observer whose diagnostics show what it routes by.
pub(crate) fn observer(sampler: &str) -> Vec<String> {
    let mut flags = member(sampler);
    flags.extend(
        [
            "--algorithm",
            "least_cpu",
            "--poll-interval-ms",
            "100",
            "--poll-startup-jitter-ms",
            "0",
            "--cpu-cache-ttl-ms",
            &TTL_MS.to_string(),
            "--heartbeat-timeout-ms",
            "30000",
        ]
        .map(String::from),
    );
    flags
}

/// The values `observer`'s LeastCpu balancer `work` routes by now, by member node (its
/// diagnostics: [`ControlRequest::CpuSelection`]).
pub(crate) async fn routes_by(me: &Node, observer: &str) -> BTreeMap<String, f64> {
    match me.control(observer, ControlRequest::CpuSelection).await {
        Ok(ControlReply::CpuSelection(balancers)) => {
            let (balancer, values) = balancers
                .into_iter()
                .next()
                .unwrap_or_else(|| panic!("no LeastCpu balancer on {observer}"));
            assert_eq!(balancer, "work");
            values.into_iter().collect()
        }
        other => panic!("{observer} answered {other:?}"),
    }
}

/// Waits (≤ `bound`) until `ok` holds for what `observer` routes by; that, and the time it took.
pub(crate) async fn routes_by_until(
    me: &Node,
    observer: &str,
    bound: Duration,
    ok: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> (BTreeMap<String, f64>, Duration) {
    let start = tokio::time::Instant::now();
    loop {
        let values = routes_by(me, observer).await;
        if ok(&values) {
            return (values, start.elapsed());
        }
        assert!(
            start.elapsed() < bound,
            "{observer} never got there: {values:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn cluster(members: &[Vec<String>]) -> Cluster {
    let args: Vec<Vec<&str>> = members
        .iter()
        .map(|m| m.iter().map(String::as_str).collect())
        .collect();
    let args: Vec<&[&str]> = args.iter().map(Vec::as_slice).collect();
    Cluster::start_each(BIN, &args).await.unwrap()
}

/// Joins `cluster` as the caller (sampling every `sample_ms`) and starts LeastCpu balancer
/// `work` (poll `poll_ms`, no jitter, TTL [`TTL_MS`]) with every child as a member.
pub(crate) async fn caller(cluster: &Cluster, sample_ms: u64, poll_ms: u64) -> (Node, Balancer) {
    caller_with(cluster, tester(sample_ms), poll_ms).await
}

/// The caller's node: `tester`, sampling every `sample_ms`, allowing remote admin.
pub(crate) fn tester(sample_ms: u64) -> NodeConfig {
    NodeConfig::new("tester", "127.0.0.1:0")
        .cpu_sample_interval(Duration::from_millis(sample_ms))
        .remote_admin(true)
}

/// [`caller`] with the caller's node built from `config`.
pub(crate) async fn caller_with(
    cluster: &Cluster,
    config: NodeConfig,
    poll_ms: u64,
) -> (Node, Balancer) {
    let me = cluster.join_with(config, MESH_TIMEOUT).await.unwrap();
    let least_cpu = LeastCpu::new()
        .poll_interval(Duration::from_millis(poll_ms))
        .poll_startup_jitter(Duration::ZERO)
        .cpu_cache_ttl(Duration::from_millis(TTL_MS));
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(least_cpu)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(cluster.nodes.len(), MESH_TIMEOUT)
        .await
        .unwrap();
    (me, work)
}

/// The readings this process holds for `nodes`, by node.
pub(crate) fn held(nodes: &[String]) -> BTreeMap<String, CpuReading> {
    readings()
        .into_iter()
        .filter(|(node, _)| nodes.contains(node))
        .collect()
}

/// Waits (≤ `bound`) until `ok` holds for the readings held for `nodes`; they are returned.
pub(crate) async fn readings_until(
    nodes: &[String],
    bound: Duration,
    ok: impl Fn(&BTreeMap<String, CpuReading>) -> bool,
) -> BTreeMap<String, CpuReading> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let now = held(nodes);
        if ok(&now) {
            return now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "readings never got there: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every node of `nodes` has a fresh reading.
pub(crate) fn all_fresh(nodes: &[String]) -> impl Fn(&BTreeMap<String, CpuReading>) -> bool + '_ {
    move |held| {
        nodes
            .iter()
            .all(|n| held.get(n).is_some_and(|r| r.age_ms < TTL_MS))
    }
}

/// Sends `calls` balanced `whoami` calls from 16 concurrent callers; calls per node.
pub(crate) async fn spread(work: &Balancer, calls: usize) -> BTreeMap<String, usize> {
    let issued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let (work, issued) = (work.clone(), issued.clone());
            tokio::spawn(async move {
                let mut served = Vec::new();
                while issued.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < calls {
                    served.push(
                        work.call::<Whoami>(())
                            .timeout(Duration::from_secs(5))
                            .await
                            .unwrap(),
                    );
                }
                served
            })
        })
        .collect();
    let mut per_node = BTreeMap::new();
    for caller in callers {
        for node in caller.await.unwrap() {
            *per_node.entry(node).or_default() += 1;
        }
    }
    per_node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_to_the_least_loaded_band() {
    let cluster = cluster(&[member("const:10"), member("const:50"), member("const:90")]).await;
    let names = cluster.names();
    let (me, work) = caller(&cluster, 100, 100).await;
    let held = readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    assert_eq!(held[&names[0]].cpu, 10.0, "{held:?}");
    assert_eq!(held[&names[2]].cpu, 90.0, "{held:?}");
    let per_node = spread(&work, 1_000).await;
    assert_eq!(per_node.get(&names[0]), Some(&1_000), "{per_node:?}");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_within_the_threshold_share_the_calls() {
    let cluster = cluster(&[member("const:20"), member("const:22"), member("const:90")]).await;
    let names = cluster.names();
    let (me, work) = caller(&cluster, 100, 100).await;
    readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    let per_node = spread(&work, 3_000).await;
    assert_eq!(
        per_node.get(&names[2]),
        None,
        "the 90 node got calls: {per_node:?}"
    );
    for node in &names[..2] {
        let share = per_node.get(node).copied().unwrap_or(0) as f64 / 3_000.0;
        assert!(
            (0.4..=0.6).contains(&share),
            "{node}: {share:.3} of the calls; {per_node:?}"
        );
    }
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_sampler_fails_ages_out_while_it_keeps_answering() {
    // The first node pins 10 and then panics on every sample from 1.5 s on.
    // The second node also routes `work` by LeastCpu: its diagnostics show what it uses.
    let cluster = cluster(&[member("const-then-panic:10:1500"), observer("const:30")]).await;
    let names = cluster.names();
    let failing = &names[0];
    let (me, work) = caller(&cluster, 100, 100).await;
    // While it samples, it is the coldest and gets the calls.
    readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    // Its reading then ages at its source: here it goes stale although it keeps answering.
    let aged = readings_until(&names, Duration::from_secs(10), |held| {
        held.get(failing).is_some_and(|r| r.age_ms > TTL_MS + 200)
    })
    .await;
    assert_eq!(aged[failing].cpu, 10.0, "the old value is kept, only older");
    // At the other node too it now counts as 50, its own reading as itself.
    let (values, _) = routes_by_until(&me, &names[1], Duration::from_secs(5), |v| {
        v.get(failing) == Some(&50.0)
    })
    .await;
    assert_eq!(values.get(&names[1]), Some(&30.0), "{values:?}");
    assert!(
        aged[&names[1]].age_ms < TTL_MS,
        "the other node stays fresh: {aged:?}"
    );
    match me.control(failing, ControlRequest::CpuReading).await {
        Ok(ControlReply::CpuReading(Some(reading))) => {
            assert!(
                reading.age_ms > TTL_MS,
                "it answers with its aging reading: {reading:?}"
            )
        }
        other => panic!("{failing} answered {other:?}"),
    }
    // Stale = 50, so the 30 node now takes every call; the failing node keeps serving.
    let per_node = spread(&work, 300).await;
    assert_eq!(per_node.get(&names[1]), Some(&300), "{per_node:?}");
    assert!(work.members().contains(failing), "it stays a member");
    assert_eq!(me.call::<Whoami>(failing, ()).await.unwrap(), *failing);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_reads_fifty_after_the_ttl() {
    // The second node routes `work` by LeastCpu and tolerates a paused peer for 30 s.
    let mut cluster = cluster(&[member("const:10"), observer("const:40")]).await;
    let names = cluster.names();
    let (stopped, observer) = (&names[0], &names[1]);
    let (me, work) = caller(&cluster, 100, 100).await;
    readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    let (before, _) = routes_by_until(&me, observer, Duration::from_secs(10), |v| {
        v.get(stopped) == Some(&10.0)
    })
    .await;
    assert_eq!(before.get(observer), Some(&40.0), "{before:?}");
    cluster.nodes[0].signal(libc::SIGSTOP);
    // Its reading is no longer refreshed (polls time out): once older than the TTL at the
    // other node, that node routes by 50 for it (its value stays 10, aging).
    let (after, took) = routes_by_until(&me, observer, Duration::from_secs(5), |v| {
        v.get(stopped) == Some(&50.0)
    })
    .await;
    assert!(
        took >= Duration::from_millis(TTL_MS - 200),
        "50 after {took:?}, before the {TTL_MS} ms TTL ran out"
    );
    assert_eq!(after.get(observer), Some(&40.0), "{after:?}");
    match me.control(observer, ControlRequest::CpuReadings).await {
        Ok(ControlReply::CpuReadings(readings)) => {
            let raw = readings.iter().find(|(node, _)| node == stopped);
            assert!(
                raw.is_some_and(|(_, r)| r.cpu == 10.0 && r.age_ms > TTL_MS),
                "{readings:?}"
            );
        }
        other => panic!("{observer} answered {other:?}"),
    }
    // The caller sees it the same way: 40 beats 50, calls avoid the stopped node.
    // (This process polls on its own clock: its last reading of the stopped node may be a
    // little younger than the observer's, so wait until it too is past the TTL.)
    let stale = readings_until(&names, Duration::from_secs(5), |r| {
        r.get(stopped).is_some_and(|r| r.age_ms > TTL_MS)
    })
    .await;
    assert!(stale[stopped].age_ms > TTL_MS, "{stale:?}");
    let per_node = spread(&work, 100).await;
    assert_eq!(per_node.get(observer), Some(&100), "{per_node:?}");
    cluster.nodes[0].signal(libc::SIGCONT);
    work.stop().await;
    me.shutdown().await;
    cluster.nodes[0].kill().await;
    cluster.shutdown().await;
}

/// A node that reads hot (a burning node, its reading pinned: real sampling on a busy machine
/// is `cpu_sampling::a_burning_node_reads_higher_than_an_idle_one`) gets no balanced call, yet
/// stays a member and answers direct calls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_node_gets_no_calls_but_stays_a_member() {
    let cluster = cluster(&[member("const:100"), member("const:30"), member("const:32")]).await;
    let names = cluster.names();
    let hot = &names[0];
    let (me, work) = caller(&cluster, 100, 100).await;
    let before = readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    assert_eq!(before[hot].cpu, 100.0, "{before:?}");
    let per_node = spread(&work, 2_000).await;
    assert_eq!(
        per_node.get(hot),
        None,
        "the hot node got calls: {per_node:?}"
    );
    // The two within the threshold share them.
    for node in &names[1..] {
        assert!(per_node.get(node).is_some_and(|n| *n > 0), "{per_node:?}");
    }
    assert!(work.members().contains(hot), "it stays a member");
    assert_eq!(me.call::<Whoami>(hot, ()).await.unwrap(), *hot);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_poller_skips_the_startup_jitter_and_joins_are_polled_at_once() {
    let mut cluster = cluster(&[member("const:30")]).await;
    let first = cluster.names();
    let config = NodeConfig::new("tester", "127.0.0.1:0")
        .cpu_sample_interval(Duration::from_millis(100))
        .remote_admin(true);
    let me = cluster.join_with(config, MESH_TIMEOUT).await.unwrap();
    // A 60 s startup jitter and a 60 s poll interval: only a restart without jitter, and
    // polls on membership changes, can bring readings within seconds.
    let least_cpu = LeastCpu::new()
        .poll_interval(Duration::from_secs(60))
        .poll_startup_jitter(Duration::from_secs(60))
        .cpu_cache_ttl(Duration::from_millis(TTL_MS));
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(least_cpu)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(1, MESH_TIMEOUT).await.unwrap();
    match me
        .control(me.name(), ControlRequest::CrashPoller("work".into()))
        .await
    {
        Ok(ControlReply::Done) => {}
        other => panic!("crash_poller: {other:?}"),
    }
    readings_until(&first, Duration::from_secs(5), all_fresh(&first)).await;

    // A member joining between ticks is polled when it joins.
    let joining = rpclb::harness::NodeSpec::new("late", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .arg("--balancer")
        .arg("work")
        .cpu_sampler("const:20")
        .cpu_sample_interval_ms(100)
        .start(BIN)
        .await
        .unwrap();
    let late = vec![joining.node().to_string()];
    cluster.nodes.push(joining);
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let held = readings_until(&late, Duration::from_secs(5), all_fresh(&late)).await;
    assert_eq!(held[&late[0]].cpu, 20.0);
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
