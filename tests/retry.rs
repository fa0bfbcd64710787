//! Retry while the pool is empty, in one process: exact attempts and timing, unlimited
//! retries ending at the call's timeout, a member joining ends the wait, and what is never
//! retried.
//!
//! One `Node` per process: nextest runs each test alone.

use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rpc_load_balancer::telemetry::NODE_SELECTED_EMPTY;
use rpc_load_balancer::{Balancer, BalancerConfig, Error, Node, NodeConfig, Retry, RetryCount};
use rpclb::functions::{register_all, Whoami};
use rpclb::harness::join_stand_ins;

async fn node(name: &str) -> Node {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(name))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    node
}

/// Selections on an empty pool of `balancer` since the last look (the recorder's snapshots
/// take the counts).
fn empty_selections(snapshotter: &Snapshotter, balancer: &str) -> u64 {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key().name() == NODE_SELECTED_EMPTY
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "load_balancer" && l.value() == balancer)
        })
        .map(|(.., value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_pool_is_tried_exactly_count_plus_one_times() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let _node = node("retries").await;
    let empty = Balancer::start(
        BalancerConfig::new("empty")
            .node_match_list(Vec::<String>::new())
            .retry(Retry::new(RetryCount::Times(2), Duration::from_millis(100))),
    )
    .await
    .unwrap();
    empty_selections(&snapshotter, "empty");
    let started = Instant::now();
    let outcome = empty.call::<Whoami>(()).await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(empty_selections(&snapshotter, "empty"), 3, "attempts");
    assert!(
        (Duration::from_millis(150)..Duration::from_secs(1)).contains(&took),
        "{took:?}"
    );
    // Per call: never retry, so one attempt at once.
    let started = Instant::now();
    let outcome = empty.call::<Whoami>(()).retry(Retry::never()).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(empty_selections(&snapshotter, "empty"), 1, "attempts");
    // Casts retry the same way.
    let outcome = empty
        .cast::<Whoami>(())
        .retry(Retry::new(RetryCount::Times(1), Duration::from_millis(50)))
        .await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(empty_selections(&snapshotter, "empty"), 2, "attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlimited_retries_end_at_the_calls_timeout_or_when_a_member_joins() {
    let _node = node("patient").await;
    let waiting = Balancer::start(
        BalancerConfig::new("waiting")
            .node_match_list(Vec::<String>::new())
            .retry(Retry::new(RetryCount::Unlimited, Duration::from_secs(5))),
    )
    .await
    .unwrap();
    // Bounded by the call's timeout, not by the 5 s sleep.
    let started = Instant::now();
    let outcome = waiting
        .call::<Whoami>(())
        .timeout(Duration::from_millis(300))
        .await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    let took = started.elapsed();
    assert!(
        (Duration::from_millis(300)..Duration::from_millis(1_000)).contains(&took),
        "{took:?}"
    );
    // A member joining ends the 5 s wait at once and the call goes to it (a stand-in member
    // is an actor in this process, so the call runs here).
    let call = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            waiting
                .call::<Whoami>(())
                .timeout(Duration::from_secs(8))
                .with_node()
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let joined = Instant::now();
    join_stand_ins("waiting", [1]).await.unwrap();
    let (_reply, member) = call.await.unwrap().unwrap();
    assert!(member.starts_with("stand-in1@"), "{member}");
    assert!(
        joined.elapsed() < Duration::from_secs(1),
        "the call waited {:?} after the join",
        joined.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_balancer_is_never_retried() {
    let _node = node("unknown").await;
    let slow = Retry::new(RetryCount::Times(5), Duration::from_secs(5));
    let gone = Balancer::start(BalancerConfig::new("gone").retry(slow))
        .await
        .unwrap();
    gone.stop().await;
    let started = Instant::now();
    let outcome = gone.call::<Whoami>(()).retry(slow).await;
    assert!(
        matches!(outcome, Err(Error::UnknownBalancer { .. })),
        "{outcome:?}"
    );
    assert!(matches!(
        Balancer::lookup("never_started"),
        Err(Error::UnknownBalancer { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(1));
}
