//! The selection guard is owned: one from `Balancer::select_node` moves into a task spawned on
//! a multi-thread runtime and, dropped there, releases its selection exactly once — the
//! selector's `released` and its `Cancelled` outcome once each, the member's in-flight count
//! and the balancer's in-flight total back to exactly 0 — also when the balancer was stopped
//! while the guard was alive.
//!
//! Runs a `Node` in this process (one per process: nextest runs each test alone); this node is
//! the only member.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, MemberView, Needs, Outcome, OutcomeKind, Request};
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, DrainOutcome, Error, Node, NodeConfig, SelectionGuard,
    Selector,
};
use tokio::sync::oneshot;

/// Counts what the selector hears.
#[derive(Default)]
struct Counts {
    released: AtomicUsize,
    cancelled: AtomicUsize,
    other_outcomes: AtomicUsize,
}

/// Picks the first member, keeps per-member in-flight counts, learns, and counts releases
/// and outcomes.
#[derive(Default)]
struct Counting {
    counts: Arc<Counts>,
}

impl Algorithm for Counting {
    fn name(&self) -> &'static str {
        "counting"
    }
    fn needs(&self) -> Needs {
        Needs::NONE.in_flight()
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(CountingSelector {
            counts: Arc::clone(&self.counts),
        }))
    }
}

struct CountingSelector {
    counts: Arc<Counts>,
}

impl Selector for CountingSelector {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
    fn learns(&self) -> bool {
        true
    }
    fn observe(&self, outcome: &Outcome<'_>) {
        let counter = match outcome.kind {
            OutcomeKind::Cancelled => &self.counts.cancelled,
            _ => &self.counts.other_outcomes,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
    fn released(&self, _: &MemberView) {
        self.counts.released.fetch_add(1, Ordering::SeqCst);
    }
}

/// The guard type itself is `Send + 'static` (a compile-time check).
fn is_owned<T: Send + 'static>(guard: T) -> T {
    guard
}

/// Moves `guard` into a task spawned on this multi-thread runtime, checks there that the
/// selection is still counted, drops it there once told to, and waits for the task.
async fn drop_in_task(guard: SelectionGuard, checks: impl FnOnce() + Send + 'static) {
    let guard = is_owned(guard);
    let (drop_now, told) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        told.await.unwrap();
        checks();
        let node = guard.node().to_string();
        drop(guard);
        node
    });
    drop_now.send(()).unwrap();
    let node = task.await.unwrap();
    assert!(!node.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_guard_moved_into_a_task_releases_exactly_once() {
    let node = Node::start(NodeConfig::new("owned_guard", "127.0.0.1:0").cookie("owned"))
        .await
        .unwrap();
    let counting = Counting::default();
    let counts = Arc::clone(&counting.counts);
    let balancer = Balancer::start(BalancerConfig::new("owned").algorithm(counting))
        .await
        .unwrap();
    balancer
        .wait_for_members(1, Duration::from_secs(5))
        .await
        .unwrap();

    // Dropped in another task, the balancer running.
    let guard = balancer.select_node(None).unwrap();
    let member = guard.member().clone();
    assert_eq!(member.in_flight(), 1);
    assert_eq!(balancer.in_flight(), 1);
    let (seen, still) = (member.clone(), balancer.clone());
    drop_in_task(guard, move || {
        assert_eq!(seen.in_flight(), 1, "counted until the guard drops");
        assert_eq!(still.in_flight(), 1);
    })
    .await;
    assert_eq!(member.in_flight(), 0);
    assert_eq!(balancer.in_flight(), 0);
    assert_eq!(counts.released.load(Ordering::SeqCst), 1);
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 1);
    assert_eq!(counts.other_outcomes.load(Ordering::SeqCst), 0);

    // Alive while the balancer stops: the drain waits for it; dropped in a task, it is
    // released once and the stop ends drained.
    let guard = balancer.select_node(None).unwrap();
    let member = guard.member().clone();
    assert_eq!(balancer.in_flight(), 1);
    let stopping = tokio::spawn({
        let balancer = balancer.clone();
        async move { balancer.stop().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!stopping.is_finished(), "the drain waits for the guard");
    assert!(matches!(
        balancer.select_node(None),
        Err(Error::UnknownBalancer { .. })
    ));
    assert_eq!(member.in_flight(), 1);
    drop_in_task(guard, || {}).await;
    let report = tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("the stop ends once the guard dropped")
        .unwrap();
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert_eq!(member.in_flight(), 0);
    assert_eq!(balancer.in_flight(), 0);
    assert_eq!(counts.released.load(Ordering::SeqCst), 2);
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 2);
    assert_eq!(counts.other_outcomes.load(Ordering::SeqCst), 0);

    // Alive after the balancer stopped (its drain gave up on it): released once, later.
    let balancer = Balancer::start(
        BalancerConfig::new("owned_late")
            .algorithm(Counting {
                counts: Arc::clone(&counts),
            })
            .drain_timeout(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    balancer
        .wait_for_members(1, Duration::from_secs(5))
        .await
        .unwrap();
    let guard = balancer.select_node(None).unwrap();
    let member = guard.member().clone();
    let report = balancer.stop().await;
    assert_eq!(report.outcome, DrainOutcome::TimedOut, "{report:?}");
    assert_eq!(member.in_flight(), 1);
    drop_in_task(guard, || {}).await;
    assert_eq!(member.in_flight(), 0);
    assert_eq!(counts.released.load(Ordering::SeqCst), 3);
    assert_eq!(counts.cancelled.load(Ordering::SeqCst), 3);

    assert_eq!(node.shutdown().await, vec![]);
}
