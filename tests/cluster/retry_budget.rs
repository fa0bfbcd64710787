//! Retry budgets across processes (issue 22): a member SIGKILLed while calls are in flight on
//! it. Calls of an idempotent function are sent again to the other member and succeed; calls
//! of a function that is not idempotent fail with `ConnectionLost` and are never sent twice;
//! a spent budget stops the retries; a retry keeps the call's first deadline.

use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, FunctionError, Node,
    RemoteFunction, RetryBudget, RoundRobin, Unavailable,
};
use rpclb::harness::Cluster;

use crate::{Sleep, BIN, MESH_TIMEOUT};

/// The demo `sleep`, declared idempotent by this caller.
struct IdempotentSleep;
impl RemoteFunction for IdempotentSleep {
    const NAME: &'static str = "sleep";
    const IDEMPOTENT: bool = true;
    type Args = u64;
    type Reply = ();
    async fn call(&self, _: u64) -> Result<(), FunctionError> {
        unreachable!("only called remotely")
    }
}

/// The calls `node` has served in all.
async fn served_total(me: &Node, node: &str) -> u64 {
    match me.control(node, ControlRequest::Stats).await {
        Ok(ControlReply::Stats { served_total, .. }) => served_total,
        other => panic!("{other:?}"),
    }
}

/// How the calls of one run are made.
#[derive(Clone, Copy)]
enum Made {
    /// `IdempotentSleep` (idempotent by its declaration).
    Declared,
    /// `Sleep` with `.idempotent(true)` on each call.
    PerCall,
    /// `Sleep` (not idempotent).
    Plain,
}

/// What one run saw: each call's outcome and the node that served it, and how many calls
/// the surviving member served during the run.
struct Run {
    outcomes: Vec<Result<String, Error>>,
    survivor: String,
    survivor_served: u64,
}

/// Two members of `work`; the tester routes 8 calls of `sleep_ms` (4 to each member, round
/// robin) with `timeout`, kills the first member `kill_after` later, and collects.
async fn run(
    budget: RetryBudget,
    made: Made,
    sleep_ms: u64,
    timeout: Duration,
    kill_after: Duration,
) -> Run {
    let mut cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let names = cluster.names();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .retry_budget(budget)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let survivor = names[1].clone();
    let before = served_total(&me, &survivor).await;
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let work = work.clone();
            tokio::spawn(async move {
                let served = match made {
                    Made::Declared => {
                        work.call::<IdempotentSleep>(sleep_ms)
                            .timeout(timeout)
                            .with_node()
                            .await
                    }
                    Made::PerCall => {
                        work.call::<Sleep>(sleep_ms)
                            .idempotent(true)
                            .timeout(timeout)
                            .with_node()
                            .await
                    }
                    Made::Plain => {
                        work.call::<Sleep>(sleep_ms)
                            .timeout(timeout)
                            .with_node()
                            .await
                    }
                };
                served.map(|((), node)| node.to_string())
            })
        })
        .collect();
    tokio::time::sleep(kill_after).await;
    cluster.nodes[0].kill().await;
    let mut outcomes = Vec::new();
    for call in calls {
        outcomes.push(call.await.unwrap());
    }
    let survivor_served = served_total(&me, &survivor).await - before;
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
    Run {
        outcomes,
        survivor,
        survivor_served,
    }
}

fn connection_lost(outcome: &Result<String, Error>) -> bool {
    matches!(
        outcome,
        Err(Error::ServiceUnavailable {
            reason: Unavailable::ConnectionLost,
            ..
        })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_calls_on_a_killed_member_are_retried_on_the_other_and_succeed() {
    for made in [Made::Declared, Made::PerCall] {
        let run = run(
            RetryBudget::default(),
            made,
            2_000,
            Duration::from_secs(10),
            Duration::from_millis(500),
        )
        .await;
        for outcome in &run.outcomes {
            assert_eq!(outcome.as_ref().ok(), Some(&run.survivor), "{outcome:?}");
        }
        // Its own 4, and the 4 sent again.
        assert_eq!(run.survivor_served, 8);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_are_not_idempotent_are_never_sent_twice() {
    let run = run(
        RetryBudget::default(),
        Made::Plain,
        2_000,
        Duration::from_secs(10),
        Duration::from_millis(500),
    )
    .await;
    let lost = run.outcomes.iter().filter(|o| connection_lost(o)).count();
    let ok = run
        .outcomes
        .iter()
        .filter(|o| o.as_ref().ok() == Some(&run.survivor))
        .count();
    assert_eq!((lost, ok), (4, 4), "{:?}", run.outcomes);
    // The survivor ran only the calls first sent to it.
    assert_eq!(run.survivor_served, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spent_budget_stops_the_retries() {
    // No reserve, a quarter of a retry per call: the 8 calls deposit 2 retries.
    let run = run(
        RetryBudget::new(0.25, 0, Duration::from_secs(60)),
        Made::Declared,
        2_000,
        Duration::from_secs(10),
        Duration::from_millis(500),
    )
    .await;
    let lost = run.outcomes.iter().filter(|o| connection_lost(o)).count();
    assert_eq!(lost, 2, "{:?}", run.outcomes);
    assert_eq!(run.survivor_served, 6);
    // Off: no retry at all.
    let run = run_off().await;
    assert_eq!(run, (4, 4));
}

/// The run of [`a_spent_budget_stops_the_retries`] with the budget off: (lost, served).
async fn run_off() -> (usize, u64) {
    let run = run(
        RetryBudget::none(),
        Made::Declared,
        2_000,
        Duration::from_secs(10),
        Duration::from_millis(500),
    )
    .await;
    let lost = run.outcomes.iter().filter(|o| connection_lost(o)).count();
    (lost, run.survivor_served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_keeps_the_calls_first_deadline() {
    // 1.8 s of work in a 2 s timeout, the member killed after 0.6 s: a retry with the call's
    // own deadline has under 1.4 s left and times out; one with a fresh 2 s would succeed.
    let run = run(
        RetryBudget::default(),
        Made::Declared,
        1_800,
        Duration::from_secs(2),
        Duration::from_millis(600),
    )
    .await;
    let mut timed_out = 0;
    for outcome in &run.outcomes {
        match outcome {
            Ok(node) => assert_eq!(node, &run.survivor),
            // The error names the call's own timeout, not what the retry had left of it.
            Err(Error::RequestTimeout { timeout, .. }) => {
                assert_eq!(*timeout, Duration::from_secs(2));
                timed_out += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(timed_out, 4, "{:?}", run.outcomes);
}
