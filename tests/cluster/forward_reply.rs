//! Replies into mailboxes across real processes: an actor forwards balanced calls to a child
//! node's functions, gets their replies as its messages, and — when it stops while a call runs
//! there — the call is cancelled on the child (its served count drops to 0 long before the
//! call's own end).

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rpc_load_balancer::{Balancer, ControlReply, ControlRequest, Error};
use rpclb::harness::Cluster;
use tokio::sync::mpsc;

use crate::drain::{caller, serving};
use crate::{Sleep, Whoami, BIN};

/// Bound on every wait of this test.
const BOUND: Duration = Duration::from_secs(10);

#[derive(ractor_cluster::RactorMessage)]
enum CallerMsg {
    /// Ask the member who it is; the answer comes back as `Named`.
    Ask,
    /// Sleep on the member for the given ms; the end comes back as `Slept`.
    Sleep(u64),
    Named(Result<String, Error>),
    Slept(Result<(), Error>),
}

/// A caller actor: starts calls with `forward_to` and passes what comes back to the test.
struct CallerActor;

impl Actor for CallerActor {
    type Msg = CallerMsg;
    type State = (Balancer, mpsc::UnboundedSender<String>);
    type Arguments = (Balancer, mpsc::UnboundedSender<String>);

    async fn pre_start(
        &self,
        _: ActorRef<CallerMsg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<CallerMsg>,
        message: CallerMsg,
        (work, out): &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let _ = match message {
            CallerMsg::Ask => {
                work.call::<Whoami>(())
                    .timeout(BOUND)
                    .forward_to(&myself, CallerMsg::Named);
                out.send("asked".into())
            }
            CallerMsg::Sleep(ms) => {
                work.call::<Sleep>(ms)
                    .timeout(Duration::from_millis(ms))
                    .forward_to(&myself, CallerMsg::Slept);
                out.send("sleeping".into())
            }
            CallerMsg::Named(name) => out.send(format!("named {name:?}")),
            CallerMsg::Slept(end) => out.send(format!("slept {end:?}")),
        };
        Ok(())
    }
}

async fn next(got: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(BOUND, got.recv())
        .await
        .expect("the caller actor said nothing in time")
        .expect("the caller actor is gone")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_replies_arrive_and_a_stopped_receiver_cancels_its_remote_call() {
    let cluster = Cluster::start(BIN, 1, &["--balancer", "work"])
        .await
        .unwrap();
    let member = cluster.nodes[0].node().to_string();
    let (me, work) = caller(&cluster).await;
    let (out, mut got) = mpsc::unbounded_channel();
    let (actor, _) = Actor::spawn(None, CallerActor, (work.clone(), out))
        .await
        .unwrap();

    actor.send_message(CallerMsg::Ask).unwrap();
    assert_eq!(next(&mut got).await, "asked");
    assert_eq!(next(&mut got).await, format!("named Ok({member:?})"));

    // A long call on the child, then the receiver stops: the child stops serving it.
    actor.send_message(CallerMsg::Sleep(60_000)).unwrap();
    assert_eq!(next(&mut got).await, "sleeping");
    serving(&me, &member).await;
    actor.stop_and_wait(None, None).await.unwrap();
    let deadline = Instant::now() + BOUND;
    loop {
        let served = me
            .control(&member, ControlRequest::Served("work".into()))
            .await;
        if matches!(served, Ok(ControlReply::Served(Some(0)))) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the call still runs on {member}: {served:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(work.in_flight(), 0, "the caller still counts the call");
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}
