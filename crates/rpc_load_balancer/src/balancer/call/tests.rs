//! The pipeline without a network: options resolution, the one run-here-or-send decision,
//! the one retry loop, and a routed call run here that owns its drain count.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::dispatch;
use super::options::CallOptions;
use super::target::{Destination, Kind, Route, Target};
use super::wait::look_until_found;
use crate::balancer::shared::BalancerShared;
use crate::endpoint::tests::Echo;
use crate::function::{FunctionError, RemoteFunction};
use crate::node::shared::NodeShared;
use crate::{BalancerConfig, Error, NodeConfig, Retry, RetryCount, Unavailable};

/// Runs until its call is cancelled.
struct Hold;
impl RemoteFunction for Hold {
    const NAME: &'static str = "pipeline.hold";
    type Args = ();
    type Reply = ();
    async fn call(&self, _: ()) -> Result<(), FunctionError> {
        crate::CallContext::current().cancelled().await;
        Ok(())
    }
}

/// A node's state (no actors, no network) serving `Echo` and `Hold`.
fn node(config: NodeConfig) -> Arc<NodeShared> {
    let node = echo_node(config);
    node.transport.registry.register(Hold).unwrap();
    node
}

/// A node's state serving `Echo` only.
fn echo_node(config: NodeConfig) -> Arc<NodeShared> {
    let node = NodeShared::new("pipe@127.0.0.1".into(), "127.0.0.1:0".into(), None, &config);
    node.transport.registry.register(Echo).unwrap();
    Arc::new(node)
}

fn config() -> NodeConfig {
    NodeConfig::new("pipe", "127.0.0.1:0").cookie("c")
}

/// A balancer's state on `node` (not started: no members).
fn balancer(node: &Arc<NodeShared>, config: BalancerConfig) -> Arc<BalancerShared> {
    Arc::new(BalancerShared::new(config, Arc::clone(node)).unwrap())
}

#[test]
fn options_are_the_calls_else_the_balancers_else_the_nodes() {
    let node = node(config().call_timeout(Duration::from_secs(10)));
    let routed = Target::Balancer(balancer(
        &node,
        BalancerConfig::new("b")
            .call_timeout(Duration::from_secs(3))
            .retry(Retry::never()),
    ));
    let direct = Target::Node(Arc::from("other@127.0.0.1"));
    let none = CallOptions::default();
    let own = CallOptions {
        timeout: Some(Duration::from_secs(1)),
        call_directly: Some(true),
        ..CallOptions::default()
    };
    assert_eq!(own.resolve(&node, &routed).timeout, Duration::from_secs(1));
    assert!(own.resolve(&node, &routed).directly);
    assert_eq!(none.resolve(&node, &routed).timeout, Duration::from_secs(3));
    assert_eq!(none.resolve(&node, &routed).retry, Retry::never());
    assert!(!none.resolve(&node, &routed).directly);
    // A direct call knows no balancer.
    assert_eq!(
        none.resolve(&node, &direct).timeout,
        Duration::from_secs(10)
    );
    assert_eq!(none.resolve(&node, &direct).retry, node.config.retry);
}

#[test]
fn a_zero_timeout_is_refused_before_anything_else() {
    let node = node(config());
    let zero = CallOptions {
        timeout: Some(Duration::ZERO),
        ..CallOptions::default()
    };
    for target in [
        Target::Node(Arc::from("pipe@127.0.0.1")),
        Target::RandomNode("".into()),
        Target::Balancer(balancer(&node, BalancerConfig::new("b"))),
    ] {
        match Route::new(&node, &target, &zero) {
            Err(Error::InvalidConfig { option, .. }) => assert_eq!(option, "timeout"),
            Err(other) => panic!("expected InvalidConfig, got {other:?}"),
            Ok(_) => panic!("a zero timeout was accepted"),
        }
    }
}

