//! A call run on this node — a local member, `CallDirect`, `call_directly`, [`Node::call`] to
//! itself, a random-node call tracked by a balancer — ends with its caller, as a remote call is cancelled: dropping the caller's future
//! drops the function's future (and cancels its `CallContext`), and a balancer's drain waits
//! for the run until it has really ended, not only until its caller stopped waiting.
//!
//! One `Node` per process: nextest runs each test alone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, CallContext, CallDirect, FunctionError, Node, NodeConfig,
    RemoteFunction,
};

/// Runs of `Hold` that started, and that ended (their future dropped).
static STARTED: AtomicUsize = AtomicUsize::new(0);
static ENDED: AtomicUsize = AtomicUsize::new(0);
/// The context of each run of `Hold`.
static CONTEXTS: Mutex<Vec<CallContext>> = Mutex::new(Vec::new());

/// Counts one ended run when dropped.
struct CountsEnd;
impl Drop for CountsEnd {
    fn drop(&mut self) {
        ENDED.fetch_add(1, Ordering::SeqCst);
    }
}

/// Blocks its thread for the given ms (where an abort cannot stop it), then waits forever:
/// only dropping its future ends it.
struct Hold;
impl RemoteFunction for Hold {
    const NAME: &'static str = "test.hold";
    type Args = u64;
    type Reply = ();
    async fn call(&self, block_ms: u64) -> Result<(), FunctionError> {
        let _ends = CountsEnd;
        CONTEXTS.lock().unwrap().push(CallContext::current());
        STARTED.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(block_ms));
        std::future::pending::<()>().await;
        Ok(())
    }
}

async fn node(name: &str) -> Node {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(name))
        .await
        .unwrap();
    node.register(Hold).unwrap();
    node
}

