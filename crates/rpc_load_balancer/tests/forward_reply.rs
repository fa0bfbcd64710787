//! Replies into mailboxes on a real local node: an actor's handler starts a balanced call with
//! `forward_to` and returns at once, its mailbox keeps serving while the call runs, the reply
//! arrives as its message, and a receiver that stops cancels its call on the serving side.
//!
//! One node per process: run by nextest (a process per test).

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{
    Balancer, BalancerConfig, CallContext, Error, ForwardOutcome, FunctionError, Node, NodeConfig,
    RemoteFunction,
};
use tokio::sync::{mpsc, Notify};

/// The longest any wait here may take before the test fails.
const BOUND: Duration = Duration::from_secs(10);

/// Waits until the test lets it go, then doubles; reports its number if it is stopped first
/// (a call run on this node is stopped by dropping it, a remote one by its cancellation).
struct Gated {
    release: Arc<Notify>,
    running: mpsc::UnboundedSender<u64>,
    cancelled: mpsc::UnboundedSender<u64>,
}

/// Sends its number when dropped before it is disarmed.
struct ReportIfStopped(Option<(mpsc::UnboundedSender<u64>, u64)>);

impl Drop for ReportIfStopped {
    fn drop(&mut self) {
        if let Some((to, n)) = self.0.take() {
            let _ = to.send(n);
        }
    }
}

impl RemoteFunction for Gated {
    const NAME: &'static str = "forward_test.gated";
    type Args = u64;
    type Reply = u64;
    async fn call(&self, n: u64) -> Result<u64, FunctionError> {
        let mut stopped = ReportIfStopped(Some((self.cancelled.clone(), n)));
        let _ = self.running.send(n);
        let context = CallContext::current();
        tokio::select! {
            _ = self.release.notified() => {
                stopped.0 = None;
                Ok(2 * n)
            }
            _ = context.cancelled() => Err(FunctionError::new("cancelled")),
        }
    }
}

/// What the worker tells the test.
#[derive(Debug)]
enum Seen {
    Started(u64),
    Pong,
    Done(Result<u64, Error>),
}

#[derive(ractor_cluster::RactorMessage)]
enum WorkerMsg {
    Start(u64),
    Ping,
    Done(Result<u64, Error>),
}

struct Worker;

impl Actor for Worker {
    type Msg = WorkerMsg;
    type State = (Balancer, mpsc::UnboundedSender<Seen>);
    type Arguments = (Balancer, mpsc::UnboundedSender<Seen>);

    async fn pre_start(
        &self,
        _: ActorRef<WorkerMsg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<WorkerMsg>,
        message: WorkerMsg,
        (balancer, seen): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::Start(n) => {
                // Returns at once: the reply comes back as `Done`.
                let _ = balancer
                    .call::<Gated>(n)
                    .timeout(BOUND)
                    .forward_to(&myself, WorkerMsg::Done);
                let _ = seen.send(Seen::Started(n));
            }
            WorkerMsg::Ping => {
                let _ = seen.send(Seen::Pong);
            }
            WorkerMsg::Done(result) => {
                let _ = seen.send(Seen::Done(result));
            }
        }
        Ok(())
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(BOUND, rx.recv())
        .await
        .expect("the worker said nothing in time")
        .expect("the worker is gone")
}

struct Setup {
    node: Node,
    balancer: Balancer,
    release: Arc<Notify>,
    running: mpsc::UnboundedReceiver<u64>,
    cancelled: mpsc::UnboundedReceiver<u64>,
}

async fn setup(name: &str) -> Setup {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie("forward"))
        .await
        .unwrap();
    let release = Arc::new(Notify::new());
    let (cancelled_tx, cancelled) = mpsc::unbounded_channel();
    let (running_tx, running) = mpsc::unbounded_channel();
    node.register(Gated {
        release: Arc::clone(&release),
        running: running_tx,
        cancelled: cancelled_tx,
    })
    .unwrap();
    let balancer = Balancer::start(BalancerConfig::new("forwarded"))
        .await
        .unwrap();
    balancer.wait_for_members(1, BOUND).await.unwrap();
    Setup {
        node,
        balancer,
        release,
        running,
        cancelled,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_returns_at_once_and_the_reply_arrives_as_a_message() {
    let mut s = setup("forward_reply").await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let (worker, _) = Actor::spawn(None, Worker, (s.balancer.clone(), tx))
        .await
        .unwrap();
    worker.send_message(WorkerMsg::Start(21)).unwrap();
    assert!(matches!(next(&mut seen).await, Seen::Started(21)));
    let running = tokio::time::timeout(BOUND, s.running.recv()).await;
    assert_eq!(running.unwrap(), Some(21), "the call never ran");
    // The call is still running (gated), yet the mailbox serves the next message.
    worker.send_message(WorkerMsg::Ping).unwrap();
    assert!(matches!(next(&mut seen).await, Seen::Pong));
    assert_eq!(s.balancer.in_flight(), 1, "the call is not running");
    s.release.notify_one();
    match next(&mut seen).await {
        Seen::Done(Ok(42)) => {}
        other => panic!("expected the reply 42, got {other:?}"),
    }
    worker.stop_and_wait(None, None).await.unwrap();
    s.balancer.stop().await;
    s.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_stops_cancels_its_call_on_the_serving_side() {
    let mut s = setup("forward_cancel").await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let (worker, _) = Actor::spawn(None, Worker, (s.balancer.clone(), tx))
        .await
        .unwrap();
    worker.send_message(WorkerMsg::Start(5)).unwrap();
    assert!(matches!(next(&mut seen).await, Seen::Started(5)));
    // Stopped once the call runs (stopped before, the call is dropped before it runs).
    let running = tokio::time::timeout(BOUND, s.running.recv()).await;
    assert_eq!(running.unwrap(), Some(5), "the call never ran");
    worker.stop_and_wait(None, None).await.unwrap();
    let cancelled = tokio::time::timeout(BOUND, s.cancelled.recv()).await;
    assert_eq!(cancelled.unwrap(), Some(5), "the call was not cancelled");
    // Its selection is released: nothing stays counted in flight.
    for _ in 0..1000 {
        if s.balancer.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.balancer.in_flight(), 0);
    s.balancer.stop().await;
    s.node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_forwards_its_error_too() {
    let s = setup("forward_direct").await;
    let (tx, mut seen) = mpsc::unbounded_channel();
    let (worker, _) = Actor::spawn(None, Worker, (s.balancer.clone(), tx))
        .await
        .unwrap();
    // A node that does not exist: the error arrives as the message.
    let forwarding = s
        .node
        .call::<Gated>("nobody@127.0.0.1", 1)
        .timeout(BOUND)
        .forward_to(&worker, WorkerMsg::Done);
    assert_eq!(forwarding.outcome().await, ForwardOutcome::Delivered);
    match next(&mut seen).await {
        Seen::Done(Err(Error::ServiceUnavailable { .. })) => {}
        other => panic!("expected ServiceUnavailable, got {other:?}"),
    }
    worker.stop_and_wait(None, None).await.unwrap();
    s.balancer.stop().await;
    s.node.shutdown().await;
}
