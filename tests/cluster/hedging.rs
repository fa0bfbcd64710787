//! Hedged calls across processes (issue 22): two members of `work`, one slow (its functions
//! first sleep 120 s). A call of an idempotent function first sent to the slow member is sent
//! again to the other after the hedge delay and returns that member's reply; the slow copy is
//! cancelled on its member (its `served_in_flight` falls back to 0 long before the copy's own
//! deadline). A call that is not idempotent, or that turns hedging off, is never sent twice,
//! and a budget of 0 stops the hedges.

use std::time::Duration;

use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, Error, FunctionError, HedgePolicy,
    Node, RemoteFunction, RoundRobin,
};
use rpclb::harness::Cluster;
use tokio::time::Instant;

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

/// How many calls each run makes, one after another.
const CALLS: u64 = 6;

/// `(calls running now, calls started in all)` on `node`.
async fn stats(me: &Node, node: &str) -> (u64, u64) {
    match me.control(node, ControlRequest::Stats).await {
        Ok(ControlReply::Stats {
            served_in_flight,
            served_total,
        }) => (served_in_flight, served_total),
        other => panic!("stats of {node}: {other:?}"),
    }
}

/// How the calls of a run are made.
#[derive(Clone, Copy, Debug)]
enum Made {
    /// `IdempotentSleep` (idempotent by its declaration).
    Declared,
    /// `Sleep` with `.idempotent(true)`.
    PerCall,
    /// `Sleep` (not idempotent).
    Plain,
    /// `IdempotentSleep` with `.hedge(false)`.
    HedgeOff,
}

/// What a run saw: each call's outcome (the node that served it), and how many calls the
/// slow and the fast member started during the run.
struct Run {
    outcomes: Vec<Result<String, Error>>,
    fast: String,
    slow_served: u64,
    fast_served: u64,
}

/// Two members of `work` (`n0` slow, `n1` not), the tester's balancer hedging after 1 s as
/// `policy` says; [`CALLS`] calls of `sleep(0)` made as `made`, each with `timeout`.
async fn run(policy: HedgePolicy, made: Made, timeout: Duration) -> Run {
    let slow_args: &[&str] = &["--balancer", "work", "--delay-ms", "120000"];
    let fast_args: &[&str] = &["--balancer", "work"];
    let cluster = Cluster::start_each(BIN, &[slow_args, fast_args])
        .await
        .unwrap();
    let names = cluster.names();
    let (slow, fast) = (names[0].clone(), names[1].clone());
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .hedge(policy)
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let (_, slow_before) = stats(&me, &slow).await;
    let (_, fast_before) = stats(&me, &fast).await;
    let mut outcomes = Vec::new();
    for _ in 0..CALLS {
        let served = match made {
            Made::Declared => {
                work.call::<IdempotentSleep>(0)
                    .timeout(timeout)
                    .with_node()
                    .await
            }
            Made::PerCall => {
                let call = work.call::<Sleep>(0).idempotent(true);
                call.timeout(timeout).with_node().await
            }
            Made::Plain => work.call::<Sleep>(0).timeout(timeout).with_node().await,
            Made::HedgeOff => {
                let call = work.call::<IdempotentSleep>(0).hedge(false);
                call.timeout(timeout).with_node().await
            }
        };
        outcomes.push(served.map(|((), node)| node.to_string()));
    }
    // Every copy on the slow member ends long before its 120 s of work: cancelled by its
    // caller (a hedge's loser), or at its deadline (a call that timed out).
    let bound = Duration::from_secs(10);
    let deadline = Instant::now() + bound;
    loop {
        let (running, _) = stats(&me, &slow).await;
        if running == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{made:?}: {slow} still runs {running} calls {bound:?} after the last reply"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every copy's selection was released here: the winner's at its reply, the loser's when
    // it was dropped (cancelled, not a failure).
    assert_eq!(work.in_flight(), 0, "{made:?}: selections left in flight");
    let slow_served = stats(&me, &slow).await.1 - slow_before;
    let fast_served = stats(&me, &fast).await.1 - fast_before;
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
    Run {
        outcomes,
        fast,
        slow_served,
        fast_served,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_idempotent_call_is_hedged_to_the_other_member_and_the_loser_cancelled_there() {
    // Calls time out after 60 s, half of the slow member's work: a copy cancelled on it
    // stops within the 10 s `run` waits; one left running would still run then.
    let policy = HedgePolicy::after(Duration::from_secs(1), 1.0, 10);
    for made in [Made::Declared, Made::PerCall] {
        let run = run(policy, made, Duration::from_secs(60)).await;
        for outcome in &run.outcomes {
            assert_eq!(
                outcome.as_ref().ok(),
                Some(&run.fast),
                "{made:?}: {outcome:?}"
            );
        }
        // Every call ran once on the fast member: first there, or as the hedge of a first
        // copy on the slow member (round robin sends it some).
        assert_eq!(run.fast_served, CALLS, "{made:?}");
        assert!(
            run.slow_served >= 1,
            "{made:?}: no first copy went to the slow member"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_is_not_idempotent_or_turns_hedging_off_is_never_sent_twice() {
    let policy = HedgePolicy::after(Duration::from_secs(1), 1.0, 10);
    for made in [Made::Plain, Made::HedgeOff] {
        let run = run(policy, made, Duration::from_secs(3)).await;
        assert_eq!(
            run.fast_served + run.slow_served,
            CALLS,
            "{made:?}: one copy each"
        );
        let mut timed_out = 0;
        for outcome in &run.outcomes {
            match outcome {
                Ok(node) => assert_eq!(node, &run.fast),
                Err(Error::RequestTimeout { .. }) => timed_out += 1,
                other => panic!("{made:?}: {other:?}"),
            }
        }
        // The calls sent to the slow member waited there until their timeout.
        assert_eq!(timed_out, run.slow_served, "{made:?}: {:?}", run.outcomes);
        assert!(timed_out >= 1, "{made:?}: no call went to the slow member");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_of_zero_stops_the_hedges() {
    let policy = HedgePolicy::after(Duration::from_secs(1), 0.0, 0);
    let run = run(policy, Made::Declared, Duration::from_secs(3)).await;
    assert_eq!(run.fast_served + run.slow_served, CALLS, "no second copy");
    let ok = run.outcomes.iter().filter(|o| o.is_ok()).count() as u64;
    assert_eq!(ok, run.fast_served, "{:?}", run.outcomes);
    assert!(run.slow_served >= 1, "no call went to the slow member");
}
