//! A balancer and a remote function as a tower `Service` (feature `tower`), on a real local
//! node: calls through it, tower's timeout and concurrency-limit layers composed over it, and
//! its readiness rule (pending while the pool is empty or every member is at its cap).
//!
//! One node per process: run by nextest (a process per test).
#![cfg(feature = "tower")]

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, FunctionError, Node, NodeConfig, RemoteFunction,
};
use tower::timeout::error::Elapsed;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// The longest any wait here may take before the test fails.
const BOUND: Duration = Duration::from_secs(10);
/// How long a service that should stay pending is watched.
const STAYS_PENDING: Duration = Duration::from_millis(300);

struct Double;
impl RemoteFunction for Double {
    const NAME: &'static str = "tower_test.double";
    type Args = u64;
    type Reply = u64;
    async fn call(&self, n: u64) -> Result<u64, FunctionError> {
        Ok(2 * n)
    }
}

/// Replies after the given number of milliseconds.
struct Sleep;
impl RemoteFunction for Sleep {
    const NAME: &'static str = "tower_test.sleep";
    type Args = u64;
    type Reply = ();
    async fn call(&self, ms: u64) -> Result<(), FunctionError> {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok(())
    }
}

async fn start_node(name: &str) -> Node {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie("tower"))
        .await
        .unwrap();
    node.register(Double).unwrap();
    node.register(Sleep).unwrap();
    node
}

