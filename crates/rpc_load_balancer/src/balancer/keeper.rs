//! The member keeper: node-owned machinery that keeps a balancer's member actor (the
//! LoadBalancer, which is in the pg group and serves routed calls) and drains it when the
//! balancer's own actor ends.
//!
//! The balancer's actor ([`BalancerActor`](super::BalancerActor)) is the user's: it may be
//! linked to the user's supervisor, which ractor kills with its parent (a kill skips
//! `post_stop`). So the member is not its child: it is linked to this keeper, which is spawned
//! unlinked (no parent can take it down) and
//! * restarts the member at once when it stops unasked (crash or kill); a start that fails
//!   (its `pre_start` failed or panicked, say a selector's `members_changed` panics) is tried
//!   again after [`RETRY_FIRST`], doubled per failure in a row up to [`RETRY_MAX`]. Every
//!   attempt, failed or not, counts: more than [`MAX_RESTARTS`] attempts within
//!   [`RESTART_WINDOW`] end the balancer without a drain, as an OTP supervisor's intensity
//!   limit would (its actor is stopped, so its parent hears of it);
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
/// The delay before trying again to start a member whose start failed.
pub(crate) const RETRY_FIRST: Duration = Duration::from_millis(10);
/// The longest delay between two failed starts of a member (the delay doubles per failure in
/// a row up to it; [`MAX_RESTARTS`] failures in a row take about 3.3 s, within
/// [`RESTART_WINDOW`]).
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(1);

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
    /// Start attempts of the member (after the first), within the last [`RESTART_WINDOW`].
    restarts: VecDeque<Instant>,
    /// Failed starts of the member since it last started.
    failed_in_a_row: u32,
}

/// The delay before the next start attempt after `failed_in_a_row` (≥ 1) failed ones:
/// [`RETRY_FIRST`] doubled per earlier failure, at most [`RETRY_MAX`].
pub(crate) fn retry_delay(failed_in_a_row: u32) -> Duration {
    let doublings = failed_in_a_row.saturating_sub(1).min(16);
    (RETRY_FIRST * 2u32.pow(doublings)).min(RETRY_MAX)
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
            failed_in_a_row: 0,
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
        state.restart_member(&myself).await;
        Ok(())
    }
}

impl KeeperState {
    /// Starts the member again (unless it runs or the balancer stops), as one attempt toward
    /// the restart limit: past it, gives up on the balancer; if the start fails, tries again
    /// after [`retry_delay`].
    async fn restart_member(&mut self, myself: &ActorRef<KeeperMsg>) {
        if self.member.is_some() || self.shared.is_stopping() {
            return;
        }
        let now = Instant::now();
        self.restarts
            .retain(|at| now.duration_since(*at) < RESTART_WINDOW);
        if self.restarts.len() >= MAX_RESTARTS {
            self.give_up(myself);
            return;
        }
        self.restarts.push_back(now);
        match spawn_member(&self.shared, myself.get_cell()).await {
            Ok(actor) => {
                self.member = Some(actor);
                self.failed_in_a_row = 0;
            }
            Err(error) => {
                self.failed_in_a_row += 1;
                let delay = retry_delay(self.failed_in_a_row);
                tracing::warn!(
                    balancer = %self.shared.name,
                    %error,
                    failed_in_a_row = self.failed_in_a_row,
                    retry_in_ms = delay.as_millis() as u64,
                    "load balancer failed to start; retrying"
                );
                myself.send_after(delay, || KeeperMsg::RestartMember);
            }
        }
    }

    /// Past the restart limit: ends the balancer without a drain (nothing to drain through a
    /// member that keeps failing) and stops its actor (its parent hears of it) and this keeper.
    fn give_up(&mut self, myself: &ActorRef<KeeperMsg>) {
        tracing::error!(
            balancer = %self.shared.name,
            max_restarts = MAX_RESTARTS,
            window_s = RESTART_WINDOW.as_secs(),
            "too many restarts of the load balancer; stopping the balancer"
        );
        self.shared.end_without_drain();
        self.owner
            .stop(Some("load balancer restart limit reached".into()));
        myself.stop(Some("load balancer restart limit reached".into()));
    }
}
