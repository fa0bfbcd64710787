//! The BalancerSupervisor actor: runs a balancer's LoadBalancer and its children (LeastCpu's
//! Poller, those of [`BalancerConfig::child`](super::BalancerConfig::child)), and restarts
//! them.
//!
//! ractor has supervision events but no restart strategies, so the policy is here:
//! * the LoadBalancer is restarted at once when it stops without being asked to (crash or
//!   kill); more than [`MAX_RESTARTS`] restarts within [`RESTART_WINDOW`] stop the balancer,
//!   as an OTP supervisor's intensity limit would;
//! * an algorithm child is restarted alone, after a backoff that doubles with each of its
//!   restarts within [`RESTART_WINDOW`], from 100 ms up to 5 s (so a crash loop restarts
//!   it at most about 7 times per 10 s, and a child that ran quietly for a window restarts
//!   after 100 ms again); its failures never touch the LoadBalancer and it is never given up on.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::load_balancer::LoadBalancer;
use super::members::member_name;
use super::shared::BalancerShared;
use super::Child;
use crate::wire::RpcMessage;

/// Restarts of the LoadBalancer allowed within [`RESTART_WINDOW`].
pub(crate) const MAX_RESTARTS: usize = 10;
/// The window of [`MAX_RESTARTS`].
pub(crate) const RESTART_WINDOW: Duration = Duration::from_secs(10);

/// Messages of a balancer's supervisor actor (see [`Balancer::actor`](crate::Balancer::actor)).
#[derive(ractor_cluster::RactorMessage)]
pub enum SupervisorMsg {
    /// Start the LoadBalancer again (after a failed restart attempt).
    RestartLoadBalancer,
    /// Internal, hidden from the docs: the supervisor's own timer message to start algorithm
    /// child `index` again after its backoff. Sent from outside it does nothing while the
    /// child runs, and would skip the backoff otherwise; don't send it.
    #[doc(hidden)]
    RestartChild(usize),
}

impl std::fmt::Debug for SupervisorMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RestartLoadBalancer => f.write_str("RestartLoadBalancer"),
            Self::RestartChild(i) => write!(f, "RestartChild({i})"),
        }
    }
}

pub(crate) struct BalancerSupervisor;

/// A child as the supervisor runs it.
struct Running {
    spec: Child,
    cell: Option<ActorCell>,
    /// When it was restarted, within the last [`RESTART_WINDOW`].
    restarts: VecDeque<Instant>,
}

impl Running {
    /// The delay before the next restart: 100 ms doubled per restart in the window, ≤ 5 s.
    fn next_backoff(&mut self) -> Duration {
        backoff(&mut self.restarts, Instant::now())
    }
}

/// Records a restart at `now` in `restarts` (forgetting those older than [`RESTART_WINDOW`])
/// and returns the delay before it: [`CHILD_BACKOFF_FIRST`] doubled per earlier restart still
/// in the window, at most [`CHILD_BACKOFF_MAX`].
fn backoff(restarts: &mut VecDeque<Instant>, now: Instant) -> Duration {
    restarts.retain(|at| now.saturating_duration_since(*at) < RESTART_WINDOW);
    restarts.push_back(now);
    let doublings = (restarts.len() - 1).min(6) as u32;
    (CHILD_BACKOFF_FIRST * 2u32.pow(doublings)).min(CHILD_BACKOFF_MAX)
}

/// An algorithm child's first restart delay in a [`RESTART_WINDOW`].
pub(crate) const CHILD_BACKOFF_FIRST: Duration = Duration::from_millis(100);
/// The longest delay before an algorithm child's restart.
pub(crate) const CHILD_BACKOFF_MAX: Duration = Duration::from_secs(5);

pub(crate) struct SupervisorState {
    shared: Arc<BalancerShared>,
    load_balancer: Option<ActorRef<RpcMessage>>,
    restarts: VecDeque<Instant>,
    children: Vec<Running>,
}

