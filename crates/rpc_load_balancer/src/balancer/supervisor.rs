//! The balancer's own actor, [`BalancerActor`]: the actor a user spawns (standalone, or
//! linked into a supervision tree with `Actor::spawn_linked`), whose end, however it comes,
//! ends the balancer on this node. It runs the balancer's algorithm children (LeastCpu's
//! Poller, those of [`BalancerConfig::child`]) and restarts them; the member actor that
//! serves routed calls is kept by node-owned machinery instead (see `keeper.rs`), so that
//! ractor killing this actor with its parent loses no call.
//!
//! ractor has supervision events but no restart strategies, so the policy is here: an
//! algorithm child is restarted alone, after a backoff that doubles with each of its restarts
//! within [`RESTART_WINDOW`], from 100 ms up to 5 s (so a crash loop restarts it at most about
//! 7 times per 10 s, and a child that ran quietly for a window restarts after 100 ms again);
//! its failures never touch the member and it is never given up on.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};

pub(crate) use super::keeper::RESTART_WINDOW;
use super::keeper::{self, KeeperMsg};
use super::shared::BalancerShared;
use super::{Balancer, BalancerConfig, Child};
use crate::node::shared::Lifecycle;
use crate::Error;

/// Messages of a balancer's actor ([`BalancerActor`]; see
/// [`Balancer::actor`](crate::Balancer::actor)).
#[derive(ractor_cluster::RactorMessage)]
pub enum SupervisorMsg {
    /// Start the member actor (the LoadBalancer) again if it is not running (after a failed
    /// restart attempt; the node's keeper restarts it by itself otherwise).
    RestartLoadBalancer,
    /// Internal, hidden from the docs: the actor's own timer message to start algorithm
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

/// A balancer on this node, as a ractor actor: spawn it with its [`BalancerConfig`] as the
/// argument, standalone (`Actor::spawn`) or under your supervisor (`Actor::spawn_linked`), on
/// a process whose node runs ([`Node::start`](crate::Node::start)). `pre_start` returns once
/// this node is selectable (if it is a member); then get a handle for calls with
/// [`Balancer::from_actor`] (or [`Balancer::lookup`] by the balancer's name).
///
/// ```
/// use ractor::Actor;
/// use rpc_load_balancer::{Balancer, BalancerActor, BalancerConfig, Node, NodeConfig};
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let node = Node::start(NodeConfig::new("actor_docs", "127.0.0.1:0").cookie("secret")).await?;
/// let (actor, _join) = Actor::spawn(None, BalancerActor, BalancerConfig::new("reports")).await?;
/// let reports = Balancer::from_actor(&actor)?;
/// assert_eq!(reports.members().len(), 1);
/// reports.stop().await; // or just stop the actor: the balancer drains all the same
/// node.shutdown().await;
/// # Ok(()) }
/// ```
///
/// Its end, however it comes — stopped, killed, failed, or its parent stopped or killed —
/// ends the balancer here, and the calls are not lost: node-owned machinery then drains it as
/// [`Balancer::stop`] does (its `post_stop` plays no part). Its parent gets ordinary ractor
/// supervision events: `ActorTerminated` when it stops (after a [`Balancer::stop`] too),
/// `ActorFailed` if it fails.
///
/// Startup errors ([`SpawnErr::StartupFailed`](ractor::SpawnErr::StartupFailed)) carry an
/// [`Error`] (downcast it): [`Error::NodeNotRunning`], [`Error::InvalidConfig`] naming the
/// option, [`Error::BalancerAlreadyStarted`], [`Error::Startup`]. A start under the name of a
/// balancer whose actor has ended but which still drains waits for that drain first.
#[derive(Debug, Clone, Copy, Default)]
pub struct BalancerActor;

/// A child as the balancer's actor runs it.
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

/// The state of a [`BalancerActor`].
pub struct BalancerActorState {
    shared: Arc<BalancerShared>,
    keeper: ActorRef<KeeperMsg>,
    children: Vec<Running>,
}

impl std::fmt::Debug for BalancerActorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalancerActorState")
            .field("balancer", &self.shared.name)
            .finish_non_exhaustive()
    }
}

