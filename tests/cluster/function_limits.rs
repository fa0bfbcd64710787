//! A function's work ends with its call, and no argument makes a demo function work or
//! allocate beyond the node's caps: `burn` stops at its caller's timeout (it polls its
//! `CallContext` on the blocking pool), and what is over the caps is refused with
//! `BadRequest` while the node keeps serving.

use std::time::{Duration, Instant};

use rpc_load_balancer::{ControlReply, ControlRequest, Error, Node};
use rpclb::functions::{Blob, Burn, MAX_CAST_MS};
use rpclb::harness::Cluster;

use crate::{Echo, Sleep, BIN, MESH_TIMEOUT};

/// CPU time (user + system) process `pid` has used, from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the node's stat");
    // Fields after the command (which may hold spaces) in parentheses: state is field 3,
    // utime 14 and stime 15, in clock ticks.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("stat format") + 1..]
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Duration::from_secs_f64(ticks as f64 / per_second)
}

/// The share of one core process `pid` uses over `window`.
async fn cpu_share(pid: u32, window: Duration) -> f64 {
    let (before, started) = (cpu_time(pid), Instant::now());
    tokio::time::sleep(window).await;
    let used = cpu_time(pid).saturating_sub(before);
    used.as_secs_f64() / started.elapsed().as_secs_f64()
}

/// The share of `samples` looks at process `pid`, 50 ms apart, that found one of its threads
/// runnable (state `R` in `/proc/<pid>/task/*/stat`). A spinning thread is runnable whether or
/// not a loaded machine gives it a core, so this tells a spinning node from an idle one even
/// where the CPU time cannot.
async fn runnable_share(pid: u32, samples: u32) -> f64 {
    let mut runnable = 0;
    for _ in 0..samples {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the node's threads");
        let any = tasks.flatten().any(|task| {
            std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                stat.rfind(')')
                    .and_then(|at| stat[at + 1..].split_whitespace().next())
                    == Some("R")
            })
        });
        runnable += u32::from(any);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f64::from(runnable) / f64::from(samples)
}

/// The calls `node` is serving now.
async fn served_in_flight(me: &Node, node: &str) -> u64 {
    match me.control(node, ControlRequest::Stats).await {
        Ok(ControlReply::Stats {
            served_in_flight, ..
        }) => served_in_flight,
        other => panic!("stats gave {other:?}"),
    }
}

/// A busy core would use 1.0; an idle node a few percent. Generous for a loaded machine.
const IDLE_SHARE: f64 = 0.4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burning_call_stops_at_its_timeout() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let target = cluster.names()[0].clone();
    let pid = cluster.nodes[0].pid();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    // `rpclb call --timeout-ms 2000 burn 18446744073709551615`.
    let call = {
        let (me, target) = (me.clone(), target.clone());
        tokio::spawn(async move {
            me.call::<Burn>(target, u64::MAX)
                .timeout(Duration::from_millis(2_000))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let burning = runnable_share(pid, 20).await;
    let outcome = call.await.unwrap();
    assert!(
        matches!(outcome, Err(Error::RequestTimeout { .. })),
        "{outcome:?}"
    );
    // The serving node's deadline fires at the same time as the caller's; give it a moment.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let share = cpu_share(pid, Duration::from_millis(1_500)).await;
    let runnable = runnable_share(pid, 20).await;
    eprintln!(
        "burning: a thread runnable in {:.0} % of looks; after the timeout: {:.1} % of a core \
         used, a thread runnable in {:.0} % of looks",
        burning * 100.0,
        share * 100.0,
        runnable * 100.0
    );
    assert!(burning > 0.9, "the burn was not seen spinning");
    assert!(
        share < IDLE_SHARE,
        "the node still used {:.0} % of a core after the burn timed out",
        share * 100.0
    );
    assert!(
        runnable < 0.5,
        "a thread of the node still spins after the burn timed out"
    );
    assert_eq!(served_in_flight(&me, &target).await, 0);

    // A cast has no deadline: a burn longer than the cap is refused, not run.
    me.cast::<Burn>(&target, u64::MAX).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let share = cpu_share(pid, Duration::from_millis(1_000)).await;
    let runnable = runnable_share(pid, 20).await;
    eprintln!(
        "after the cast of burn: {:.1} % of a core, a thread runnable in {:.0} % of looks",
        share * 100.0,
        runnable * 100.0
    );
    assert!(
        share < IDLE_SHARE && runnable < 0.5,
        "the node spins for a cast of burn over the cap"
    );

    // The node still serves, burn included.
    let loops = me
        .call::<Burn>(target.clone(), 20)
        .timeout(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(loops > 0);
    assert_eq!(
        me.call::<Echo>(target, "after".into()).await.unwrap(),
        "after"
    );
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_functions_refuse_arguments_over_the_nodes_caps() {
    let cluster = Cluster::start(BIN, 1, &["--max-payload-bytes", "100000"])
        .await
        .unwrap();
    let target = cluster.names()[0].clone();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    // `rpclb call blob 1000000000000`: refused without allocating.
    match me.call::<Blob>(target.clone(), 1_000_000_000_000).await {
        Err(Error::BadRequest { node, message }) => {
            assert_eq!(node, target);
            assert!(message.contains("max_payload_bytes of 100000"), "{message}");
        }
        other => panic!("blob 1e12 gave {other:?}"),
    }
    match me.call::<Blob>(target.clone(), u64::MAX).await {
        Err(Error::BadRequest { .. }) => {}
        other => panic!("blob u64::MAX gave {other:?}"),
    }
    match me.call::<Blob>(target.clone(), 100_001).await {
        Err(Error::BadRequest { .. }) => {}
        other => panic!("blob over the cap by one gave {other:?}"),
    }
    assert_eq!(
        me.call::<Blob>(target.clone(), 1_000).await.unwrap().len(),
        1_000
    );

    // A call of sleep has a deadline: any length ends at it.
    let outcome = me
        .call::<Sleep>(target.clone(), u64::MAX)
        .timeout(Duration::from_millis(300))
        .await;
    assert!(
        matches!(outcome, Err(Error::RequestTimeout { .. })),
        "{outcome:?}"
    );
    // A cast has none: over the cap it is refused (only logged there), so nothing stays in
    // flight; within it, it runs.
    me.cast::<Sleep>(&target, MAX_CAST_MS + 1).await.unwrap();
    me.cast::<Sleep>(&target, u64::MAX).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(served_in_flight(&me, &target).await, 0);
    me.cast::<Sleep>(&target, 5_000).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while served_in_flight(&me, &target).await != 1 {
        assert!(Instant::now() < deadline, "the cast within the cap runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    assert_eq!(
        me.call::<Echo>(target, "still here".into()).await.unwrap(),
        "still here"
    );
    me.shutdown().await;
    cluster.shutdown().await;
}