/// Spawns the LoadBalancer under `supervisor`. Its name may still be held for a moment by a
/// predecessor that is being killed (a crash, or a balancer of the same name stopped by its
/// parent), so a taken name is retried for up to 500 ms.
async fn spawn_load_balancer(
    shared: &Arc<BalancerShared>,
    supervisor: ActorCell,
) -> Result<ActorRef<RpcMessage>, ractor::SpawnErr> {
    let name = member_name(&shared.name, &shared.node.name);
    let mut attempts = 0;
    loop {
        let spawned = Actor::spawn_linked(
            Some(name.clone()),
            LoadBalancer,
            Arc::clone(shared),
            supervisor.clone(),
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

impl Actor for BalancerSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<BalancerShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        shared: Arc<BalancerShared>,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let mut children = Vec::new();
        // The algorithm's load source first (LeastCpu's Poller), then the configured ones.
        let poller = shared
            .needs
            .cpu
            .map(|polling| super::cpu_poller::child(&shared.name, polling));
        let specs = poller
            .into_iter()
            .chain(shared.config.children.iter().cloned());
        for (index, spec) in specs.enumerate() {
            let cell = match (spec.spawn)(myself.get_cell()).await {
                Ok(cell) => Some(cell),
                Err(error) => {
                    tracing::warn!(balancer = %shared.name, child = %spec.name, %error, "algorithm child failed to start");
                    myself.send_after(Duration::from_millis(100), move || {
                        SupervisorMsg::RestartChild(index)
                    });
                    None
                }
            };
            children.push(Running {
                spec,
                cell,
                restarts: VecDeque::new(),
            });
        }
        let load_balancer = spawn_load_balancer(&shared, myself.get_cell()).await?;
        Ok(SupervisorState {
            shared,
            load_balancer: Some(load_balancer),
            restarts: VecDeque::new(),
            children,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // Stop the member first and wait for it: when `Balancer::stop` returns, this node has
        // left the group and the member's name is free for a new start.
        if let Some(load_balancer) = state.load_balancer.take() {
            let _ = load_balancer
                .stop_and_wait(
                    Some("balancer stopped".into()),
                    Some(Duration::from_secs(5)),
                )
                .await;
        }
        for child in &mut state.children {
            if let Some(cell) = child.cell.take() {
                let _ = cell
                    .stop_and_wait(
                        Some("balancer stopped".into()),
                        Some(Duration::from_secs(5)),
                    )
                    .await;
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::RestartLoadBalancer => state.restart_load_balancer(&myself).await,
            SupervisorMsg::RestartChild(index) => state.restart_child(&myself, index).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match &message {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.clone().unwrap_or_default())
            }
            SupervisionEvent::ActorFailed(cell, error) => (cell, error.to_string()),
            _ => return Ok(()),
        };
        if state
            .shared
            .stopping
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Ok(());
        }
        let id = cell.get_id();
        if state
            .load_balancer
            .as_ref()
            .is_some_and(|lb| lb.get_id() == id)
        {
            tracing::warn!(balancer = %state.shared.name, reason = %why, "load balancer stopped; restarting");
            state.load_balancer = None;
            let now = Instant::now();
            state
                .restarts
                .retain(|at| now.duration_since(*at) < RESTART_WINDOW);
            if state.restarts.len() >= MAX_RESTARTS {
                tracing::error!(balancer = %state.shared.name, "too many restarts; stopping the balancer");
                myself.stop(Some("load balancer restart limit reached".into()));
                return Ok(());
            }
            state.restarts.push_back(now);
            state.restart_load_balancer(&myself).await;
        } else if let Some(index) = state
            .children
            .iter()
            .position(|c| c.cell.as_ref().is_some_and(|c| c.get_id() == id))
        {
            let child = &mut state.children[index];
            tracing::warn!(balancer = %state.shared.name, child = %child.spec.name, reason = %why, "algorithm child stopped; restarting after backoff");
            child.cell = None;
            let delay = child.next_backoff();
            myself.send_after(delay, move || SupervisorMsg::RestartChild(index));
        }
        Ok(())
    }
}

/// The supervisor's state is dropped however it ends — also when it is killed, which skips
/// `post_stop`: the balancer's shared state learns then that its actors are gone (unless a
/// stop is under way, which reports itself).
impl Drop for SupervisorState {
    fn drop(&mut self) {
        self.shared.end_without_drain();
    }
}

impl SupervisorState {
    async fn restart_load_balancer(&mut self, myself: &ActorRef<SupervisorMsg>) {
        if self.load_balancer.is_some() {
            return;
        }
        match spawn_load_balancer(&self.shared, myself.get_cell()).await {
            Ok(actor) => self.load_balancer = Some(actor),
            Err(error) => {
                // The old actor's name may not be free yet: try again shortly.
                tracing::debug!(balancer = %self.shared.name, %error, "load balancer restart failed; retrying");
                myself.send_after(Duration::from_millis(10), || {
                    SupervisorMsg::RestartLoadBalancer
                });
            }
        }
    }

    async fn restart_child(&mut self, myself: &ActorRef<SupervisorMsg>, index: usize) {
        let Some(child) = self.children.get_mut(index) else {
            return;
        };
        if child.cell.is_some()
            || self
                .shared
                .stopping
                .load(std::sync::atomic::Ordering::Acquire)
        {
            return;
        }
        match (child.spec.spawn)(myself.get_cell()).await {
            Ok(cell) => child.cell = Some(cell),
            Err(error) => {
                tracing::warn!(balancer = %self.shared.name, child = %child.spec.name, %error, "algorithm child restart failed");
                let delay = child.next_backoff();
                myself.send_after(delay, move || SupervisorMsg::RestartChild(index));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_backs_off_doubling_to_a_cap_and_starts_over_after_a_quiet_window() {
        let ms = |ms: u64| Duration::from_millis(ms);
        let mut restarts = VecDeque::new();
        // A crash loop: each restart 10 ms after the previous delay ran out.
        let mut at = Instant::now();
        let mut delays = Vec::new();
        for _ in 0..7 {
            let delay = backoff(&mut restarts, at);
            delays.push(delay);
            at += delay + ms(10);
        }
        let seventh = at - delays[6] - ms(10);
        let after_seven = restarts.clone();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1_600, 3_200, 5_000].map(ms),
            "doubling from 100 ms, capped at 5 s"
        );
        // So a crash loop restarts it 7 times in its first 11.4 s, not every few ms.
        assert_eq!(delays.iter().sum::<Duration>(), ms(11_300));
        // More restarts within the window stay at the cap.
        assert_eq!(backoff(&mut restarts, seventh), ms(5_000));
        assert_eq!(backoff(&mut restarts, seventh + ms(1)), ms(5_000));
        // Restarts older than the window are forgotten: those of the first 1.5 s are gone
        // 11.4 s in (4 left: 800 ms), and after a quiet window it is 100 ms again.
        let mut aged = after_seven;
        assert_eq!(backoff(&mut aged, at), ms(800));
        let quiet = seventh + ms(1) + RESTART_WINDOW;
        assert_eq!(backoff(&mut restarts, quiet), ms(100));
        assert_eq!(restarts.len(), 1);
    }
}
