//! The member keeper: node-owned machinery that keeps a balancer's member actor (the
//! LoadBalancer, which is in the pg group and serves routed calls) and drains it when the
//! balancer's own actor ends.
//!
//! The balancer's actor ([`BalancerActor`](super::BalancerActor)) is the user's: it may be
//! linked to the user's supervisor, which ractor kills with its parent (a kill skips
//! `post_stop`). So the member is not its child: it is linked to this keeper, which is spawned
//! unlinked (no parent can take it down) and
//! * restarts the member at once when it stops unasked (crash or kill); more than
//!   [`MAX_RESTARTS`] restarts within [`RESTART_WINDOW`] end the balancer without a drain, as an
//!   OTP supervisor's intensity limit would (its actor is stopped, so its parent hears of it);
//! * watches the balancer's actor: when it ends, however (stopped, killed, failed, its parent
//!   stopped or killed), it drains as [`Balancer::stop`](super::Balancer::stop) does: it leaves
//!   the group at once, serves the calls peers selected before they saw the leave (refusing
//!   later ones, so their callers send them elsewhere), waits for the calls this node routed
//!   and serves, and only then stops the member and frees the name.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::load_balancer::LoadBalancer;
use super::members::member_name;
use super::shared::BalancerShared;
use super::{Balancer, SupervisorMsg};
use crate::wire::RpcMessage;

/// Restarts of the member actor allowed within [`RESTART_WINDOW`].
pub(crate) const MAX_RESTARTS: usize = 10;
/// The window of [`MAX_RESTARTS`].
pub(crate) const RESTART_WINDOW: Duration = Duration::from_secs(10);

/// Messages of the keeper.
#[derive(ractor_cluster::RactorMessage)]
pub(crate) enum KeeperMsg {
    /// Start the member again (after a failed restart attempt).
    RestartMember,
}

pub(crate) struct MemberKeeper;

pub(crate) struct KeeperState {
    shared: Arc<BalancerShared>,
    /// The balancer's own actor (stopped when the member restarts too often).
    owner: ActorRef<SupervisorMsg>,
    member: Option<ActorRef<RpcMessage>>,
    restarts: VecDeque<Instant>,
}

/// Spawns the member (the LoadBalancer) under `keeper`. Its name may still be held for a
/// moment by a predecessor that is being killed (a crash), so a taken name is retried for up
/// to 500 ms.
async fn spawn_member(
    shared: &Arc<BalancerShared>,
    keeper: ActorCell,
) -> Result<ActorRef<RpcMessage>, ractor::SpawnErr> {
    let name = member_name(&shared.name, &shared.node.name);
    let mut attempts = 0;
    loop {
        let spawned = Actor::spawn_linked(
            Some(name.clone()),
            LoadBalancer,
            Arc::clone(shared),
            keeper.clone(),
        )
        .await;
        match spawned {
            Ok((actor, _)) => return Ok(actor),
            Err(_) if attempts < 50 && ractor::registry::where_is(name.clone()).is_some() => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

/// Spawns the keeper of the balancer whose state is `shared` and whose own actor is `owner`
/// (unlinked: node-owned), which starts the member; returns once the member has joined.
pub(crate) async fn spawn(
    shared: Arc<BalancerShared>,
    owner: ActorRef<SupervisorMsg>,
) -> Result<ActorRef<KeeperMsg>, ractor::SpawnErr> {
    let (keeper, _) = Actor::spawn(None, MemberKeeper, (shared, owner)).await?;
    Ok(keeper)
}

/// Watches `owner` (the balancer's own actor): when it ends, however, the balancer drains
/// (unless a stop or an end without drain has been claimed already).
pub(crate) fn watch_owner(shared: Arc<BalancerShared>, owner: ActorRef<SupervisorMsg>) {
    tokio::spawn(async move {
        let _ = owner.get_cell().wait(None).await;
        let balancer = Balancer::from_parts(shared, owner);
        if balancer.shared().claim_end() {
            tracing::info!(balancer = %balancer.name(), "balancer actor ended; draining");
            balancer.drain_and_stop().await;
        }
    });
}

impl Actor for MemberKeeper {
    type Msg = KeeperMsg;
    type State = KeeperState;
    type Arguments = (Arc<BalancerShared>, ActorRef<SupervisorMsg>);

    async fn pre_start(
        &self,
        myself: ActorRef<KeeperMsg>,
        (shared, owner): (Arc<BalancerShared>, ActorRef<SupervisorMsg>),
    ) -> Result<KeeperState, ActorProcessingErr> {
        let member = spawn_member(&shared, myself.get_cell()).await?;
        Ok(KeeperState {
            shared,
            owner,
            member: Some(member),
            restarts: VecDeque::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<KeeperMsg>,
        state: &mut KeeperState,
    ) -> Result<(), ActorProcessingErr> {
        // Wait for the member: when a stop returns, this node has left the group and the
        // member's name is free for a new start.
        if let Some(member) = state.member.take() {
            super::child::stop_and_wait(&member.get_cell()).await;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<KeeperMsg>,
        message: KeeperMsg,
        state: &mut KeeperState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            KeeperMsg::RestartMember => state.restart_member(&myself).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<KeeperMsg>,
        message: SupervisionEvent,
        state: &mut KeeperState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, why)) = super::child::ended(&message) else {
            return Ok(());
        };
        let ours = state
            .member
            .as_ref()
            .is_some_and(|member| member.get_id() == cell.get_id());
        if !ours {
            return Ok(());
        }
        state.member = None;
        if state.shared.is_stopping() {
            // Stopping or draining: a member that ends now is not started again.
            return Ok(());
        }
        tracing::warn!(balancer = %state.shared.name, reason = %why, "load balancer stopped; restarting");
        let now = Instant::now();
        state
            .restarts
            .retain(|at| now.duration_since(*at) < RESTART_WINDOW);
        if state.restarts.len() >= MAX_RESTARTS {
            tracing::error!(balancer = %state.shared.name, "too many restarts; stopping the balancer");
            // Nothing to drain through a member that keeps failing.
            state.shared.end_without_drain();
            state
                .owner
                .stop(Some("load balancer restart limit reached".into()));
            myself.stop(Some("load balancer restart limit reached".into()));
            return Ok(());
        }
        state.restarts.push_back(now);
        state.restart_member(&myself).await;
        Ok(())
    }
}

impl KeeperState {
    async fn restart_member(&mut self, myself: &ActorRef<KeeperMsg>) {
        if self.member.is_some() || self.shared.is_stopping() {
            return;
        }
        match spawn_member(&self.shared, myself.get_cell()).await {
            Ok(actor) => self.member = Some(actor),
            Err(error) => {
                // The old actor's name may not be free yet: try again shortly.
                tracing::debug!(balancer = %self.shared.name, %error, "load balancer restart failed; retrying");
                myself.send_after(Duration::from_millis(10), || KeeperMsg::RestartMember);
            }
        }
    }
}
