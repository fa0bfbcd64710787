//! Deterministic subsetting on real nodes (issue 21 item 2): six member processes and two
//! caller processes in the sparse mesh, K = 3, aperture. Each caller learns its index and the
//! caller count from the node directory, dials only its seed and its subset, and its calls
//! land only on its subset; the two subsets together hold every member once; a SIGKILLed
//! subset member is replaced by another member and calls keep succeeding.

use std::collections::BTreeSet;
use std::time::Duration;

use rpc_load_balancer::{ControlReply, ControlRequest, Node, NodeConfig};
use rpclb::functions::RoutedWhoami;
use rpclb::harness::{random_cookie, NodeProcess, NodeSpec};

use crate::BIN;

/// Bound for the directory to spread and the subsets to settle (debug build, 2 shared cores;
/// exchanges every second).
const SETTLE: Duration = Duration::from_secs(30);

const BALANCER: &str = "subset_b";

fn full(name: &str) -> String {
    format!("{name}@127.0.0.1")
}

/// A sparse-mesh child `name` running the balancer (members: names containing `member`),
/// dialling `seed`, with `extra` arguments.
async fn child(name: &str, cookie: &str, seed: Option<&str>, extra: &[&str]) -> NodeProcess {
    let mut spec = NodeSpec::new(name, cookie)
        .arg("--sparse-mesh")
        .arg("--balancer")
        .arg(BALANCER)
        .arg("--node-match")
        .arg("member")
        .arg("--algorithm")
        .arg("round_robin");
    if let Some(seed) = seed {
        spec = spec.peer(seed);
    }
    for arg in extra {
        spec = spec.arg(*arg);
    }
    spec.start(BIN)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn members_of(me: &Node, node: &str) -> BTreeSet<String> {
    match me
        .control(node, ControlRequest::Members(BALANCER.into()))
        .await
    {
        Ok(ControlReply::Members(Some(members))) => members.into_iter().collect(),
        other => panic!("{node}: {other:?}"),
    }
}

/// `node`'s peers, the test node left out.
async fn peers_of(me: &Node, node: &str) -> BTreeSet<String> {
    match me.control(node, ControlRequest::Nodes).await {
        Ok(ControlReply::Nodes(nodes)) => nodes.into_iter().filter(|n| n != me.name()).collect(),
        other => panic!("{node}: {other:?}"),
    }
}

/// Waits (within [`SETTLE`]) until `caller`'s balancer has exactly `expected` as members.
async fn wait_for_subset(me: &Node, caller: &str, expected: &BTreeSet<String>) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let members = members_of(me, caller).await;
        if &members == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{caller}'s members are {members:?}, expected its subset {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Makes 30 calls through `caller`'s balancer; every one must succeed and land in `subset`.
/// Returns the members that served.
async fn calls_land_in(me: &Node, caller: &str, subset: &BTreeSet<String>) -> BTreeSet<String> {
    let mut served = BTreeSet::new();
    for _ in 0..30 {
        let member = me
            .call::<RoutedWhoami>(caller, BALANCER.to_string())
            .await
            .unwrap_or_else(|e| panic!("a call through {caller}: {e}"));
        assert!(
            subset.contains(&member),
            "{caller} routed to {member}, outside {subset:?}"
        );
        served.insert(member);
    }
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_dial_and_route_to_their_subsets_only_and_replace_a_killed_member() {
    let cookie = random_cookie();
    let seed = child("member_0", &cookie, None, &[]).await;
    let mut nodes = Vec::new();
    for i in 1..6 {
        nodes.push(child(&format!("member_{i}"), &cookie, Some(seed.addr()), &[]).await);
    }
    let subset_args = ["--subset-size", "3"];
    for i in 0..2 {
        let name = format!("caller_{i}");
        nodes.push(child(&name, &cookie, Some(seed.addr()), &subset_args).await);
    }
    // The test node is a client: no sparse node exchanges its directory with it, and it
    // dials every node it learns of from the seed.
    let me = Node::start(
        NodeConfig::new("tester", "127.0.0.1:0")
            .cookie(&cookie)
            .client(true),
    )
    .await
    .unwrap();
    me.connect(seed.addr()).await.unwrap();
    me.wait_for_peers(8, SETTLE).await.unwrap();

    let member = |i: usize| full(&format!("member_{i}"));
    let set = |indices: &[usize]| indices.iter().map(|&i| member(i)).collect::<BTreeSet<_>>();
    let (caller_0, caller_1) = (full("caller_0"), full("caller_1"));
    // Aperture over 6 members and 2 callers (sorted by name): caller 0 starts at member 0,
    // caller 1 at 6 / 2 = member 3; K = 3 each, so every member is in exactly one subset.
    let subset_0 = set(&[0, 1, 2]);
    let subset_1 = set(&[3, 4, 5]);
    wait_for_subset(&me, &caller_0, &subset_0).await;
    wait_for_subset(&me, &caller_1, &subset_1).await;
    assert_eq!(
        subset_0.union(&subset_1).count(),
        6,
        "the two subsets hold every member once"
    );

    // Sessions: a caller has its seed (member_0) and its subset, never the other caller; a
    // member other than the seed has the seed and the callers whose subset holds it, never
    // another member (no full mesh).
    let seed_name = member(0);
    for (caller, subset) in [(&caller_0, &subset_0), (&caller_1, &subset_1)] {
        let mut allowed = subset.clone();
        allowed.insert(seed_name.clone());
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let peers = peers_of(&me, caller).await;
            if peers == allowed {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{caller} has sessions to {peers:?}, expected {allowed:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for i in 1..6 {
        let caller = if i < 3 { &caller_0 } else { &caller_1 };
        let allowed: BTreeSet<String> = [seed_name.clone(), caller.clone()].into();
        // A caller's dial made before the directory was complete is closed 2 s after its
        // subset settled.
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            let peers = peers_of(&me, &member(i)).await;
            if peers == allowed {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} has sessions to {peers:?}, expected its seed and its caller {allowed:?}",
                member(i)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // Calls land only on each caller's subset (round robin: on all of it).
    assert_eq!(calls_land_in(&me, &caller_0, &subset_0).await, subset_0);
    assert_eq!(calls_land_in(&me, &caller_1, &subset_1).await, subset_1);

    // member_4 (in caller_1's subset) is SIGKILLed. Aperture over the 5 left: caller 1
    // starts at 5 / 2 = 2 → members 2, 3, 5 (member_2 and member_5 dialled in its place);
    // caller 0 keeps 0, 1, 2.
    let killed = nodes.iter_mut().find(|n| n.node() == member(4)).unwrap();
    killed.kill().await;
    let replaced = set(&[2, 3, 5]);
    wait_for_subset(&me, &caller_1, &replaced).await;
    assert_eq!(calls_land_in(&me, &caller_1, &replaced).await, replaced);
    assert_eq!(calls_land_in(&me, &caller_0, &subset_0).await, subset_0);
    assert!(!peers_of(&me, &caller_1).await.contains(&member(4)));

    me.shutdown().await;
    drop(nodes);
    drop(seed);
}

/// A caller with `--subset-size 5` over 2 members is not refused: its subset is both members,
/// and it says so in an INFO log line (with the size and the member count) once it knows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subset_size_over_the_member_count_takes_every_member_and_says_so() {
    let cookie = random_cookie();
    let seed = child("member_0", &cookie, None, &[]).await;
    let other = child("member_1", &cookie, Some(seed.addr()), &[]).await;
    let mut spec = NodeSpec::new("caller_0", &cookie)
        .capture_stderr()
        .log_filter("warn,rpc_load_balancer=info")
        .peer(seed.addr());
    for arg in [
        "--sparse-mesh",
        "--balancer",
        BALANCER,
        "--node-match",
        "member",
        "--algorithm",
        "round_robin",
        "--subset-size",
        "5",
    ] {
        spec = spec.arg(arg);
    }
    let caller = spec.start(BIN).await.unwrap();
    let me = Node::start(
        NodeConfig::new("tester", "127.0.0.1:0")
            .cookie(&cookie)
            .client(true),
    )
    .await
    .unwrap();
    me.connect(caller.addr()).await.unwrap();
    let both: BTreeSet<String> = [full("member_0"), full("member_1")].into();
    wait_for_subset(&me, caller.node(), &both).await;
    // The line comes with the subset that has both members, or before it with one.
    let deadline = tokio::time::Instant::now() + SETTLE;
    let line = loop {
        let log = caller.stderr();
        let said = log
            .lines()
            .find(|l| l.contains("the subset is every member"))
            .map(str::to_string);
        if let Some(line) = said {
            break line;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no subset line in the caller's log:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(line.contains("subset_size=5"), "{line}");
    assert!(line.contains(&format!("balancer={BALANCER}")), "{line}");
    me.shutdown().await;
    drop((caller, other, seed));
}