#[test]
fn only_a_call_of_a_type_registered_here_runs_here() {
    // `Hold` is not registered on this node.
    let node = echo_node(config());
    let target = Target::Node(Arc::from("pipe@127.0.0.1"));
    let options = CallOptions::default();
    let route = Route::new(&node, &target, &options).unwrap();
    let here = "pipe@127.0.0.1";
    assert!(matches!(
        route.destination::<Echo>(Kind::Call, here, true, false),
        Ok(Destination::Here(_))
    ));
    // Not registered here, a cast, or a member to send to: sent (this node's endpoint is not
    // started in this test, so sending to it is refused as to a stopped node).
    assert!(sent(route.destination::<Hold>(
        Kind::Call,
        here,
        true,
        false
    )));
    assert!(sent(route.destination::<Echo>(
        Kind::Cast,
        here,
        true,
        false
    )));
    assert!(matches!(
        route.destination::<Hold>(Kind::Call, here, true, true),
        Ok(Destination::Member)
    ));
    // Another node: its endpoint, from the peer table.
    match route.destination::<Echo>(Kind::Call, "other@127.0.0.1", false, false) {
        Err(Error::ServiceUnavailable { reason, .. }) => {
            assert_eq!(reason, Unavailable::UnknownNode)
        }
        _ => panic!("expected UnknownNode"),
    }
    // A stopped node runs nothing.
    node.transport.stopped.store(true, Ordering::Release);
    assert!(sent(route.destination::<Echo>(
        Kind::Call,
        here,
        true,
        false
    )));
}

/// Whether `outcome` is a send to this node's endpoint, refused as to a stopped node.
fn sent<F>(outcome: Result<Destination<F>, Error>) -> bool {
    match outcome {
        Err(Error::ServiceUnavailable { reason, .. }) => reason == Unavailable::NodeStopped,
        _ => false,
    }
}

#[tokio::test(start_paused = true)]
async fn the_retry_loop_waits_as_the_retry_allows_and_ends_early_on_a_change() {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let nobody = || Error::NoMembers {
        balancer: "b".into(),
    };
    let waits = AtomicU32::new(0);
    let count = |attempt: u32, _: &Error| {
        assert_eq!(attempt, waits.fetch_add(1, Ordering::SeqCst) + 1);
    };
    // Nobody, ever: 2 retries are 2 waits, then the error.
    let retry = Retry::new(RetryCount::Times(2), Duration::from_millis(100));
    let never = || (Err::<(), _>(nobody()), std::future::pending::<()>());
    let outcome = look_until_found(retry, deadline, never, count, || Ok(())).await;
    assert!(
        matches!(outcome, Err(Error::NoMembers { .. })),
        "{outcome:?}"
    );
    assert_eq!(waits.swap(0, Ordering::SeqCst), 2);

    // Somebody on the third look; each wait ended by a change, not the 10 s interval.
    let started = tokio::time::Instant::now();
    let looks = AtomicU32::new(0);
    let third = || {
        let found = match looks.fetch_add(1, Ordering::SeqCst) {
            2 => Ok("member"),
            _ => Err(nobody()),
        };
        (found, std::future::ready(()))
    };
    let slow = Retry::new(RetryCount::Unlimited, Duration::from_secs(10));
    let outcome = look_until_found(slow, deadline, third, count, || Ok(())).await;
    assert_eq!(outcome.unwrap(), ("member", true));
    assert_eq!(waits.swap(0, Ordering::SeqCst), 2);
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no wait ran to its interval"
    );

    // Another error, or a recheck that fails, ends it at once.
    let other = || {
        let error = Error::UnknownBalancer {
            balancer: "b".into(),
        };
        (Err::<(), _>(error), std::future::ready(()))
    };
    let outcome = look_until_found(slow, deadline, other, count, || Ok(())).await;
    assert!(matches!(outcome, Err(Error::UnknownBalancer { .. })));
    let stopped = || {
        Err(Error::ServiceUnavailable {
            node: "pipe".into(),
            reason: Unavailable::NodeStopped,
        })
    };
    let outcome = look_until_found(slow, deadline, never, count, stopped).await;
    assert!(matches!(outcome, Err(Error::ServiceUnavailable { .. })));
    assert_eq!(waits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_routed_call_run_here_is_counted_until_its_run_ends_and_aborted_when_dropped() {
    let node = node(config());
    let shared = balancer(&node, BalancerConfig::new("b"));
    let target = Target::Balancer(Arc::clone(&shared));
    let directly = CallOptions {
        call_directly: Some(true),
        ..CallOptions::default()
    };
    let (reply, served_by) = dispatch::call::<Echo>(&node, &target, &directly, "hi".into())
        .await
        .unwrap();
    assert_eq!((reply.as_str(), &*served_by), ("hi", "pipe@127.0.0.1"));
    assert_eq!(shared.in_flight.get(), 0);

    let call = tokio::spawn({
        let (node, target) = (Arc::clone(&node), Target::Balancer(Arc::clone(&shared)));
        async move { dispatch::call::<Hold>(&node, &target, &directly, ()).await }
    });
    let counted = async {
        while shared.in_flight.get() == 0
            || node.transport.served.in_flight.load(Ordering::Relaxed) == 0
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), counted)
        .await
        .expect("the run is counted by its balancer and as served here");
    // The caller gives up: the run is aborted, and only then uncounted.
    call.abort();
    let uncounted = async {
        while shared.in_flight.get() != 0
            || node.transport.served.in_flight.load(Ordering::Relaxed) != 0
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), uncounted)
        .await
        .expect("the aborted run released its counts");
}

