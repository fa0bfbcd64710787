//! Retry while the pool is empty, in one process: exact attempts and timing (reference
//! §11.3 restated for balanced calls), unlimited retries ending at the call's timeout, a member
//! joining ends the wait, the node's retry as the default, and what is never retried.
//!
//! Attempts are counted as the library's "waiting to select again" events + 1
//! ([`RetryWaits`]), which exist with or without the `telemetry` feature; with it, the
//! empty-selection metric must agree.
//!
//! One `Node` per process: nextest runs each test alone.

use std::time::{Duration, Instant};

use rpc_load_balancer::{Balancer, BalancerConfig, Error, Node, NodeConfig, Retry, RetryCount};
use rpclb::functions::{register_all, Whoami};
use rpclb::harness::join_stand_ins;
use rpclb::retry_waits::RetryWaits;

async fn start(config: NodeConfig) -> Node {
    let node = Node::start(config).await.unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    node
}

async fn node(name: &str) -> Node {
    start(NodeConfig::new(name, "127.0.0.1:0").cookie(name)).await
}

/// A balancer of which this node is not a member: its pool stays empty until a stand-in
/// joins.
fn empty(name: &str) -> BalancerConfig {
    BalancerConfig::new(name).node_match_list(Vec::<String>::new())
}

/// Selections on an empty pool of `balancer` since the last look, as the
/// `node.selected.empty` metric counts them (the recorder's snapshots take the counts).
#[cfg(feature = "telemetry")]
fn empty_selections(snapshotter: &metrics_util::debugging::Snapshotter, balancer: &str) -> u64 {
    use metrics_util::debugging::DebugValue;
    use rpc_load_balancer::telemetry::NODE_SELECTED_EMPTY;
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
    #[cfg(feature = "telemetry")]
    let snapshotter = {
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        snapshotter
    };
    // The metric agrees with the waits: one empty selection per attempt.
    let agrees = |_attempts: u64| {
        #[cfg(feature = "telemetry")]
        assert_eq!(empty_selections(&snapshotter, "empty"), _attempts, "metric");
    };
    let waits = RetryWaits::install();
    let _node = node("retries").await;
    let empty = Balancer::start(
        empty("empty").retry(Retry::new(RetryCount::Times(2), Duration::from_millis(100))),
    )
    .await
    .unwrap();
    agrees(0);
    // §11.3.3: always nobody, count 2 → the error after exactly 3 attempts.
    let started = Instant::now();
    let outcome = empty.call::<Whoami>(()).await;
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("empty") + 1, 3, "attempts");
    agrees(3);
    assert!(
        (Duration::from_millis(150)..Duration::from_secs(1)).contains(&took),
        "{took:?}"
    );
    // §11.3.5: per call, never retry (whatever the balancer's count), so one attempt at once.
    let started = Instant::now();
    let outcome = empty.call::<Whoami>(()).retry(Retry::never()).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(waits.take("empty") + 1, 1, "attempts");
    agrees(1);
    // Casts retry the same way.
    let outcome = empty
        .cast::<Whoami>(())
        .retry(Retry::new(RetryCount::Times(1), Duration::from_millis(50)))
        .await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("empty") + 1, 2, "attempts");
    agrees(2);
}

/// Calls `balancer` (whose pool is empty) in the background, joins stand-in `stand_in` once
/// the call has waited `waits_before_join` times, and returns who served the call.
async fn served_after_waits(
    waits: &RetryWaits,
    balancer: &Balancer,
    stand_in: usize,
    waits_before_join: usize,
) -> String {
    let call = {
        let balancer = balancer.clone();
        tokio::spawn(async move {
            balancer
                .call::<Whoami>(())
                .timeout(Duration::from_secs(20))
                .with_node()
                .await
        })
    };
    let name = balancer.name().to_string();
    assert!(
        waits
            .wait_for(&name, waits_before_join, Duration::from_secs(15))
            .await,
        "{name} waited only {} times",
        waits.count(&name)
    );
    join_stand_ins(&name, [stand_in]).await.unwrap();
    let (_reply, member) = call.await.unwrap().unwrap();
    member.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joining_ends_the_retries_with_the_calls_value() {
    let waits = RetryWaits::install();
    let _node = node("joining").await;
    // Each wait is 1 s (±20 %) so the stand-in surely joins during the awaited one; a
    // membership change ends the wait at once.
    let sleep = Duration::from_secs(1);
    // §11.3.2: nobody twice, then a member (count 5) → its value after exactly 3 attempts.
    let five = Balancer::start(empty("five").retry(Retry::new(RetryCount::Times(5), sleep)))
        .await
        .unwrap();
    let member = served_after_waits(&waits, &five, 1, 2).await;
    assert!(member.starts_with("stand-in1@"), "{member}");
    assert_eq!(waits.take("five") + 1, 3, "attempts");
    // §11.3.4: unlimited, nobody three times, then a member → its value after exactly 4
    // attempts.
    let unlimited =
        Balancer::start(empty("unlimited").retry(Retry::new(RetryCount::Unlimited, sleep)))
            .await
            .unwrap();
    let member = served_after_waits(&waits, &unlimited, 2, 3).await;
    assert!(member.starts_with("stand-in2@"), "{member}");
    assert_eq!(waits.take("unlimited") + 1, 4, "attempts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodes_retry_is_the_default_and_a_balancer_or_call_overrides_it() {
    let waits = RetryWaits::install();
    let fast = |count| Retry::new(RetryCount::Times(count), Duration::from_millis(20));
    let _node = start(
        NodeConfig::new("defaults", "127.0.0.1:0")
            .cookie("defaults")
            .retry(fast(3)),
    )
    .await;
    // No retry of its own: the node's, 3 retries.
    let plain = Balancer::start(empty("plain")).await.unwrap();
    let outcome = plain.call::<Whoami>(()).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("plain"), 3, "the node's retry");
    let outcome = plain.cast::<Whoami>(()).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("plain"), 3, "the node's retry for a cast");
    // A call's own retry wins.
    let outcome = plain.call::<Whoami>(()).retry(fast(1)).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("plain"), 1, "the call's retry");
    // A balancer's retry wins over the node's, and a call's over the balancer's.
    let own = Balancer::start(empty("own").retry(fast(2))).await.unwrap();
    let outcome = own.call::<Whoami>(()).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("own"), 2, "the balancer's retry");
    let outcome = own.call::<Whoami>(()).retry(Retry::never()).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.take("own"), 0, "the call's retry");
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
    let waits = RetryWaits::install();
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
    assert_eq!(waits.count("gone"), 0, "retry attempts");
}
