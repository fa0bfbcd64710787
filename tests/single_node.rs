//! The original's single-node integration and lifecycle tests (reference §11.7–§11.8),
//! restated: on one node, every built-in algorithm selects this node, routes calls and casts
//! to it and lists it as the only member; `call_directly` runs here; a stopped balancer's
//! member leaves the group; WeightedRoundRobin started with explicit weights for this node
//! selects it (§11.7.4, §11.8's `weights: %{node() => 1}`). (A cast waiting on an empty pool:
//! tests/cluster/retry.rs.)
//!
//! One `Node` per process: nextest runs each test alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::algorithm::{by_name, BUILT_IN};
use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, FunctionError, Node, NodeConfig, RemoteFunction,
    WeightedRoundRobin,
};
use rpclb::functions::{register_all, Whoami};

/// Counts its runs (for casts).
struct Tally(Arc<AtomicUsize>);
impl RemoteFunction for Tally {
    const NAME: &'static str = "tally";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

async fn eventually(what: &str, ok: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while !ok() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_routes_to_the_only_node() {
    let node = Node::start(NodeConfig::new("solo", "127.0.0.1:0").cookie("solo"))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    let tally = Arc::new(AtomicUsize::new(0));
    node.register(Tally(Arc::clone(&tally))).unwrap();
    // A direct call and cast to this node.
    assert_eq!(
        node.call::<Whoami>(node.name(), ()).await.unwrap(),
        node.name()
    );
    node.cast::<Tally>(node.name(), ()).await.unwrap();
    eventually("the direct cast ran", || tally.load(Ordering::SeqCst) == 1).await;
    for (i, name) in BUILT_IN.iter().enumerate() {
        let balancer = Balancer::start(
            BalancerConfig::new(format!("b-{name}"))
                .algorithm_arc(by_name(name).unwrap())
                .leave_grace(Duration::ZERO),
        )
        .await
        .unwrap();
        assert_eq!(
            balancer.members().nodes(),
            vec![node.name().to_string()],
            "{name}"
        );
        assert_eq!(
            balancer.select_node(None).unwrap().node(),
            node.name(),
            "{name}"
        );
        assert_eq!(
            balancer.call::<Whoami>(()).await.unwrap(),
            node.name(),
            "{name}"
        );
        assert_eq!(
            balancer
                .call::<Whoami>(())
                .call_directly(true)
                .await
                .unwrap(),
            node.name(),
            "{name}"
        );
        balancer.cast::<Tally>(()).await.unwrap();
        balancer
            .cast::<Tally>(())
            .call_directly(true)
            .await
            .unwrap();
        let want = 1 + 2 * (i + 1);
        eventually(&format!("{name}: casts ran"), || {
            tally.load(Ordering::SeqCst) == want
        })
        .await;
        // Stopping removes this node from the group: a new start sees it join again.
        balancer.stop().await;
        assert!(matches!(
            balancer.call::<Whoami>(()).await,
            Err(Error::UnknownBalancer { .. })
        ));
        assert!(ractor::pg::get_scoped_members(
            &rpc_load_balancer::SCOPE.to_string(),
            &format!("b-{name}")
        )
        .is_empty());
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_round_robin_with_explicit_weights_routes_to_this_node() {
    let node = Node::start(NodeConfig::new("weighted", "127.0.0.1:0").cookie("weighted"))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    let tally = Arc::new(AtomicUsize::new(0));
    node.register(Tally(Arc::clone(&tally))).unwrap();
    // §11.7.4: `weights: %{node() => 3}`; §11.8: `weights: %{node() => 1}`.
    for (i, weight) in [3, 1].into_iter().enumerate() {
        let name = format!("wrr-{weight}");
        let balancer = Balancer::start(
            BalancerConfig::new(&name)
                .algorithm(WeightedRoundRobin::new().weight(node.name(), weight))
                .leave_grace(Duration::ZERO),
        )
        .await
        .unwrap();
        assert_eq!(balancer.members().nodes(), vec![node.name().to_string()]);
        for _ in 0..4 {
            assert_eq!(balancer.select_node(None).unwrap().node(), node.name());
        }
        assert_eq!(
            balancer.call::<Whoami>(()).await.unwrap(),
            node.name(),
            "{name}"
        );
        balancer.cast::<Tally>(()).await.unwrap();
        eventually(&format!("{name}: the cast ran"), || {
            tally.load(Ordering::SeqCst) == i + 1
        })
        .await;
        balancer.stop().await;
    }
    node.shutdown().await;
}

/// Durations far beyond any deadline — `Duration::MAX` as a call's timeout, a balancer's
/// `call_timeout`, a retry's sleep, a drain timeout — mean "as long as it takes", never an
/// overflow panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_durations_are_waits_not_panics() {
    use rpc_load_balancer::{Retry, RetryCount, RoundRobin};
    let node = Node::start(NodeConfig::new("huge", "127.0.0.1:0").cookie("huge"))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    let balancer = Balancer::start(
        BalancerConfig::new("huge")
            .algorithm(RoundRobin::new())
            .call_timeout(Duration::MAX)
            .leave_grace(Duration::ZERO)
            .drain_timeout(Duration::MAX),
    )
    .await
    .unwrap();
    balancer
        .wait_for_members(1, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(balancer.call::<Whoami>(()).await.unwrap(), node.name());
    let reply = balancer
        .call::<Whoami>(())
        .timeout(Duration::MAX)
        .await
        .unwrap();
    assert_eq!(reply, node.name());
    balancer
        .cast::<Whoami>(())
        .timeout(Duration::MAX)
        .await
        .unwrap();

    // Nobody to send to, a retry sleeping "forever": the call's own timeout ends the wait.
    let empty =
        Balancer::start(BalancerConfig::new("huge-empty").node_match_list(["no-such-node"]))
            .await
            .unwrap();
    let started = std::time::Instant::now();
    let outcome = empty
        .call::<Whoami>(())
        .retry(Retry::new(RetryCount::Unlimited, Duration::MAX))
        .timeout(Duration::from_millis(200))
        .await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    node.shutdown().await;
}