/// `Echo`, declared idempotent.
struct IdempotentEcho;
impl RemoteFunction for IdempotentEcho {
    const NAME: &'static str = "pipeline.idempotent_echo";
    const IDEMPOTENT: bool = true;
    type Args = String;
    type Reply = String;
    async fn call(&self, args: String) -> Result<String, FunctionError> {
        Ok(args)
    }
}

#[test]
fn only_an_idempotent_call_the_algorithm_routes_may_use_the_retry_budget() {
    const { assert!(!Echo::IDEMPOTENT, "not idempotent unless declared") };
    const { assert!(IdempotentEcho::IDEMPOTENT) };
    let node = node(config());
    let routed = Target::Balancer(balancer(&node, BalancerConfig::new("b")));
    let off = Target::Balancer(balancer(
        &node,
        BalancerConfig::new("off").retry_budget(crate::RetryBudget::none()),
    ));
    let direct = Target::Node(Arc::from("other@127.0.0.1"));
    let random = Target::RandomNode("".into());
    let none = CallOptions::default();
    let directly = CallOptions {
        call_directly: Some(true),
        ..CallOptions::default()
    };
    let may_retry = |target: &Target, options: &CallOptions, idempotent: bool| {
        Route::new(&node, target, options)
            .unwrap()
            .retry_budget(idempotent)
            .is_some()
    };
    assert!(may_retry(&routed, &none, true));
    assert!(
        !may_retry(&routed, &none, false),
        "never a call that may not run twice"
    );
    assert!(!may_retry(&off, &none, true), "RetryBudget::none() is off");
    assert!(
        !may_retry(&routed, &directly, true),
        "run here: no other member"
    );
    assert!(
        !may_retry(&direct, &none, true),
        "a direct call has one node"
    );
    assert!(
        !may_retry(&random, &none, true),
        "random-node calls are not retried"
    );
}

#[test]
fn only_an_idempotent_call_the_algorithm_routes_with_a_hedge_policy_may_be_hedged() {
    let node = node(config());
    let policy = crate::HedgePolicy::after(Duration::from_millis(10), 0.05, 1);
    let hedged = Target::Balancer(balancer(&node, BalancerConfig::new("h").hedge(policy)));
    let plain = Target::Balancer(balancer(&node, BalancerConfig::new("p")));
    let direct = Target::Node(Arc::from("other@127.0.0.1"));
    let with = |hedge: Option<bool>, directly: Option<bool>| CallOptions {
        hedge,
        call_directly: directly,
        ..CallOptions::default()
    };
    let may_hedge = |target: &Target, options: &CallOptions, idempotent: bool| {
        Route::new(&node, target, options)
            .unwrap()
            .hedging(idempotent, options.hedge)
            .is_some()
    };
    assert!(may_hedge(&hedged, &with(None, None), true));
    assert!(may_hedge(&hedged, &with(Some(true), None), true));
    for hedge in [None, Some(true), Some(false)] {
        assert!(
            !may_hedge(&hedged, &with(hedge, None), false),
            "never a call that may not run twice ({hedge:?})"
        );
        assert!(
            !may_hedge(&plain, &with(hedge, None), true),
            "no policy: nothing to hedge by ({hedge:?})"
        );
    }
    assert!(
        !may_hedge(&hedged, &with(Some(false), None), true),
        "the call turned it off"
    );
    assert!(
        !may_hedge(&hedged, &with(None, Some(true)), true),
        "run here: no other member"
    );
    assert!(
        !may_hedge(&direct, &with(Some(true), None), true),
        "a direct call has one node"
    );
}

