//! The balancer as a ractor actor, the ractor way: `Actor::spawn_linked(name, BalancerActor,
//! config, parent)` gives an `ActorRef` and a `JoinHandle`; a handle for calls comes from the
//! actor reference or the name; startup errors are typed; the parent gets ordinary ractor
//! supervision events; and ending the actor without `Balancer::stop` still drains.
//!
//! One `Node` per process: nextest runs each test alone.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SpawnErr, SupervisionEvent};
use rpc_load_balancer::{
    Balancer, BalancerActor, BalancerConfig, DrainOutcome, Error, Node, NodeConfig,
};
use rpclb::functions::{register_all, Sleep, Whoami};
use tokio::sync::mpsc;

/// An app's supervisor: forwards every supervision event it gets (as ractor delivers it) to
/// the test, and keeps running; its `post_stop` is empty.
struct App(mpsc::UnboundedSender<String>);

impl Actor for App {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _: ActorRef<()>,
        event: SupervisionEvent,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let line = match &event {
            SupervisionEvent::ActorStarted(cell) => format!("started {}", cell.get_id()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                format!("terminated {} {reason:?}", cell.get_id())
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                format!("failed {} {error}", cell.get_id())
            }
            _ => return Ok(()),
        };
        let _ = self.0.send(line);
        Ok(())
    }
}

async fn node(name: &str) -> Node {
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(name))
        .await
        .unwrap();
    register_all(&node, Duration::ZERO).unwrap();
    node
}

/// The next event the app got that is not a start, within 5 s.
async fn next_end(events: &mut mpsc::UnboundedReceiver<String>) -> String {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .expect("a supervision event in time")
            .expect("the app runs");
        if !event.starts_with("started") {
            return event;
        }
    }
}

/// The [`Error`] a failed spawn of a [`BalancerActor`] carries.
fn startup_error(
    spawned: Result<
        (
            ActorRef<rpc_load_balancer::balancer::SupervisorMsg>,
            ractor::concurrency::JoinHandle<()>,
        ),
        SpawnErr,
    >,
) -> Error {
    match spawned {
        Err(SpawnErr::StartupFailed(error)) => *error
            .downcast::<Error>()
            .unwrap_or_else(|other| panic!("not a typed error: {other}")),
        Err(other) => panic!("unexpected spawn error {other}"),
        Ok(_) => panic!("the spawn succeeded"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balancer_actor_spawned_the_ractor_way_calls_and_reports_to_its_parent() {
    let node = node("actor_way").await;
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (app, _) = Actor::spawn(None, App(events_tx), ()).await.unwrap();
    let config = BalancerConfig::new("reports").leave_grace(Duration::from_millis(50));
    let (actor, join) = Actor::spawn_linked(
        Some("my_reports".into()),
        BalancerActor,
        config.clone(),
        app.get_cell(),
    )
    .await
    .unwrap();

    // A handle from the actor reference calls; the name finds the same balancer.
    let reports = Balancer::from_actor(&actor).unwrap();
    assert_eq!(reports.actor().get_id(), actor.get_id());
    assert_eq!(reports.members().nodes(), vec![node.name().to_string()]);
    assert_eq!(reports.call::<Whoami>(()).await.unwrap(), node.name());
    let by_name = Balancer::lookup("reports").unwrap();
    assert_eq!(by_name.actor().get_id(), actor.get_id());
    // It is a child of the app in ractor's own supervision tree.
    assert_eq!(
        actor.get_cell().try_get_supervisor().map(|p| p.get_id()),
        Some(app.get_id())
    );

    // Startup errors are typed: a second balancer under the name, a bad option.
    let twice = Actor::spawn(None, BalancerActor, config.clone()).await;
    assert!(
        matches!(startup_error(twice), Error::BalancerAlreadyStarted { balancer } if balancer == "reports")
    );
    let bad = Actor::spawn(None, BalancerActor, BalancerConfig::new("")).await;
    assert!(matches!(startup_error(bad), Error::InvalidConfig { .. }));

    // A deliberate stop: the parent gets an ordinary ActorTerminated for the actor, and the
    // JoinHandle completes.
    let report = reports.stop().await;
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    let event = next_end(&mut events).await;
    assert!(
        event.starts_with(&format!("terminated {}", actor.get_id())),
        "{event}"
    );
    tokio::time::timeout(Duration::from_secs(5), join)
        .await
        .expect("the actor's task ends")
        .unwrap();
    assert!(matches!(
        Balancer::from_actor(&actor),
        Err(Error::UnknownBalancer { .. })
    ));

    // Killed while a call runs on it: the parent hears of it as of any killed child, and the
    // balancer drains all the same — the call completes, the report is a drain's.
    let (actor, _) = Actor::spawn_linked(None, BalancerActor, config, app.get_cell())
        .await
        .unwrap();
    let reports = Balancer::from_actor(&actor).unwrap();
    let call = {
        let reports = reports.clone();
        tokio::spawn(async move { reports.call::<Sleep>(300).await })
    };
    while reports.served() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    actor.kill();
    let event = next_end(&mut events).await;
    assert!(
        event.starts_with(&format!("terminated {}", actor.get_id())),
        "{event}"
    );
    assert!(call.await.unwrap().is_ok(), "the call in flight completed");
    let report = reports.stop().await;
    assert_eq!(report.outcome, DrainOutcome::Drained, "{report:?}");
    assert_eq!(reports.served(), 0);
    app.stop(None);
    assert_eq!(node.shutdown().await, vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_keeps_failing_ends_the_balancer_and_its_parent_hears_of_it() {
    let node = node("actor_gives_up").await;
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (app, _) = Actor::spawn(None, App(events_tx), ()).await.unwrap();
    let (actor, join) = Actor::spawn_linked(
        None,
        BalancerActor,
        BalancerConfig::new("fragile"),
        app.get_cell(),
    )
    .await
    .unwrap();
    let fragile = Balancer::from_actor(&actor).unwrap();
    let member = format!("rpc_load_balancer/fragile/{}", node.name());
    // The node's keeper restarts the member 10 times within 10 s; the 11th end gives up.
    let mut killed = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fragile.is_running() {
        assert!(std::time::Instant::now() < deadline, "{killed} kills");
        if let Some(cell) = ractor::registry::where_is(member.clone()) {
            cell.kill_and_wait(Some(Duration::from_secs(2)))
                .await
                .unwrap();
            killed += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(killed, 11, "restarted 10 times, given up at the 11th");
    // The balancer's actor stopped: the parent gets an ordinary ActorTerminated with the
    // reason, and the report says nothing was drained.
    let event = next_end(&mut events).await;
    assert!(
        event.starts_with(&format!("terminated {}", actor.get_id()))
            && event.contains("restart limit"),
        "{event}"
    );
    tokio::time::timeout(Duration::from_secs(5), join)
        .await
        .expect("the actor's task ends")
        .unwrap();
    assert_eq!(fragile.stop().await.outcome, DrainOutcome::Killed);
    assert!(ractor::registry::where_is(member).is_none());
    assert!(matches!(
        Balancer::lookup("fragile"),
        Err(Error::UnknownBalancer { .. })
    ));
    // The name is free again.
    let again = Balancer::start(BalancerConfig::new("fragile"))
        .await
        .unwrap();
    again.stop().await;
    app.stop(None);
    assert_eq!(node.shutdown().await, vec![]);
}
