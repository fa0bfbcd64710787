//! Balancers across real processes: membership, selection, supervision, the binary's commands.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, Node, Random, RoundRobin,
};
use rpclb::harness::{Cluster, NodeSpec};

use crate::{Whoami, BIN, MESH_TIMEOUT};

/// When a call started, and how it ended.
type Outcome = (Instant, Result<String, Error>);

/// Bound for a membership change to reach every node.
const MEMBERSHIP_BOUND: Duration = Duration::from_secs(2);

/// A client-only balancer `name` in this process, waiting for `members` members.
async fn client(name: &str, config: BalancerConfig, members: usize) -> Balancer {
    let balancer = Balancer::start(config.node_match_list(Vec::<String>::new()))
        .await
        .unwrap();
    let mut watch = balancer.watch_members();
    tokio::time::timeout(MESH_TIMEOUT, watch.wait_for(|m| m.len() >= members))
        .await
        .unwrap_or_else(|_| panic!("{name}: fewer than {members} members"))
        .unwrap();
    balancer
}

/// `node`'s view of `balancer`'s members, through admin control.
async fn members_seen_by(me: &Node, node: &str, balancer: &str) -> Option<Vec<String>> {
    match me
        .control(node, ControlRequest::Members(balancer.into()))
        .await
        .unwrap()
    {
        ControlReply::Members(members) => members,
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Waits until every node in `observers` sees `expected` as the members of `balancer`.
async fn wait_everywhere(
    me: &Node,
    observers: &[String],
    balancer: &str,
    expected: &[String],
    bound: Duration,
) {
    let deadline = Instant::now() + bound;
    for observer in observers {
        loop {
            let seen = members_seen_by(me, observer, balancer).await;
            if seen.as_deref() == Some(expected) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{observer} sees {seen:?}, expected {expected:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn count_calls(balancer: &Balancer, calls: usize) -> BTreeMap<String, usize> {
    let mut per_node = BTreeMap::new();
    for _ in 0..calls {
        let node = balancer.call::<Whoami>(()).await.unwrap();
        *per_node.entry(node).or_insert(0) += 1;
    }
    per_node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_is_exact_and_random_is_fair() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();

    let rr = client(
        "work",
        BalancerConfig::new("work").algorithm(RoundRobin::new()),
        3,
    )
    .await;
    assert!(
        !rr.is_member(),
        "tester does not match an empty node_match_list"
    );
    assert_eq!(rr.members().nodes(), cluster.names());
    let per_node = count_calls(&rr, 3000).await;
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        vec![1000, 1000, 1000],
        "{per_node:?}"
    );
    rr.stop().await;

    let random = client(
        "work",
        BalancerConfig::new("work").algorithm(Random::new()),
        3,
    )
    .await;
    let per_node = count_calls(&random, 3000).await;
    assert_eq!(per_node.len(), 3, "{per_node:?}");
    for (node, count) in &per_node {
        let share = *count as f64 / 3000.0;
        assert!((0.25..=0.42).contains(&share), "{node} got {share:.3}");
    }
    random.stop().await;
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_and_kills_reach_every_snapshot_and_no_later_call_fails() {
    let mut cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let balancer = client("work", BalancerConfig::new("work"), 3).await;

    // A fourth member joins: every node sees it within the bound.
    let late = NodeSpec::new("n3", cluster.cookie())
        .peer(cluster.nodes[0].addr())
        .arg("--balancer")
        .arg("work")
        .start(cluster.bin())
        .await
        .unwrap();
    let joined_at = Instant::now();
    let mut all = cluster.names();
    all.push(late.node().to_string());
    let mut watch = balancer.watch_members();
    tokio::time::timeout(MEMBERSHIP_BOUND, watch.wait_for(|m| m.len() == 4))
        .await
        .unwrap()
        .unwrap();
    wait_everywhere(
        &me,
        &all,
        "work",
        &all,
        MEMBERSHIP_BOUND.saturating_sub(joined_at.elapsed()),
    )
    .await;
    assert!(
        joined_at.elapsed() < MEMBERSHIP_BOUND,
        "took {:?}",
        joined_at.elapsed()
    );

    // Stream calls, SIGKILL one member: it leaves every snapshot within the bound, and no call
    // selected after this node saw it leave fails.
    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for _ in 0..8 {
        let (balancer, outcomes, stop) =
            (balancer.clone(), Arc::clone(&outcomes), Arc::clone(&stop));
        callers.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let started = Instant::now();
                let result = balancer
                    .call::<Whoami>(())
                    .timeout(Duration::from_secs(5))
                    .await;
                outcomes.lock().unwrap().push((started, result));
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let victim = cluster.nodes[2].node().to_string();
    let killed_at = Instant::now();
    cluster.nodes[2].kill().await;
    tokio::time::timeout(MEMBERSHIP_BOUND, watch.wait_for(|m| !m.contains(&victim)))
        .await
        .unwrap()
        .unwrap();
    let left_at = Instant::now();
    let survivors: Vec<String> = all.iter().filter(|n| **n != victim).cloned().collect();
    wait_everywhere(&me, &survivors, "work", &survivors, MEMBERSHIP_BOUND).await;
    assert!(killed_at.elapsed() < MEMBERSHIP_BOUND + Duration::from_millis(500));
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for caller in callers {
        caller.await.unwrap();
    }
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    let later: Vec<_> = outcomes
        .iter()
        .filter(|(started, _)| *started > left_at)
        .collect();
    assert!(
        later.len() > 10,
        "calls kept flowing after the kill ({} calls)",
        later.len()
    );
    for (_, result) in &later {
        let node = result
            .as_ref()
            .unwrap_or_else(|e| panic!("a call selected after the leave failed: {e}"));
        assert_ne!(node, &victim);
    }
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_and_starting_a_balancer_changes_membership() {
    let cluster = Cluster::start(BIN, 3, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let balancer = client("work", BalancerConfig::new("work"), 3).await;
    let names = cluster.names();
    let target = names[1].clone();

    me.control(&target, ControlRequest::StopBalancer("work".into()))
        .await
        .unwrap();
    let rest: Vec<String> = names.iter().filter(|n| **n != target).cloned().collect();
    let others = [names[0].clone(), names[2].clone()];
    wait_everywhere(&me, &others, "work", &rest, MEMBERSHIP_BOUND).await;
    assert_eq!(
        members_seen_by(&me, &target, "work").await,
        None,
        "stopped there"
    );
    for _ in 0..30 {
        assert_ne!(balancer.call::<Whoami>(()).await.unwrap(), target);
    }

    let start = ControlRequest::StartBalancer {
        name: "work".into(),
        algorithm: "round_robin".into(),
        node_match_list: None,
    };
    assert_eq!(
        me.control(&target, start.clone()).await.unwrap(),
        ControlReply::Done
    );
    wait_everywhere(&me, &names, "work", &names, MEMBERSHIP_BOUND).await;
    match me.control(&target, start).await {
        Err(Error::Remote { message, .. }) => {
            assert!(message.contains("already started"), "{message}")
        }
        other => panic!("second start gave {other:?}"),
    }
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_load_balancer_is_restarted_and_rejoins() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let balancer = client("work", BalancerConfig::new("work"), 2).await;
    let target = cluster.names()[1].clone();
    let mut watch = balancer.watch_members();
    let before = balancer.members().get(&target).unwrap().id();

    let killed_at = Instant::now();
    me.control(&target, ControlRequest::KillLoadBalancer("work".into()))
        .await
        .unwrap();
    // A new LoadBalancer actor is the member within the bound (the old one was killed).
    let restarted = watch.wait_for(|m| m.get(&target).is_some_and(|member| member.id() != before));
    tokio::time::timeout(MEMBERSHIP_BOUND, restarted)
        .await
        .expect("member again in time")
        .unwrap();
    assert!(
        killed_at.elapsed() < MEMBERSHIP_BOUND,
        "took {:?}",
        killed_at.elapsed()
    );
    wait_everywhere(
        &me,
        &cluster.names(),
        "work",
        &cluster.names(),
        MEMBERSHIP_BOUND,
    )
    .await;
    // The restarted member serves.
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..40 {
        served.insert(balancer.call::<Whoami>(()).await.unwrap());
    }
    assert!(served.contains(&target), "{served:?}");
    me.shutdown().await;
}

/// A stand-in for an app's supervisor.
struct AppSupervisor;
impl Actor for AppSupervisor {
    type Msg = ();
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_linked_lookup_and_duplicates() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let (app, _) = Actor::spawn(None, AppSupervisor, ()).await.unwrap();

    // Not a member here ("tester" does not contain "worker"), yet its calls succeed.
    let config = BalancerConfig::new("work").node_match_list(["worker"]);
    let balancer = Balancer::spawn_linked(config.clone(), app.get_cell())
        .await
        .unwrap();
    assert!(!balancer.is_member());
    let mut watch = balancer.watch_members();
    tokio::time::timeout(MESH_TIMEOUT, watch.wait_for(|m| m.len() == 1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(balancer.members().nodes(), cluster.names());
    assert_eq!(
        balancer.call::<Whoami>(()).await.unwrap(),
        cluster.names()[0]
    );

    let found = Balancer::lookup("work").unwrap();
    assert_eq!(found.name(), "work");
    assert_eq!(found.actor().get_id(), balancer.actor().get_id());
    match Balancer::start(config.clone()).await {
        Err(Error::BalancerAlreadyStarted { balancer }) => assert_eq!(balancer, "work"),
        other => panic!("duplicate start gave {other:?}"),
    }
    assert!(matches!(
        Balancer::lookup("nope"),
        Err(Error::UnknownBalancer { .. })
    ));

    // The app's supervisor stopping takes the balancer with it; the name is free again.
    app.stop_and_wait(None, Some(Duration::from_secs(5)))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while balancer.is_running() {
        assert!(
            Instant::now() < deadline,
            "the balancer outlived its parent"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(matches!(
        Balancer::lookup("work"),
        Err(Error::UnknownBalancer { .. })
    ));
    let again = Balancer::start(config).await.unwrap();
    again.stop().await;
    me.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balanced_casts_reach_the_members() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let balancer = client(
        "work",
        BalancerConfig::new("work").algorithm(RoundRobin::new()),
        2,
    )
    .await;
    let served = |me: Node| async move {
        let mut total = 0;
        for node in me.nodes() {
            if let ControlReply::Stats { served_total, .. } =
                me.control(&node, ControlRequest::Stats).await.unwrap()
            {
                total += served_total;
            }
        }
        total
    };
    let before = served(me.clone()).await;
    for _ in 0..20 {
        balancer
            .cast::<crate::Echo>("fire and forget".into())
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while served(me.clone()).await < before + 20 {
        assert!(Instant::now() < deadline, "casts were not all served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    me.shutdown().await;
}