/// Starts the balancer of `config` as the actor `myself`: checks the config, waits for a
/// predecessor under the name that still drains, claims the name, starts the member (through
/// the node's keeper) and the algorithm children, and registers the balancer on the node.
async fn start(
    myself: &ActorRef<SupervisorMsg>,
    config: BalancerConfig,
) -> Result<(Arc<BalancerShared>, ActorRef<KeeperMsg>, Vec<Running>), Error> {
    let node = crate::Node::current()
        .ok_or(Error::NodeNotRunning)?
        .shared();
    // A node shutting down takes no new balancer (the registry refuses the name too, should
    // the shutdown begin after this look).
    if *node.lifecycle.borrow() != Lifecycle::Running {
        return Err(Error::NodeNotRunning);
    }
    config.validate()?;
    let name = config.name.clone();
    // Builds the balancer's selector: bad algorithm options fail the start here.
    let shared = Arc::new(BalancerShared::new(config, Arc::clone(&node))?);
    loop {
        if let Some(previous) = node.balancers.draining(&name) {
            // Its actor has ended and it drains: its member still holds the name.
            previous.stop().await;
        }
        match node.balancers.reserve(&name) {
            Ok(()) => break,
            // Its actor ended between the look and the claim: wait for its drain too.
            Err(_) if node.balancers.draining(&name).is_some() => continue,
            Err(error) => return Err(error),
        }
    }
    // Freed again if the start fails or panics (a child's spawn is user code) before it
    // registers.
    let mut reservation = Reservation {
        node: Arc::clone(&node),
        name: name.clone(),
        children: Vec::new(),
        registered: false,
    };
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
            Ok(cell) => {
                reservation.children.push(cell.clone());
                Some(cell)
            }
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
    let keeper = match keeper::spawn(Arc::clone(&shared), myself.clone()).await {
        Ok(keeper) => keeper,
        Err(error) => {
            return Err(Error::Startup {
                reason: format!("balancer {name}: {error}"),
            });
        }
    };
    shared.set_keeper(keeper.clone());
    let registered = node
        .balancers
        .register(Balancer::from_parts(Arc::clone(&shared), myself.clone()));
    if let Err(error) = registered {
        // The node's shutdown stopped waiting for this start: undo it (the reservation's
        // drop stops the children and frees the name).
        shared.claim_end();
        shared.stop_keeper().await;
        return Err(error);
    }
    reservation.registered = true;
    keeper::watch_owner(Arc::clone(&shared), myself.clone());
    tracing::info!(balancer = %name, member = shared.member, "balancer started");
    Ok((shared, keeper, children))
}

/// A balancer's name reserved on its node by a start under way. Dropped before the start has
/// registered the balancer — it failed, or panicked (a child's spawn is user code) — it stops
/// the children started so far and frees the name, so a later start under it is not refused.
struct Reservation {
    node: Arc<crate::node::shared::NodeShared>,
    name: String,
    children: Vec<ActorCell>,
    registered: bool,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.registered {
            return;
        }
        for child in &self.children {
            child.stop(Some("balancer failed to start".into()));
        }
        self.node.balancers.release_reservation(&self.name);
    }
}

impl Actor for BalancerActor {
    type Msg = SupervisorMsg;
    type State = BalancerActorState;
    type Arguments = BalancerConfig;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        config: BalancerConfig,
    ) -> Result<BalancerActorState, ActorProcessingErr> {
        // On a task of its own: if this actor is killed while starting (which drops this
        // future), the start still finishes, and the watcher it sets up finds the actor gone
        // and drains; nothing is left reserved, in pg or running.
        let owner = myself.clone();
        let starting = tokio::spawn(async move {
            let started = start(&owner, config).await;
            if let Ok((_, _, children)) = &started {
                if owner.get_status() >= ractor::ActorStatus::Stopping {
                    for child in children.iter().filter_map(|c| c.cell.as_ref()) {
                        child.stop(Some("balancer stopped".into()));
                    }
                }
            }
            started
        });
        let (shared, keeper, children) = starting.await.map_err(|error| Error::Startup {
            reason: format!("balancer start: {error}"),
        })??;
        Ok(BalancerActorState {
            shared,
            keeper,
            children,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<SupervisorMsg>,
        state: &mut BalancerActorState,
    ) -> Result<(), ActorProcessingErr> {
        for child in &mut state.children {
            if let Some(cell) = child.cell.take() {
                super::child::stop_and_wait(&cell).await;
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisorMsg,
        state: &mut BalancerActorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::RestartLoadBalancer => {
                let _ = state.keeper.cast(KeeperMsg::RestartMember);
            }
            SupervisorMsg::RestartChild(index) => state.restart_child(&myself, index).await,
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        message: SupervisionEvent,
        state: &mut BalancerActorState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, why)) = super::child::ended(&message) else {
            return Ok(());
        };
        if state.shared.is_stopping() {
            return Ok(());
        }
        let id = cell.get_id();
        if let Some(index) = state
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

impl BalancerActorState {
    async fn restart_child(&mut self, myself: &ActorRef<SupervisorMsg>, index: usize) {
        let Some(child) = self.children.get_mut(index) else {
            return;
        };
        if child.cell.is_some() || self.shared.is_stopping() {
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
