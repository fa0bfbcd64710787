//! Actor groups across real processes: three `rpclb node` processes each run two worker actors
//! in one pg group (`--group-workers`); the test process balances over the six actors with
//! LeastConnections and with PeakEwma, then SIGKILLs one worker process: calls keep succeeding
//! and its actors leave the group. With LoadWeighted, the actors of a node that reports a high
//! CPU load get fewer calls (the group asks each member's node for its load).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rpc_load_balancer::group::{ActorGroup, ActorGroupConfig};
use rpc_load_balancer::routing::Algorithm;
use rpc_load_balancer::{Error, LeastConnections, LoadWeighted, PeakEwma};
use rpclb::group_worker::GroupWork;
use rpclb::harness::Cluster;

use crate::{BIN, MESH_TIMEOUT};

/// Bound on every wait of this test.
const BOUND: Duration = Duration::from_secs(10);

/// Workers per process.
const PER_NODE: usize = 2;

/// Calls `group` `waves` times with `concurrent` calls at once (each answered after
/// `delay_ms`), and returns the member ids that answered; every call must succeed.
async fn spread(
    group: &ActorGroup<GroupWork>,
    waves: usize,
    concurrent: usize,
    delay_ms: u64,
) -> HashSet<String> {
    let mut answered = HashSet::new();
    for _ in 0..waves {
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..concurrent {
            let group = group.clone();
            calls.spawn(async move {
                group
                    .call(move |port| GroupWork::Who(delay_ms, port))
                    .timeout(BOUND)
                    .await
            });
        }
        while let Some(reply) = calls.join_next().await {
            answered.insert(reply.unwrap().expect("a call to a live group"));
        }
    }
    answered
}

