//! Once a node begins to shut down, no balancer starts on it: a supervisor that restarts its
//! balancer when it ends (the App of docs/how-to/draining-and-shutdown.md §4) is refused with
//! `NodeNotRunning`, and a start already under way is waited for and stopped, so nothing runs
//! after `Node::shutdown` returns.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SpawnErr, SupervisionEvent};
use tokio::sync::{mpsc, Notify};

use crate::balancer::{Child, SupervisorMsg};
use crate::wire::SCOPE;
use crate::{Balancer, BalancerActor, BalancerConfig, DrainOutcome, Error, Node, NodeConfig};

/// Restarts its balancer whenever it ends; sends the error of each refused restart.
struct Restarting(mpsc::UnboundedSender<Error>);

struct RestartingState {
    config: BalancerConfig,
    actor: ActorRef<SupervisorMsg>,
}

impl Actor for Restarting {
    type Msg = ();
    type State = RestartingState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<()>,
        _: (),
    ) -> Result<RestartingState, ActorProcessingErr> {
        let config = BalancerConfig::new("reports").leave_grace(Duration::from_millis(50));
        let (actor, _) =
            Actor::spawn_linked(None, BalancerActor, config.clone(), myself.get_cell()).await?;
        Ok(RestartingState { config, actor })
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<()>,
        event: SupervisionEvent,
        state: &mut RestartingState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorTerminated(cell, ..)
        | SupervisionEvent::ActorFailed(cell, _) = &event
        {
            if cell.get_id() == state.actor.get_id() {
                let config = state.config.clone();
                match Actor::spawn_linked(None, BalancerActor, config, myself.get_cell()).await {
                    Ok((actor, _)) => state.actor = actor,
                    Err(SpawnErr::StartupFailed(error)) => match error.downcast::<Error>() {
                        Ok(error) => {
                            let _ = self.0.send(*error);
                        }
                        Err(other) => panic!("not a typed error: {other}"),
                    },
                    Err(other) => panic!("{other}"),
                }
            }
        }
        Ok(())
    }
}

/// Nothing of balancer `name` runs on this process's node `node`: no member actor, no pg
/// member.
fn nothing_runs(name: &str, node: &str) {
    let member = format!("rpc_load_balancer/{name}/{node}");
    assert!(
        ractor::registry::where_is(member).is_none(),
        "the member of {name} runs"
    );
    let members = ractor::pg::get_scoped_members(&SCOPE.to_string(), &name.to_string());
    assert!(members.is_empty(), "{} pg members of {name}", members.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_balancer_restarted_by_its_supervisor_during_shutdown_is_refused() {
    let node = Node::start(NodeConfig::new("restarting", "127.0.0.1:0").cookie("restarting"))
        .await
        .unwrap();
    let node_name = node.name().to_string();
    let (refused_tx, mut refused) = mpsc::unbounded_channel();
    let (app, _) = Actor::spawn(None, Restarting(refused_tx), ())
        .await
        .unwrap();
    let reports = node.shutdown().await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].outcome, DrainOutcome::Drained, "{reports:?}");
    // The App's restart, when the shutdown stopped its balancer, was refused, typed.
    let error = tokio::time::timeout(Duration::from_secs(5), refused.recv())
        .await
        .expect("the restart was refused")
        .unwrap();
    assert!(matches!(error, Error::NodeNotRunning), "{error:?}");
    nothing_runs("reports", &node_name);
    assert!(Node::current().is_none());
    app.stop(None);
}

/// A trivial child actor.
struct Idle;

impl Actor for Idle {
    type Msg = ();
    type State = ();
    type Arguments = ();
    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// A child whose spawn tells `entered` it has begun, then waits for `release`: a start with
/// it holds its name's reservation until the test lets it go on.
fn held_child(entered: &Arc<Notify>, release: &Arc<Notify>) -> Child {
    let (entered, release) = (Arc::clone(entered), Arc::clone(release));
    Child {
        name: "held".into(),
        spawn: Arc::new(move |parent| {
            let (entered, release) = (Arc::clone(&entered), Arc::clone(&release));
            Box::pin(async move {
                entered.notify_one();
                release.notified().await;
                let (actor, _) = Actor::spawn_linked(None, Idle, (), parent).await?;
                Ok(actor.get_cell())
            })
        }),
    }
}

/// Starts balancer `name` with a held child, waits until the child's spawn has begun, then
/// begins the node's shutdown and waits until it refuses new starts. Returns the start and the
/// shutdown, both under way.
async fn start_then_shut_down(
    node: &Node,
    name: &str,
    release: &Arc<Notify>,
) -> (
    tokio::task::JoinHandle<Result<Balancer, Error>>,
    tokio::task::JoinHandle<Vec<crate::DrainReport>>,
) {
    let entered = Arc::new(Notify::new());
    let config = BalancerConfig::new(name).child(held_child(&entered, release));
    let start = tokio::spawn(Balancer::start(config));
    entered.notified().await;
    let shutdown = tokio::spawn({
        let node = node.clone();
        async move { node.shutdown().await }
    });
    // The shutdown has begun: no new start is let in.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match Balancer::start(BalancerConfig::new("probe")).await {
            Err(Error::NodeNotRunning) => break,
            Ok(probe) => {
                probe.stop().await;
            }
            Err(other) => panic!("{other:?}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the shutdown did not begin"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (start, shutdown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_under_way_when_shutdown_begins_is_waited_for_and_stopped() {
    let node = Node::start(NodeConfig::new("under_way", "127.0.0.1:0").cookie("under_way"))
        .await
        .unwrap();
    let node_name = node.name().to_string();
    let release = Arc::new(Notify::new());
    let (start, shutdown) = start_then_shut_down(&node, "late", &release).await;
    release.notify_one();
    let started = start.await.unwrap();
    let reports = shutdown.await.unwrap();
    // The start finished; the shutdown stopped that balancer too (it may have stopped it
    // before the start returned).
    assert!(
        reports.iter().any(|r| r.balancer == "late"),
        "{started:?} {reports:?}"
    );
    nothing_runs("late", &node_name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_still_under_way_when_shutdown_stops_waiting_fails_and_undoes_itself() {
    let node = Node::start(NodeConfig::new("too_late", "127.0.0.1:0").cookie("too_late"))
        .await
        .unwrap();
    let node_name = node.name().to_string();
    let release = Arc::new(Notify::new());
    let (start, shutdown) = start_then_shut_down(&node, "too_late", &release).await;
    // The shutdown waits for the start a while (5 s), then goes on without it.
    let reports = tokio::time::timeout(Duration::from_secs(20), shutdown)
        .await
        .expect("the shutdown ends")
        .unwrap();
    assert!(
        !reports.iter().any(|r| r.balancer == "too_late"),
        "{reports:?}"
    );
    release.notify_one();
    let started = start.await.unwrap();
    assert!(matches!(started, Err(Error::NodeNotRunning)), "{started:?}");
    nothing_runs("too_late", &node_name);
}