#[test]
fn only_failures_of_the_retryable_kind_are_retried() {
    let unavailable = |reason| Error::ServiceUnavailable {
        node: "n@h".into(),
        reason,
    };
    for reason in [
        Unavailable::ConnectionLost,
        Unavailable::Disconnected,
        Unavailable::UnknownNode,
        Unavailable::NoEndpoint,
        Unavailable::Overloaded,
    ] {
        assert!(
            crate::retry::budget_retryable(&unavailable(reason.clone())),
            "{reason:?}"
        );
    }
    for error in [
        unavailable(Unavailable::NodeStopped),
        unavailable(Unavailable::Leaving),
        Error::RequestTimeout {
            node: "n@h".into(),
            timeout: Duration::from_secs(1),
        },
        Error::Remote {
            node: "n@h".into(),
            function: "f".into(),
            failure: crate::RemoteFailure::Failed,
            message: "no".into(),
        },
        Error::BadRequest {
            node: "n@h".into(),
            message: "no".into(),
        },
        Error::Overloaded {
            balancer: "b".into(),
            node: "n@h".into(),
            limit: 1,
        },
        Error::NoMembers {
            balancer: "b".into(),
        },
    ] {
        assert!(!crate::retry::budget_retryable(&error), "{error:?}");
    }
}

#[tokio::test]
async fn an_idempotent_call_deposits_into_its_balancers_budget_and_others_do_not() {
    // No reserve, one retry per call: the balance counts the idempotent calls made.
    let node = node(config());
    node.transport.registry.register(IdempotentEcho).unwrap();
    let shared = balancer(
        &node,
        BalancerConfig::new("b").retry_budget(crate::RetryBudget::new(
            1.0,
            0,
            Duration::from_secs(60),
        )),
    );
    let target = Target::Balancer(Arc::clone(&shared));
    let directly = CallOptions {
        call_directly: Some(true),
        ..CallOptions::default()
    };
    // Run here (call_directly): no other member, nothing deposited.
    dispatch::call::<IdempotentEcho>(&node, &target, &directly, "a".into())
        .await
        .unwrap();
    assert_eq!(shared.retry_budget.balance(shared.budget_now()), 0);
    // An empty pool: the routed calls fail (no retry wait), the idempotent ones deposit.
    let routed = CallOptions {
        retry: Some(Retry::never()),
        ..CallOptions::default()
    };
    for _ in 0..3 {
        let outcome = dispatch::call::<IdempotentEcho>(&node, &target, &routed, "b".into()).await;
        assert!(
            matches!(outcome, Err(Error::NoMembers { .. })),
            "{outcome:?}"
        );
        let outcome = dispatch::call::<Echo>(&node, &target, &routed, "c".into()).await;
        assert!(
            matches!(outcome, Err(Error::NoMembers { .. })),
            "{outcome:?}"
        );
    }
    assert_eq!(shared.retry_budget.balance(shared.budget_now()), 3);
    // Per call: `Echo` made idempotent deposits, `IdempotentEcho` made not does not.
    let echo_idempotent = CallOptions {
        idempotent: Some(true),
        ..routed.clone()
    };
    let not_idempotent = CallOptions {
        idempotent: Some(false),
        ..routed
    };
    let _ = dispatch::call::<Echo>(&node, &target, &echo_idempotent, "d".into()).await;
    let _ = dispatch::call::<IdempotentEcho>(&node, &target, &not_idempotent, "e".into()).await;
    assert_eq!(shared.retry_budget.balance(shared.budget_now()), 4);
}
