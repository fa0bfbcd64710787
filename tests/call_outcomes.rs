//! Call outcomes reach a selector that learns: through a real balancer, every routed call or
//! cast is observed exactly once — ok, the function's error by its code, a timeout, and
//! `Cancelled` for a dropped call or a `select_node` guard — with the latency from the pick on
//! the balancer's clock, before the selection's release.
//!
//! Runs a `Node` in this process (one per process: nextest runs each test alone); this node is
//! the only member, so calls run in-process through the same routed path.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rpc_load_balancer::routing::{BuildContext, MemberView, Outcome, OutcomeKind, Request};
use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, Error, Node, NodeConfig, RoundRobin, Selector,
};
use rpclb::functions::{register_all, Fail, Sleep};

/// What the selector was told, in order.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Observed(String, OutcomeKind, Duration),
    Released(String),
}

/// Picks the first member; learns, and records every outcome and release.
#[derive(Default)]
struct Learning {
    events: Arc<Mutex<Vec<Event>>>,
}

impl Algorithm for Learning {
    fn name(&self) -> &'static str {
        "learning"
    }
    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(LearningSelector {
            events: Arc::clone(&self.events),
        }))
    }
}

struct LearningSelector {
    events: Arc<Mutex<Vec<Event>>>,
}

impl Selector for LearningSelector {
    fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
        Ok(0)
    }
    fn learns(&self) -> bool {
        true
    }
    fn observe(&self, outcome: &Outcome<'_>) {
        self.events.lock().unwrap().push(Event::Observed(
            outcome.member.node().to_string(),
            outcome.kind,
            outcome.latency,
        ));
    }
    fn released(&self, member: &MemberView) {
        self.events
            .lock()
            .unwrap()
            .push(Event::Released(member.node().to_string()));
    }
}

/// Takes the events so far, checks each observe is followed by its release on the same node,
/// and returns the observed kinds with their latencies.
fn take(events: &Mutex<Vec<Event>>) -> Vec<(OutcomeKind, Duration)> {
    let events = std::mem::take(&mut *events.lock().unwrap());
    assert_eq!(events.len() % 2, 0, "{events:?}");
    events
        .chunks(2)
        .map(|pair| match pair {
            [Event::Observed(node, kind, latency), Event::Released(released)] => {
                assert_eq!(node, released, "{events:?}");
                (*kind, *latency)
            }
            other => panic!("not observe then release: {other:?} in {events:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_routed_call_and_cast_is_observed_once_with_its_outcome() {
    let node = Node::start(NodeConfig::new("outcomes", "127.0.0.1:0").cookie("outcomes"))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    let learning = Learning::default();
    let events = Arc::clone(&learning.events);
    let balancer = Balancer::start(BalancerConfig::new("outcomes").algorithm(learning))
        .await
        .unwrap();

    // Ok, with the time from the pick to the reply (the clock is coarse: a few ms).
    balancer.call::<Sleep>(60).await.unwrap();
    let seen = take(&events);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, OutcomeKind::Ok);
    assert!(
        (Duration::from_millis(40)..Duration::from_secs(5)).contains(&seen[0].1),
        "{seen:?}"
    );

    // The function's error, by its code.
    let error = balancer.call::<Fail>("no".into()).await.unwrap_err();
    let kinds: Vec<OutcomeKind> = take(&events).iter().map(|s| s.0).collect();
    assert_eq!(kinds, [OutcomeKind::Error(error.code())]);

    // A timeout.
    let timed_out = balancer
        .call::<Sleep>(5_000)
        .timeout(Duration::from_millis(100))
        .await;
    assert!(
        matches!(timed_out, Err(Error::RequestTimeout { .. })),
        "{timed_out:?}"
    );
    let seen = take(&events);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, OutcomeKind::Timeout);
    assert!(seen[0].1 >= Duration::from_millis(80), "{seen:?}");

    // A call whose caller stops waiting: cancelled.
    let dropped = tokio::time::timeout(
        Duration::from_millis(50),
        balancer.call::<Sleep>(5_000).into_future(),
    )
    .await;
    assert!(dropped.is_err());
    let seen = take(&events);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, OutcomeKind::Cancelled);

    // A selection without a call: cancelled when its guard drops, not before.
    let guard = balancer.select_node(None).unwrap();
    assert!(
        events.lock().unwrap().is_empty(),
        "nothing until the guard drops"
    );
    drop(guard);
    // It carried no call: no clock was read for it.
    assert_eq!(take(&events), [(OutcomeKind::Cancelled, Duration::ZERO)]);

    // A cast, handed over.
    balancer.cast::<Sleep>(0).await.unwrap();
    assert_eq!(
        take(&events).iter().map(|s| s.0).collect::<Vec<_>>(),
        [OutcomeKind::Ok]
    );

    balancer.stop().await;
    assert!(take(&events).is_empty(), "nothing observed twice");

    // A selector that does not learn is never asked to observe (the default `observe` would
    // not tell): the built-ins' selectors do not learn.
    assert!(!RoundRobin::new()
        .build(&BuildContext::new("b"))
        .unwrap()
        .learns());
    node.shutdown().await;
}