/// Counts its wakes.
#[derive(Default)]
struct Wakes(AtomicUsize);
impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_and_concurrency_limit_layers_compose_over_the_service() {
    let node = start_node("tower_layers").await;
    let balancer = Balancer::start(BalancerConfig::new("towered"))
        .await
        .unwrap();

    // A call through the layers: the function's reply.
    let mut doubling = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .concurrency_limit(4)
        .service(balancer.service::<Double>());
    let reply = doubling.ready().await.unwrap().call(21).await.unwrap();
    assert_eq!(reply, 42);

    // A slow function: the timeout layer ends the call with tower's `Elapsed`.
    let mut sleeping = ServiceBuilder::new()
        .timeout(Duration::from_millis(200))
        .concurrency_limit(1)
        .service(balancer.service::<Sleep>());
    let started = tokio::time::Instant::now();
    let slow = sleeping.ready().await.unwrap().call(5_000);
    // The one permit of the concurrency limit is held by `slow`: another handle waits.
    let mut second = sleeping.clone();
    assert!(
        tokio::time::timeout(STAYS_PENDING, second.ready())
            .await
            .is_err(),
        "the concurrency limit holds the second caller"
    );
    let error: BoxError = slow.await.expect_err("the call outlives its timeout");
    assert!(error.is::<Elapsed>(), "tower's timeout: {error}");
    assert!(started.elapsed() < Duration::from_secs(4), "cut at 200 ms");
    // The permit is back once the timed-out call is dropped: the next caller goes, and a
    // fast call gets through the same layers.
    let fast = tokio::time::timeout(BOUND, second.ready())
        .await
        .expect("the permit is released")
        .unwrap()
        .call(1);
    fast.await.unwrap();

    // The service's own errors pass through the layers as `Error`.
    let mut stopped = ServiceBuilder::new()
        .timeout(Duration::from_secs(5))
        .service(balancer.service::<Double>());
    balancer.stop().await;
    let error = tokio::time::timeout(BOUND, stopped.ready())
        .await
        .expect("a stopped balancer is not pending")
        .expect_err("a stopped balancer refuses");
    assert!(
        matches!(
            error.downcast_ref::<Error>(),
            Some(Error::UnknownBalancer { .. })
        ),
        "{error}"
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_pending_while_the_pool_is_empty_and_ready_once_a_member_joins() {
    let node = start_node("tower_empty").await;
    // A caller only: no member, ever.
    let caller =
        Balancer::start(BalancerConfig::new("lonely").node_match_list(Vec::<String>::new()))
            .await
            .unwrap();
    assert!(caller.members().is_empty());
    let mut service = caller.service::<Double>();
    assert!(
        tokio::time::timeout(STAYS_PENDING, service.ready())
            .await
            .is_err(),
        "pending while the pool is empty"
    );

    // Pending, with a waker that counts its wakes.
    let wakes = Arc::new(Wakes::default());
    let waker = Waker::from(Arc::clone(&wakes));
    let mut cx = Context::from_waker(&waker);
    assert!(service.poll_ready(&mut cx).is_pending());
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);

    // The balancer restarts under its name with this node as a member: the members changed
    // (the waker is woken), and the same service (its handle follows the name) is ready.
    caller.stop().await;
    let member = Balancer::start(BalancerConfig::new("lonely"))
        .await
        .unwrap();
    assert!(!member.members().is_empty());
    assert!(wakes.0.load(Ordering::SeqCst) >= 1, "woken by the change");
    match service.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        other => panic!("ready once a member joined: {other:?}"),
    }
    let reply = tokio::time::timeout(BOUND, service.call(4))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reply, 8);
    member.stop().await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_reserves_a_member_and_is_pending_while_every_member_is_at_its_cap() {
    let node = start_node("tower_capped").await;
    let balancer = Balancer::start(BalancerConfig::new("capped").max_in_flight_per_member(1))
        .await
        .unwrap();
    balancer.wait_for_members(1, BOUND).await.unwrap();
    let mut first = balancer.service::<Double>();
    tokio::time::timeout(BOUND, first.ready())
        .await
        .unwrap()
        .unwrap();
    // Ready reserved the only member: it counts the reservation in flight.
    let member = balancer.members().as_slice()[0].clone();
    assert_eq!(member.in_flight(), 1, "ready reserved nothing");
    assert_eq!(balancer.in_flight(), 1);
    // Ready again is still the same reservation.
    tokio::time::timeout(BOUND, first.ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(member.in_flight(), 1);

    // The member at its cap of 1: another service is pending, a plain call refused.
    let mut second = first.clone();
    assert!(
        tokio::time::timeout(STAYS_PENDING, second.ready())
            .await
            .is_err(),
        "pending while every member is at its cap"
    );
    let refused = balancer.call::<Double>(1).await;
    assert!(
        matches!(refused, Err(Error::Overloaded { limit: 1, .. })),
        "{refused:?}"
    );

    // The reserving service's call goes through on its reservation (not refused at the cap
    // it holds), and ends it.
    let waiting = tokio::spawn(async move {
        let ready = tokio::time::timeout(BOUND, second.ready()).await;
        assert!(matches!(ready, Ok(Ok(_))), "ready once the member is free");
        second.call(5).await
    });
    assert_eq!(first.call(3).await.unwrap(), 6);
    assert_eq!(waiting.await.unwrap().unwrap(), 10);
    assert_eq!(member.in_flight(), 0);

    // A ready service that is dropped releases its reservation.
    let mut dropped = balancer.service::<Double>();
    tokio::time::timeout(BOUND, dropped.ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(member.in_flight(), 1);
    drop(dropped);
    assert_eq!(member.in_flight(), 0);
    assert_eq!(balancer.in_flight(), 0);
    balancer.stop().await;
    node.shutdown().await;
}

/// The service is `Send`, `Clone` and `'static` (tower's `Buffer` and most layers need it),
/// and so is its future.
#[test]
fn the_service_and_its_future_are_send_and_static() {
    fn send_clone_static<T: Send + Clone + 'static>() {}
    fn send_static<T: Send + 'static>() {}
    send_clone_static::<rpc_load_balancer::FunctionService<Double>>();
    send_static::<<rpc_load_balancer::FunctionService<Double> as Service<u64>>::Future>();
    fn is_future<T: Future>() {}
    is_future::<rpc_load_balancer::FunctionFuture<u64>>();
}