async fn balance_then_kill(algorithm: impl Algorithm, group_name: &str) {
    let args = [
        "--group-workers",
        "2",
        "--group-scope",
        "it_groups",
        "--group-name",
        group_name,
    ];
    let mut cluster = Cluster::start(BIN, 3, &args).await.unwrap();
    let me = cluster.join("caller", MESH_TIMEOUT).await.unwrap();
    let group = ActorGroup::<GroupWork>::start(
        ActorGroupConfig::new("it_groups", group_name).algorithm(algorithm),
    )
    .await
    .unwrap();
    let members = group
        .wait_for_members(3 * PER_NODE, BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}; members {:?}", group.members()));
    let ids: Vec<String> = members.views().iter().map(|v| v.id().to_string()).collect();
    let mut sorted = ids.clone();
    sorted.sort_by(|a, b| {
        let split = |s: &str| {
            let (node, pid) = s.rsplit_once('#').unwrap();
            (node.to_string(), pid.parse::<u64>().unwrap())
        };
        split(a).cmp(&split(b))
    });
    assert_eq!(ids, sorted, "members by (node, pid)");
    for process in &cluster.nodes {
        let on_node = members
            .as_slice()
            .iter()
            .filter(|m| m.node() == process.node())
            .count();
        assert_eq!(
            on_node,
            PER_NODE,
            "every worker of {} is a member",
            process.node()
        );
    }

    // Every worker actor on every node gets calls.
    let answered = spread(&group, 20, 12, 20).await;
    let all: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(
        answered, all,
        "every worker answered (its reply is its member id)"
    );
    assert_eq!(group.in_flight(), 0);

    // One worker process dies: its actors leave, and calls keep succeeding.
    let killed = cluster.nodes[2].node().to_string();
    cluster.nodes[2].kill().await;
    let mut watch = group.watch_members();
    let mut failed_while_leaving = 0;
    let left = tokio::time::timeout(BOUND, async {
        loop {
            if !watch
                .borrow_and_update()
                .as_slice()
                .iter()
                .any(|m| m.node() == killed)
            {
                return;
            }
            match group
                .call(|port| GroupWork::Who(0, port))
                .timeout(Duration::from_secs(1))
                .await
            {
                Ok(id) => assert!(
                    !id.starts_with(&format!("{killed}#")),
                    "a dead worker answered"
                ),
                // A call sent just before the session closed may be lost with it.
                Err(Error::ServiceUnavailable { .. } | Error::RequestTimeout { .. }) => {
                    failed_while_leaving += 1;
                }
                Err(other) => panic!("{other}"),
            }
        }
    })
    .await;
    assert!(left.is_ok(), "the killed node's workers left the group");
    assert!(
        failed_while_leaving <= 3,
        "{failed_while_leaving} calls failed while it left"
    );
    assert_eq!(group.members().len(), 2 * PER_NODE);
    let answered = spread(&group, 10, 8, 5).await;
    assert_eq!(
        answered.len(),
        2 * PER_NODE,
        "the survivors share the calls: {answered:?}"
    );
    assert!(answered
        .iter()
        .all(|id| !id.starts_with(&format!("{killed}#"))));

    group.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_group_least_connections_spreads_over_every_worker_and_survives_a_killed_process() {
    balance_then_kill(LeastConnections::new(), "lc_workers").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_group_peak_ewma_spreads_over_every_worker_and_survives_a_killed_process() {
    balance_then_kill(PeakEwma::new(), "ewma_workers").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_actor_that_answers_too_late_is_a_timeout() {
    let args = [
        "--group-workers",
        "1",
        "--group-scope",
        "it_groups",
        "--group-name",
        "late",
    ];
    let cluster = Cluster::start(BIN, 1, &args).await.unwrap();
    let me = cluster.join("caller", MESH_TIMEOUT).await.unwrap();
    let group = ActorGroup::<GroupWork>::start(ActorGroupConfig::new("it_groups", "late"))
        .await
        .unwrap();
    group.wait_for_members(1, BOUND).await.unwrap();
    // Its node drops the reply port when the port's timeout (the call's) runs out, racing
    // the caller's own timer: either way the caller is told of a timeout.
    for _ in 0..5 {
        let late = group
            .call(|port| GroupWork::Who(2_000, port))
            .timeout(Duration::from_millis(200))
            .await;
        assert!(
            matches!(late, Err(Error::RequestTimeout { .. })),
            "{late:?}"
        );
    }
    group.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// Calls `group` in waves of `concurrent` calls (each answered after 10 ms) for `time`, and
/// counts the answers per node; every call must succeed.
async fn calls_per_node(
    group: &ActorGroup<GroupWork>,
    time: Duration,
    concurrent: usize,
) -> HashMap<String, usize> {
    let mut per_node = HashMap::new();
    let start = tokio::time::Instant::now();
    while start.elapsed() < time {
        let mut calls = tokio::task::JoinSet::new();
        for _ in 0..concurrent {
            let group = group.clone();
            calls.spawn(async move {
                group
                    .call(|port| GroupWork::Who(10, port))
                    .timeout(BOUND)
                    .await
            });
        }
        while let Some(reply) = calls.join_next().await {
            let id = reply.unwrap().expect("a call to a live group");
            let (node, _) = id.rsplit_once('#').expect("a member id");
            *per_node.entry(node.to_string()).or_default() += 1;
        }
    }
    per_node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actor_group_load_weighted_sends_fewer_calls_to_the_actors_of_a_loaded_node() {
    let common = [
        "--group-workers",
        "2",
        "--group-scope",
        "it_groups",
        "--group-name",
        "lw_workers",
        "--cpu-sample-interval-ms",
        "100",
        "--cpu-sampler",
    ];
    let with =
        |cpu: &'static str| -> Vec<&'static str> { common.iter().copied().chain([cpu]).collect() };
    let (loaded, light) = (with("const:90"), with("const:10"));
    let cluster = Cluster::start_each(BIN, &[&loaded, &light, &light])
        .await
        .unwrap();
    let me = cluster.join("caller", MESH_TIMEOUT).await.unwrap();
    let algorithm = LoadWeighted::new()
        .blackout_period(Duration::ZERO)
        .weight_update_period(Duration::from_millis(200));
    let group = ActorGroup::<GroupWork>::start(
        ActorGroupConfig::new("it_groups", "lw_workers").algorithm(algorithm),
    )
    .await
    .unwrap();
    group
        .wait_for_members(3 * PER_NODE, BOUND)
        .await
        .unwrap_or_else(|e| panic!("{e}; members {:?}", group.members()));

    // Until reports arrive every actor weighs the same; then an actor's weight is this
    // caller's rate to its node per unit of the node's CPU (90 % against 10 %).
    let warm = calls_per_node(&group, Duration::from_millis(1_500), 8).await;
    assert_eq!(
        warm.len(),
        3,
        "every node answered while weights settled: {warm:?}"
    );
    let counts = calls_per_node(&group, Duration::from_millis(1_500), 8).await;
    let loaded_node = cluster.nodes[0].node();
    let to_loaded = counts.get(loaded_node).copied().unwrap_or(0);
    let to_light: Vec<usize> = cluster.nodes[1..]
        .iter()
        .map(|n| counts.get(n.node()).copied().unwrap_or(0))
        .collect();
    assert!(
        to_light.iter().all(|&light| to_loaded * 3 < light),
        "the loaded node's actors got {to_loaded} calls, the others' {to_light:?} ({counts:?})"
    );

    group.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
