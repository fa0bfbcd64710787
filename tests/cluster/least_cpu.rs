//! LeastCpu across real processes: nodes with pinned, failing, stopped or really burning CPU
//! samplers, and a caller (this process) whose Poller fetches their readings.

use std::collections::BTreeMap;
use std::time::Duration;

use rpc_load_balancer::cpu::{readings, CpuReading};
use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, LeastCpu, Node, NodeConfig,
};
use rpclb::harness::Cluster;

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// TTL of the callers' readings in these tests, ms.
const TTL_MS: u64 = 1_000;

/// `rpclb node` flags: a member of `work` sampling with `sampler` every 100 ms.
fn member(sampler: &str) -> Vec<String> {
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

async fn cluster(members: &[Vec<String>]) -> Cluster {
    let args: Vec<Vec<&str>> = members
        .iter()
        .map(|m| m.iter().map(String::as_str).collect())
        .collect();
    let args: Vec<&[&str]> = args.iter().map(Vec::as_slice).collect();
    Cluster::start_each(BIN, &args).await.unwrap()
}

/// Joins `cluster` as the caller (sampling every `sample_ms`) and starts LeastCpu balancer
/// `work` (poll `poll_ms`, no jitter, TTL [`TTL_MS`]) with every child as a member.
async fn caller(cluster: &Cluster, sample_ms: u64, poll_ms: u64) -> (Node, Balancer) {
    let config = NodeConfig::new("tester", "127.0.0.1:0")
        .cpu_sample_interval(Duration::from_millis(sample_ms))
        .remote_admin(true);
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
fn held(nodes: &[String]) -> BTreeMap<String, CpuReading> {
    readings()
        .into_iter()
        .filter(|(node, _)| nodes.contains(node))
        .collect()
}

/// Waits (≤ `bound`) until `ok` holds for the readings held for `nodes`; they are returned.
async fn readings_until(
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
fn all_fresh(nodes: &[String]) -> impl Fn(&BTreeMap<String, CpuReading>) -> bool + '_ {
    move |held| {
        nodes
            .iter()
            .all(|n| held.get(n).is_some_and(|r| r.age_ms < TTL_MS))
    }
}

/// Sends `calls` balanced `whoami` calls from 16 concurrent callers; calls per node.
async fn spread(work: &Balancer, calls: usize) -> BTreeMap<String, usize> {
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
    let cluster = cluster(&[member("const-then-panic:10:1500"), member("const:30")]).await;
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
async fn a_crashed_poller_restarts_and_a_garbage_reply_reads_fifty() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let mut garbage = member("const:5");
    garbage.extend(["--cpu-reply".to_string(), "garbage".to_string()]);
    let cluster = cluster(&[member("const:40"), member("const:60"), garbage]).await;
    let names = cluster.names();
    let (me, work) = caller(&cluster, 100, 100).await;
    let good = names[..2].to_vec();
    readings_until(&good, Duration::from_secs(10), all_fresh(&good)).await;
    let mut members = work.watch_members();
    members.mark_unchanged();

    // The garbage node's reply never decodes: no reading (so 50), bad_reply failures counted.
    let bad_replies = || -> u64 {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .filter(|(key, ..)| {
                let key = key.key();
                key.name() == rpc_load_balancer::telemetry::LEAST_CPU_POLL_FAILURES
                    && key
                        .labels()
                        .any(|l| l.key() == "kind" && l.value() == "bad_reply")
                    && key
                        .labels()
                        .any(|l| l.key() == "node" && l.value() == names[2])
            })
            .map(|(.., value)| match value {
                DebugValue::Counter(n) => n,
                _ => 0,
            })
            .sum::<u64>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    // (The debugging recorder's snapshots take the counts: add them up.)
    let mut counted = 0;
    while counted < 3 {
        counted += bad_replies();
        assert!(
            tokio::time::Instant::now() < deadline,
            "{counted} bad_reply counted in 5 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!held(&names).contains_key(&names[2]), "{:?}", held(&names));
    let cycles_timed = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .any(|(key, ..)| {
            key.key().name() == rpc_load_balancer::telemetry::LEAST_CPU_POLL_DURATION
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "load_balancer" && l.value() == "work")
        });
    assert!(cycles_timed, "no poll duration recorded");
    // 40 (fresh) vs 50 (no reading) vs 60: every call goes to the 40 node.
    let per_node = spread(&work, 200).await;
    assert_eq!(per_node.get(&names[0]), Some(&200), "{per_node:?}");

    // Crash the Poller through admin control: it is restarted alone, readings resume.
    let poller = "rpc_load_balancer/work/cpu_poller";
    let before = ractor::registry::where_is(poller).unwrap().get_id();
    match me
        .control(me.name(), ControlRequest::CrashPoller("work".into()))
        .await
    {
        Ok(ControlReply::Done) => {}
        other => panic!("crash_poller: {other:?}"),
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let now = ractor::registry::where_is(poller).map(|c| c.get_id());
        if now.is_some_and(|id| id != before) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the poller was not restarted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Past a whole TTL after the restart, readings are still fresh: the new Poller polls.
    tokio::time::sleep(Duration::from_millis(TTL_MS + 300)).await;
    let now = held(&good);
    assert!(
        all_fresh(&good)(&now),
        "readings stopped after the restart: {now:?}"
    );
    assert!(!members.has_changed().unwrap(), "the membership changed");
    assert!(work.is_running());
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_reads_fifty_after_the_ttl() {
    let mut cluster = cluster(&[member("const:10"), member("const:40")]).await;
    let names = cluster.names();
    let (me, work) = caller(&cluster, 100, 100).await;
    readings_until(&names, Duration::from_secs(10), all_fresh(&names)).await;
    cluster.nodes[0].signal(libc::SIGSTOP);
    // Its reading is no longer refreshed (polls time out): after the TTL it is stale, so 50.
    let stale = readings_until(&names, Duration::from_secs(5), |held| {
        held.get(&names[0]).is_some_and(|r| r.age_ms > TTL_MS)
    })
    .await;
    assert!(stale[&names[1]].age_ms < TTL_MS, "{stale:?}");
    // 40 beats 50: calls avoid the stopped node (which would not answer).
    let per_node = spread(&work, 100).await;
    assert_eq!(per_node.get(&names[1]), Some(&100), "{per_node:?}");
    cluster.nodes[0].signal(libc::SIGCONT);
    work.stop().await;
    me.shutdown().await;
    cluster.nodes[0].kill().await;
    cluster.shutdown().await;
}

/// Real load, in its own nextest group (it runs alone): one node's process burns both cores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burning_node_gets_few_calls() {
    let process = |burn: &str| {
        [
            "--balancer",
            "work",
            "--cpu-sampler",
            "process",
            "--cpu-sample-interval-ms",
            "200",
            "--burn-threads",
            burn,
        ]
        .map(String::from)
        .to_vec()
    };
    let cluster = cluster(&[process("2"), process("0"), process("0")]).await;
    let names = cluster.names();
    let burner = &names[0];
    let (me, work) = caller(&cluster, 200, 200).await;
    // Fresh readings for all three, the burner's well above the others.
    let before = readings_until(&names, Duration::from_secs(10), |held| {
        all_fresh(&names)(held)
            && names[1..]
                .iter()
                .all(|n| held[burner].cpu > held[n].cpu + 5.0)
    })
    .await;
    eprintln!("readings: {before:?}");
    let per_node = spread(&work, 2_000).await;
    let share = per_node.get(burner).copied().unwrap_or(0) as f64 / 2_000.0;
    assert!(
        share < 0.10,
        "the burning node got {share:.3}: {per_node:?}"
    );
    assert!(work.members().contains(burner), "it stays a member");
    assert_eq!(me.call::<Whoami>(burner, ()).await.unwrap(), *burner);
    let after = held(&names);
    assert!(
        names[1..]
            .iter()
            .all(|n| after[burner].cpu > after[n].cpu + 5.0),
        "{after:?}"
    );
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