/// Waits (≤ 5 s) until `counter` reaches `count`.
async fn reaches(what: &str, counter: &AtomicUsize, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while counter.load(Ordering::SeqCst) < count {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} of {count}",
            counter.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The balancers whose calls run on this node: a local member (the only one), `CallDirect`,
/// and `call_directly` on a routing algorithm.
async fn local_balancers() -> Vec<(Balancer, bool)> {
    let config = |name: &str| BalancerConfig::new(name).leave_grace(Duration::from_millis(10));
    vec![
        (Balancer::start(config("member")).await.unwrap(), false),
        (
            Balancer::start(config("direct").algorithm(CallDirect))
                .await
                .unwrap(),
            false,
        ),
        (Balancer::start(config("directly")).await.unwrap(), true),
    ]
}

/// Starts a call of `Hold` blocking `block_ms` through `balancer` on a task of its own.
fn spawn_call(balancer: &Balancer, directly: bool, block_ms: u64) -> tokio::task::JoinHandle<()> {
    let balancer = balancer.clone();
    tokio::spawn(async move {
        let _ = balancer
            .call::<Hold>(block_ms)
            .call_directly(directly)
            .timeout(Duration::from_secs(60))
            .await;
    })
}

/// Starts a random-node call of `Hold` blocking `block_ms` that matches this node only and is
/// tracked by `balancer` (`load_balancer`), on a task of its own.
fn spawn_tracked_call(
    node: &Node,
    balancer: &Balancer,
    block_ms: u64,
) -> tokio::task::JoinHandle<()> {
    let (node, name) = (node.clone(), balancer.name().to_string());
    tokio::spawn(async move {
        let _ = node
            .call_on_random_node::<Hold>(node.name(), block_ms)
            .load_balancer(name)
            .timeout(Duration::from_secs(60))
            .await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_caller_drops_a_local_run() {
    let node = node("dropped").await;
    let mut runs = 0;
    // Node::call to this node itself.
    let direct = {
        let node = node.clone();
        tokio::spawn(async move {
            let _ = node
                .call::<Hold>(node.name(), 0)
                .timeout(Duration::from_secs(60))
                .await;
        })
    };
    runs += 1;
    reaches("Node::call started", &STARTED, runs).await;
    direct.abort();
    reaches("Node::call's run dropped with its caller", &ENDED, runs).await;

    for (balancer, directly) in local_balancers().await {
        let call = spawn_call(&balancer, directly, 0);
        runs += 1;
        reaches(balancer.name(), &STARTED, runs).await;
        assert!(
            balancer.in_flight() >= 1,
            "{}: not counted",
            balancer.name()
        );
        call.abort();
        let what = format!("{}'s local run dropped with its caller", balancer.name());
        reaches(&what, &ENDED, runs).await;
        // Nothing is counted any more: the run has ended.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while balancer.in_flight() + balancer.served() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: still counted"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        balancer.stop().await;
    }
    // A random-node call that runs here.
    let tracking = Balancer::start(BalancerConfig::new("tracking"))
        .await
        .unwrap();
    let call = spawn_tracked_call(&node, &tracking, 0);
    runs += 1;
    reaches("the random-node call started", &STARTED, runs).await;
    call.abort();
    reaches("the random-node call's run dropped", &ENDED, runs).await;
    tracking.stop().await;

    let contexts = CONTEXTS.lock().unwrap().clone();
    assert_eq!(contexts.len(), runs);
    for context in contexts {
        assert!(
            context.is_cancelled(),
            "a dropped run's context is cancelled"
        );
        let left = context.time_left().expect("a call has a deadline");
        assert!(left <= Duration::from_secs(60), "{left:?}");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balancers_stop_waits_for_a_local_run_whose_caller_was_dropped() {
    let node = node("draining").await;
    let mut runs = 0;
    for (balancer, directly) in local_balancers().await {
        runs += 1;
        // The run blocks its thread for 1.5 s: dropping its caller cannot end it sooner.
        let call = spawn_call(&balancer, directly, 1_500);
        reaches(balancer.name(), &STARTED, runs).await;
        call.abort();
        balancer.stop().await;
        assert_eq!(
            ENDED.load(Ordering::SeqCst),
            runs,
            "{}: stop returned while the run was still going",
            balancer.name()
        );
    }
    // A random-node call tracked by a balancer, run here.
    let tracking = Balancer::start(BalancerConfig::new("tracking"))
        .await
        .unwrap();
    let call = spawn_tracked_call(&node, &tracking, 1_500);
    runs += 1;
    reaches("the random-node call started", &STARTED, runs).await;
    call.abort();
    tracking.stop().await;
    assert_eq!(
        ENDED.load(Ordering::SeqCst),
        runs,
        "tracking: stop returned while the run was still going"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_gives_up_cancels_the_runs_it_abandons() {
    let node = node("abandoning").await;
    let last_context = || CONTEXTS.lock().unwrap().last().cloned().unwrap();
    // A balancer whose drain gives up after 300 ms on a run that never ends by itself.
    let balancer = Balancer::start(
        BalancerConfig::new("abandoning")
            .leave_grace(Duration::from_millis(10))
            .drain_timeout(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let call = spawn_call(&balancer, false, 0);
    reaches("the routed call started", &STARTED, 1).await;
    assert!(!last_context().is_cancelled());
    balancer.stop().await;
    assert!(
        last_context().is_cancelled(),
        "the run the drain gave up on is cancelled"
    );
    call.abort();

    // A direct call to this node at its shutdown (direct calls are not drained).
    let direct = {
        let node = node.clone();
        tokio::spawn(async move {
            let _ = node
                .call::<Hold>(node.name(), 0)
                .timeout(Duration::from_secs(60))
                .await;
        })
    };
    reaches("the direct call started", &STARTED, 2).await;
    let context = last_context();
    assert!(!context.is_cancelled());
    node.shutdown().await;
    assert!(context.is_cancelled(), "the node's shutdown gave up on it");
    direct.abort();
}
