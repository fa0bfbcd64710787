//! The GroupWatcher actor: keeps an actor group's members snapshot. It monitors the group's pg
//! scope and re-reads the group on every change of it, and on every peer that comes up (a
//! remote actor is a member once its node's session is known). For LeastCpu it supervises the
//! group's CPU Poller (restarted when it fails, as a balancer's supervisor does); for an
//! algorithm that reads load reports it runs the task that asks the members' nodes for them
//! ([`super::load`]).

use std::sync::Arc;

use ractor::pg::GroupChangeMessage;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::balancer::BalancerShared;
use crate::node::NodeEvent;

pub(crate) struct GroupWatcher;

/// A GroupWatcher's message: re-read the group.
#[derive(ractor_cluster::RactorMessage)]
pub(crate) enum WatcherMsg {
    Refresh,
}

/// The watcher's state: the group's balancer state and its node-events task.
pub(crate) struct Watching {
    shared: Arc<BalancerShared>,
    scope: String,
    group: String,
    /// Aborted when this state drops, as `reports` is.
    events: AbortOnDrop,
    /// The task asking the members' nodes for load reports, when the algorithm reads them
    /// (aborted when this state drops: also when the watcher is killed, which skips
    /// `post_stop`).
    reports: Option<AbortOnDrop>,
    /// The LeastCpu Poller, when the algorithm needs CPU readings.
    poller: Option<ractor::ActorCell>,
    /// A `Refresh` is in the mailbox: the group's pg changes since are read by it, so a burst
    /// of joins or leaves (an actor pool starting, a peer's actors synced) is read once, not
    /// once per actor.
    refresh_queued: bool,
}

/// A task aborted when this handle drops.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Watching {
    /// Starts the group's CPU Poller if its algorithm needs readings (`restart`: not the
    /// first, no startup jitter).
    async fn start_poller(&mut self, myself: &ActorRef<WatcherMsg>, restart: bool) {
        let Some(polling) = self.shared.needs.cpu else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        match crate::balancer::cpu_poller::spawn_for_group(
            shared,
            polling,
            restart,
            myself.get_cell(),
        )
        .await
        {
            Ok(cell) => self.poller = Some(cell),
            Err(error) => {
                tracing::warn!(group = %self.shared.name, %error, "the group's CPU poller failed to start");
            }
        }
    }
}

impl Actor for GroupWatcher {
    type Msg = WatcherMsg;
    type State = Watching;
    type Arguments = (
        Arc<BalancerShared>,
        String,
        String,
        Option<Arc<super::load::NodeCalls>>,
    );

    async fn pre_start(
        &self,
        myself: ActorRef<WatcherMsg>,
        (shared, scope, group, calls): Self::Arguments,
    ) -> Result<Watching, ActorProcessingErr> {
        ractor::pg::monitor_scope(scope.clone(), myself.get_cell());
        let mut events = shared.node.events.subscribe();
        let actor = myself.clone();
        let events = tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(NodeEvent::Up { .. })
                    | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if actor.cast(WatcherMsg::Refresh).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        });
        shared.refresh();
        // Members filtered by their nodes' labels: again when a peer's labels arrive.
        shared.watch_labels();
        let reports = match (shared.needs.reports, calls) {
            (Some(period), Some(calls)) => Some(AbortOnDrop(tokio::spawn(super::load::run(
                Arc::clone(&shared),
                calls,
                period,
            )))),
            _ => None,
        };
        let mut watching = Watching {
            shared,
            scope,
            group,
            events: AbortOnDrop(events),
            reports,
            poller: None,
            refresh_queued: false,
        };
        watching.start_poller(&myself, false).await;
        Ok(watching)
    }

    async fn post_stop(
        &self,
        myself: ActorRef<WatcherMsg>,
        state: &mut Watching,
    ) -> Result<(), ActorProcessingErr> {
        state.events.0.abort();
        state.reports = None;
        if let Some(poller) = state.poller.take() {
            poller.stop(None);
        }
        ractor::pg::demonitor_scope(state.scope.clone(), myself.get_id());
        state.shared.mark_stopping();
        state.shared.clear();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<WatcherMsg>,
        message: WatcherMsg,
        state: &mut Watching,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WatcherMsg::Refresh => {
                state.refresh_queued = false;
                state.shared.refresh();
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<WatcherMsg>,
        message: SupervisionEvent,
        state: &mut Watching,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, _)
        | SupervisionEvent::ActorTerminated(cell, _, _) = &message
        {
            let ours = state
                .poller
                .as_ref()
                .is_some_and(|p| p.get_id() == cell.get_id());
            if ours && !state.shared.is_stopping() {
                tracing::warn!(group = %state.shared.name, "the group's CPU poller ended; restarting it");
                state.poller = None;
                state.start_poller(&myself, true).await;
            }
            return Ok(());
        }
        if let SupervisionEvent::ProcessGroupChanged(change) = message {
            let ours = match &change {
                GroupChangeMessage::Join(scope, group, _)
                | GroupChangeMessage::Leave(scope, group, _) => {
                    *scope == state.scope && *group == state.group
                }
            };
            // Read once the burst of changes has been taken in (supervision events come
            // before messages): one `Refresh` queued at a time.
            if ours && !state.refresh_queued && myself.cast(WatcherMsg::Refresh).is_ok() {
                state.refresh_queued = true;
            }
        }
        Ok(())
    }
}
