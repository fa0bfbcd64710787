//! Draining in one process (this node is the member): `drain_timeout` bounds a stop, and an
//! app supervisor that stops its balancer in `post_stop` drains it.
//!
//! One `Node` per process: nextest runs each test alone.

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{Balancer, BalancerConfig, DrainOutcome, Node, NodeConfig};
use rpclb::functions::{register_all, Sleep};

async fn node(name: &str) -> Node {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(name))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    node
}

/// Waits (≤ 2 s) until `balancer` serves `count` calls.
async fn serving(balancer: &Balancer, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while balancer.served() < count {
        assert!(Instant::now() < deadline, "{} served", balancer.served());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_timeout_bounds_a_stop() {
    let node = node("bounded").await;
    let balancer = Balancer::start(
        BalancerConfig::new("slow")
            .leave_grace(Duration::from_millis(100))
            .drain_timeout(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let call = {
        let balancer = balancer.clone();
        tokio::spawn(async move {
            balancer
                .call::<Sleep>(30_000)
                .timeout(Duration::from_secs(60))
                .await
        })
    };
    serving(&balancer, 1).await;
    assert_eq!(balancer.in_flight(), 1);
    let started = Instant::now();
    let report = balancer.stop().await;
    let took = started.elapsed();
    assert!(
        (Duration::from_secs(1)..Duration::from_secs(3)).contains(&took),
        "stop took {took:?} with a 1 s drain_timeout"
    );
    // The report says it gave up, on which call (routed here and served here), and when.
    assert_eq!(report.outcome, DrainOutcome::TimedOut, "{report:?}");
    assert!(!report.drained());
    assert_eq!(report.balancer, "slow");
    assert_eq!((report.routed_in_flight, report.served_in_flight), (1, 1));
    assert!(
        report.took >= Duration::from_secs(1) && report.took <= took,
        "{report:?} (stop returned after {took:?})"
    );
    // A second stop returns the same report at once.
    assert_eq!(balancer.stop().await, report);
    call.abort();
    // Nothing left for the node's shutdown to stop.
    assert_eq!(node.shutdown().await, vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_with_nothing_in_flight_waits_only_the_grace() {
    let node = node("idle").await;
    let balancer =
        Balancer::start(BalancerConfig::new("idle").leave_grace(Duration::from_millis(200)))
            .await
            .unwrap();
    let started = Instant::now();
    let report = balancer.stop().await;
    let took = started.elapsed();
    assert!(
        (Duration::from_millis(200)..Duration::from_millis(1_500)).contains(&took),
        "{took:?}"
    );
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert!(report.drained());
    assert_eq!((report.routed_in_flight, report.served_in_flight), (0, 0));
    assert!(
        report.took >= Duration::from_millis(200) && report.took <= took,
        "{report:?} (stop returned after {took:?})"
    );
    node.shutdown().await;
}

/// An app's supervisor that owns a balancer and drains it when it stops.
struct App;

impl Actor for App {
    type Msg = ();
    type State = Balancer;
    type Arguments = ();

    async fn pre_start(&self, myself: ActorRef<()>, _: ()) -> Result<Balancer, ActorProcessingErr> {
        let config = BalancerConfig::new("app").leave_grace(Duration::from_millis(50));
        Ok(Balancer::spawn_linked(config, myself.get_cell()).await?)
    }

    async fn post_stop(
        &self,
        _: ActorRef<()>,
        balancer: &mut Balancer,
    ) -> Result<(), ActorProcessingErr> {
        // ractor stops a parent's children after its post_stop: drain first.
        balancer.stop().await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_that_stops_its_balancer_in_post_stop_drains_it() {
    let node = node("supervised").await;
    let (app, _) = Actor::spawn(None, App, ()).await.unwrap();
    let balancer = Balancer::lookup("app").unwrap();
    let call = {
        let balancer = balancer.clone();
        tokio::spawn(async move { balancer.call::<Sleep>(600).await })
    };
    serving(&balancer, 1).await;
    let started = Instant::now();
    app.stop_and_wait(None, Some(Duration::from_secs(10)))
        .await
        .unwrap();
    // The supervisor stopped only once the call it was serving had finished.
    assert_eq!(balancer.served(), 0);
    assert_eq!(balancer.in_flight(), 0);
    assert!(
        call.is_finished(),
        "the call was still running when the app stopped"
    );
    call.await.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(!balancer.is_running());
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_stop_and_a_shutdown_wait_for_the_drain_under_way() {
    let node = node("twice").await;
    let balancer =
        Balancer::start(BalancerConfig::new("twice").leave_grace(Duration::from_millis(50)))
            .await
            .unwrap();
    let call = {
        let balancer = balancer.clone();
        tokio::spawn(async move { balancer.call::<Sleep>(600).await })
    };
    serving(&balancer, 1).await;
    // wait_for_members on a stopping balancer ends with UnknownBalancer, not at its timeout.
    let waiting = {
        let balancer = balancer.clone();
        tokio::spawn(async move { balancer.wait_for_members(5, Duration::from_secs(10)).await })
    };
    let first = {
        let balancer = balancer.clone();
        tokio::spawn(async move { balancer.stop().await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let started = Instant::now();
    let second = balancer.stop().await;
    assert!(
        call.is_finished(),
        "the second stop returned before the drain"
    );
    assert_eq!(balancer.served(), 0);
    assert!(started.elapsed() >= Duration::from_millis(300));
    // Both get the report of the one drain.
    assert_eq!(first.await.unwrap(), second);
    assert_eq!(second.outcome, DrainOutcome::Drained);
    call.await.unwrap().unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("wait_for_members ended with the stop")
        .unwrap();
    assert!(
        matches!(
            waited,
            Err(rpc_load_balancer::Error::UnknownBalancer { .. })
        ),
        "{waited:?}"
    );

    // A shutdown while a stop drains waits for it too; a second shutdown waits for the first.
    let balancer =
        Balancer::start(BalancerConfig::new("again").leave_grace(Duration::from_millis(50)))
            .await
            .unwrap();
    let call = {
        let balancer = balancer.clone();
        tokio::spawn(async move { balancer.call::<Sleep>(600).await })
    };
    serving(&balancer, 1).await;
    let stopping = {
        let balancer = balancer.clone();
        tokio::spawn(async move { balancer.stop().await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let other = {
        let node = node.clone();
        tokio::spawn(async move { node.shutdown().await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let drains = node.shutdown().await;
    assert!(call.is_finished(), "shutdown returned before the drain");
    call.await.unwrap().unwrap();
    // The shutdown reports the drain it waited for, as the stop does; so does the other one.
    assert_eq!(drains, vec![stopping.await.unwrap()]);
    assert_eq!(drains[0].balancer, "again");
    assert_eq!(other.await.unwrap(), drains);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stop_or_shutdown_still_finishes() {
    let node = node("dropped").await;
    let balancer =
        Balancer::start(BalancerConfig::new("dropped").leave_grace(Duration::from_millis(300)))
            .await
            .unwrap();
    // Given up on after 50 ms: the stop goes on by itself, and a second stop returns with it.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), balancer.stop())
            .await
            .is_err()
    );
    tokio::time::timeout(Duration::from_secs(3), balancer.stop())
        .await
        .expect("the second stop returns once the first is done");
    Balancer::start(BalancerConfig::new("dropped"))
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), node.shutdown())
            .await
            .is_err()
    );
    tokio::time::timeout(Duration::from_secs(5), node.shutdown())
        .await
        .expect("the second shutdown returns once the first is done");
    let again = Node::start(NodeConfig::new("dropped2", "127.0.0.1:0").cookie("dropped2"))
        .await
        .expect("a new node may start");
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_on_a_balancer_end_when_its_stop_begins_not_when_its_drain_ends() {
    let node = node("waits").await;
    let caller = Balancer::start(
        BalancerConfig::new("caller")
            .node_match_list(Vec::<String>::new())
            .retry(rpc_load_balancer::Retry::new(
                rpc_load_balancer::RetryCount::Unlimited,
                Duration::from_secs(30),
            )),
    )
    .await
    .unwrap();
    // Something the stop must drain: a random-node call tracked by the balancer (it runs
    // here, since this node matches the empty filter).
    let tracked = {
        let node = node.clone();
        tokio::spawn(async move {
            node.call_on_random_node::<Sleep>("", 1_500)
                .load_balancer("caller")
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while caller.in_flight() == 0 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let waiting = {
        let caller = caller.clone();
        tokio::spawn(async move {
            caller
                .call::<Sleep>(1)
                .timeout(Duration::from_secs(20))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = {
        let caller = caller.clone();
        tokio::spawn(async move { caller.stop().await })
    };
    let outcome = tokio::time::timeout(Duration::from_millis(500), waiting)
        .await
        .expect("the waiting call ended when the stop began")
        .unwrap();
    assert!(
        matches!(
            outcome,
            Err(rpc_load_balancer::Error::UnknownBalancer { .. })
        ),
        "{outcome:?}"
    );
    assert!(!stopping.is_finished(), "the drain is still going");
    tracked.await.unwrap().unwrap();
    stopping.await.unwrap();
    node.shutdown().await;
}
