//! Forwarding an outcome into a mailbox, over stand-in calls (any future of a result): the
//! outcome is delivered once, the call is dropped when the receiver stops or the forwarding is
//! aborted, and a panicking map loses only its own outcome.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;

use super::{forward, ForwardOutcome};
use crate::Error;

/// The longest any wait here may take before the test fails.
const BOUND: Duration = Duration::from_secs(10);

/// Passes every message it gets to the test.
struct Inbox;

#[derive(Debug, ractor_cluster::RactorMessage)]
enum InboxMsg {
    Outcome(Result<u32, Error>),
}

impl Actor for Inbox {
    type Msg = InboxMsg;
    type State = mpsc::UnboundedSender<Result<u32, Error>>;
    type Arguments = mpsc::UnboundedSender<Result<u32, Error>>;

    async fn pre_start(
        &self,
        _: ActorRef<InboxMsg>,
        to_test: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(to_test)
    }

    async fn handle(
        &self,
        _: ActorRef<InboxMsg>,
        InboxMsg::Outcome(outcome): InboxMsg,
        to_test: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = to_test.send(outcome);
        Ok(())
    }
}

async fn inbox() -> (
    ActorRef<InboxMsg>,
    mpsc::UnboundedReceiver<Result<u32, Error>>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (actor, _) = Actor::spawn(None, Inbox, tx).await.unwrap();
    (actor, rx)
}

/// A call that never ends and records being dropped (as a cancelled call is).
struct Endless(Arc<AtomicBool>);

impl Future for Endless {
    type Output = Result<u32, Error>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

impl Drop for Endless {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_reply_and_an_error_each_arrive_once_as_the_receivers_message() {
    let (actor, mut rx) = inbox().await;
    let ok = forward(async { Ok(7) }, &actor, InboxMsg::Outcome);
    assert_eq!(ok.outcome().await, ForwardOutcome::Delivered);
    let failed = forward(
        async { Err(Error::NodeNotRunning) },
        &actor,
        InboxMsg::Outcome,
    );
    assert_eq!(failed.outcome().await, ForwardOutcome::Delivered);
    let first = tokio::time::timeout(BOUND, rx.recv()).await.unwrap();
    assert_eq!(first.unwrap().unwrap(), 7);
    let second = tokio::time::timeout(BOUND, rx.recv()).await.unwrap();
    assert!(matches!(second.unwrap(), Err(Error::NodeNotRunning)));
    // Nothing else was delivered.
    actor.stop(None);
    assert!(tokio::time::timeout(BOUND, rx.recv())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_receiver_that_stops_drops_its_call() {
    let (actor, _rx) = inbox().await;
    let dropped = Arc::new(AtomicBool::new(false));
    let forwarding = forward(Endless(Arc::clone(&dropped)), &actor, InboxMsg::Outcome);
    tokio::task::yield_now().await;
    assert!(
        !dropped.load(Ordering::SeqCst),
        "dropped before the receiver stopped"
    );
    actor.stop_and_wait(None, None).await.unwrap();
    let outcome = tokio::time::timeout(BOUND, forwarding.outcome()).await;
    assert_eq!(outcome.unwrap(), ForwardOutcome::ReceiverStopped);
    assert!(
        dropped.load(Ordering::SeqCst),
        "the call outlived its receiver"
    );
}

#[tokio::test]
async fn a_receiver_already_stopped_gets_no_call_run() {
    let (actor, _rx) = inbox().await;
    actor.stop_and_wait(None, None).await.unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let forwarding = forward(Endless(Arc::clone(&dropped)), &actor, InboxMsg::Outcome);
    let outcome = tokio::time::timeout(BOUND, forwarding.outcome()).await;
    assert_eq!(outcome.unwrap(), ForwardOutcome::ReceiverStopped);
    assert!(dropped.load(Ordering::SeqCst));
    // Not even a call that would end at once is run.
    let ran = Arc::new(AtomicBool::new(false));
    let ran_too = Arc::clone(&ran);
    let ready = forward(
        async move {
            ran_too.store(true, Ordering::SeqCst);
            Ok(1)
        },
        &actor,
        InboxMsg::Outcome,
    );
    assert_eq!(ready.outcome().await, ForwardOutcome::ReceiverStopped);
    assert!(
        !ran.load(Ordering::SeqCst),
        "a call ran for a stopped receiver"
    );
}

#[tokio::test]
async fn abort_drops_the_call_and_delivers_nothing() {
    let (actor, mut rx) = inbox().await;
    let dropped = Arc::new(AtomicBool::new(false));
    let forwarding = forward(Endless(Arc::clone(&dropped)), &actor, InboxMsg::Outcome);
    assert!(!forwarding.is_finished());
    forwarding.abort();
    let outcome = tokio::time::timeout(BOUND, forwarding.outcome()).await;
    assert_eq!(outcome.unwrap(), ForwardOutcome::Aborted);
    assert!(dropped.load(Ordering::SeqCst));
    actor.stop(None);
    assert!(tokio::time::timeout(BOUND, rx.recv())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_panicking_map_loses_its_outcome_only() {
    let (actor, mut rx) = inbox().await;
    let panicked = forward(
        async { Ok(1) },
        &actor,
        |_: Result<u32, Error>| -> InboxMsg { panic!("the map fails") },
    );
    assert_eq!(panicked.outcome().await, ForwardOutcome::Panicked);
    let next = forward(async { Ok(2) }, &actor, InboxMsg::Outcome);
    assert_eq!(next.outcome().await, ForwardOutcome::Delivered);
    let got = tokio::time::timeout(BOUND, rx.recv()).await.unwrap();
    assert_eq!(got.unwrap().unwrap(), 2);
}

#[tokio::test]
async fn a_panicking_call_is_reported_panicked_not_aborted() {
    let (actor, mut rx) = inbox().await;
    let panicked = forward(
        async { panic!("the message builder fails") },
        &actor,
        InboxMsg::Outcome,
    );
    assert_eq!(panicked.outcome().await, ForwardOutcome::Panicked);
    let next = forward(async { Ok(4) }, &actor, InboxMsg::Outcome);
    assert_eq!(next.outcome().await, ForwardOutcome::Delivered);
    let got = tokio::time::timeout(BOUND, rx.recv()).await.unwrap();
    assert_eq!(
        got.unwrap().unwrap(),
        4,
        "the panicking call delivered something"
    );
}

#[test]
fn without_a_runtime_the_receiver_is_told_at_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (actor, mut rx) = runtime.block_on(inbox());
    // This thread runs no runtime: nothing could run the call.
    let forwarding = forward(async { Ok(3) }, &actor, InboxMsg::Outcome);
    assert!(forwarding.is_finished());
    let got = runtime.block_on(async { tokio::time::timeout(BOUND, rx.recv()).await });
    assert!(matches!(got.unwrap().unwrap(), Err(Error::NodeNotRunning)));
    assert_eq!(
        runtime.block_on(forwarding.outcome()),
        ForwardOutcome::Delivered
    );
}
