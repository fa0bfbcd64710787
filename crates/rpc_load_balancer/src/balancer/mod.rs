//! Balancers: call a remote function on "some member of balancer X".
//!
//! A balancer is identified by its name. Started on many nodes, those instances form one
//! logical balancer: every node that runs it can select and call; every node that also matches
//! its `node_match_list` is a **member** (a target). Members are found through a `ractor::pg`
//! group (scope `rpc_load_balancer`, group = the balancer's name), kept as a sorted,
//! deduplicated snapshot that callers read without locks.
//!
//! Per balancer and node there are two sides. The balancer's own actor, a [`BalancerActor`],
//! is the user's: spawn it standalone or, the ractor way, linked into your supervision tree
//! (`Actor::spawn_linked(name, BalancerActor, config, supervisor)`), and get a handle for
//! calls from it ([`Balancer::from_actor`]) or by the balancer's name ([`Balancer::lookup`]);
//! [`Balancer::start`] and [`Balancer::spawn_linked`] do both in one step. The member actor,
//! the LoadBalancer, which joins the group, watches it and serves routed calls, is kept by
//! node-owned machinery, which drains it when the balancer's actor ends however it ends.
//!
//! ```
//! use rpc_load_balancer::{Balancer, BalancerConfig, FunctionError, Node, NodeConfig, RemoteFunction, RoundRobin};
//!
//! struct Hello;
//! impl RemoteFunction for Hello {
//!     const NAME: &'static str = "hello";
//!     type Args = ();
//!     type Reply = String;
//!     async fn call(&self, _: ()) -> Result<String, FunctionError> {
//!         Ok("hi".into())
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), rpc_load_balancer::Error> {
//! let node = Node::start(NodeConfig::new("docs", "127.0.0.1:0").cookie("secret")).await?;
//! node.register(Hello)?; // register before joining, so members never miss a function
//! let greeters = Balancer::start(BalancerConfig::new("greeters").algorithm(RoundRobin::new())).await?;
//! assert_eq!(greeters.members().nodes(), vec![node.name().to_string()]);
//! let reply = greeters.call::<Hello>(()).await?; // on some member: here, this node
//! assert_eq!(reply, "hi");
//! assert!(Balancer::lookup("greeters").is_ok());
//! greeters.stop().await;
//! node.shutdown().await;
//! # Ok(()) }
//! ```

pub(crate) mod admin;
pub(crate) mod call;
mod child;
mod choose;
mod config;
pub(crate) mod cpu_poller;
mod cpu_selection;
mod drain;
mod ejection_metrics;
pub(crate) mod forward;
mod in_flight;
mod keeper;
mod load_balancer;
mod members;
mod registered;
mod selection;
mod selection_metrics;
mod selection_release;
pub(crate) mod shared;
mod start;
mod subset;
pub(crate) mod supervisor;
#[cfg(test)]
mod tests;
#[cfg(feature = "tower")]
mod tower_service;

/// The least time a leaving member refuses calls (rather than dropping them) before its
/// actor stops, whatever `leave_grace` and the drain took.
const MIN_REFUSING: Duration = Duration::from_millis(250);

/// The longest a leaving member waits for every peer to drop it from its members.
const PEERS_SAW_LEAVE: Duration = Duration::from_secs(2);

/// How often [`Balancer::stop`] checks whether the counts reached zero.
const DRAIN_POLL: Duration = Duration::from_millis(10);

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::watch;

pub use call::{BalancedCall, BalancedCast, ForwardOutcome, ForwardedReply};
pub use child::{Child, SpawnChild};
pub use config::{BalancerConfig, DEFAULT_DRAIN_TIMEOUT, DEFAULT_LEAVE_GRACE};
pub use drain::{DrainOutcome, DrainReport};
pub use members::{Member, Members};
pub use selection::SelectionGuard;
pub use supervisor::{BalancerActor, BalancerActorState, SupervisorMsg};
#[cfg(feature = "tower")]
pub use tower_service::{FunctionFuture, FunctionService};

pub(crate) use members::member_name;
pub(crate) use registered::BalancerLookup;
pub(crate) use selection::Selection;
pub(crate) use selection_release::Releaser;
pub(crate) use shared::BalancerShared;

use crate::Error;

/// A handle to a balancer started on this node, for calls: cheap to clone. Get one from the
/// balancer's actor ([`Balancer::from_actor`]), by name ([`Balancer::lookup`]), or from
/// [`Balancer::start`] and [`Balancer::spawn_linked`].
///
/// # Restarts: a handle follows its name
///
/// A handle stands for the balancer of its name on this node. While the balancer it was
/// started with (or looked up as) runs, it is that one. Once that balancer's actors have
/// ended — stopped with [`Balancer::stop`], stopped or killed otherwise (`actor().kill()`, or
/// with its parent), or given up after too many restarts — and a new balancer has
/// been started under the same name on this node (by your supervisor, say), every operation of
/// the old handle goes to the new one: calls, casts and selections route on its live members
/// and count in its in-flight total (so its [`stop`](Balancer::stop) drains them), and
/// [`members`](Balancer::members), [`is_running`](Balancer::is_running),
/// [`in_flight`](Balancer::in_flight) and [`stop`](Balancer::stop) report on it. Until one is
/// started, the old handle's calls fail with [`Error::UnknownBalancer`], as
/// [`Balancer::lookup`] does. Only [`actor`](Balancer::actor) stays the handle's own
/// actor (to match supervision events against). Following costs the call path nothing while
/// the handle's own balancer runs (one atomic read of its actor's status).
///
/// A balancer whose actor was stopped or killed without [`Balancer::stop`] drains all the
/// same: node-owned machinery leaves the group at once, lets the calls this node routed and
/// serves finish, and only then stops the member actor and frees the name (a start under the
/// name waits for that; `stop()` on a handle returns the drain's report). Only a balancer
/// that gave up after too many restarts of its member actor does not drain.
#[derive(Clone)]
pub struct Balancer {
    shared: Arc<BalancerShared>,
    supervisor: ActorRef<SupervisorMsg>,
}

impl std::fmt::Debug for Balancer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Balancer")
            .field("name", &self.shared.name)
            .field("algorithm", &self.shared.config.algorithm.name())
            .field("member", &self.shared.member)
            .finish()
    }
}

impl Balancer {
    /// The balancer's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The name of the balancer's selection algorithm (of the balancer this handle stands for
    /// now: see [Restarts](Balancer#restarts-a-handle-follows-its-name)).
    pub fn algorithm_name(&self) -> &'static str {
        self.current().shared.config.algorithm.name()
    }

    /// What outlier ejection did on this node so far (members ejected and suspected, in all
    /// and now), or `None` when the balancer has it off (see
    /// [`BalancerConfig::outlier_ejection`]). Counts this node's view only: each node's
    /// balancer judges members by its own calls.
    pub fn ejection_stats(&self) -> Option<crate::routing::EjectionStats> {
        let current = self.current();
        current.shared.ejection.as_ref().map(|e| e.stats())
    }

    /// Whether this node is a member (matches `node_match_list`).
    pub fn is_member(&self) -> bool {
        self.current().shared.member
    }

    /// The actor of the balancer this handle was started with (or looked up as), a
    /// [`BalancerActor`], for linking and monitoring. Unlike the other methods it does not follow a restart:
    /// [`Balancer::lookup`] gives a handle whose actor is the running balancer's.
    pub fn actor(&self) -> &ActorRef<SupervisorMsg> {
        &self.supervisor
    }

    /// Whether the balancer this handle stands for runs: its own (its actors still run,
    /// draining included), or one started under its name on this node since.
    pub fn is_running(&self) -> bool {
        self.current().is_own_running()
    }

    /// Whether this handle's own balancer's actors still run (draining included).
    #[inline]
    pub(crate) fn is_own_running(&self) -> bool {
        matches!(
            self.supervisor.get_status(),
            ractor::ActorStatus::Running | ractor::ActorStatus::Starting
        )
    }

    /// The balancer this handle stands for now: itself while its actors run, else the one
    /// started under its name on this node since, if one runs, else itself (stopped: its
    /// operations fail with [`Error::UnknownBalancer`]).
    #[inline]
    pub(crate) fn current(&self) -> Current<'_> {
        if self.is_own_running() {
            return Current::Own(self);
        }
        self.successor()
            .map_or(Current::Own(self), Current::Followed)
    }

    /// The state of the balancer this handle stands for now (see [`Balancer::current`]).
    #[inline]
    pub(crate) fn current_shared(&self) -> Arc<BalancerShared> {
        Arc::clone(&self.current().shared)
    }

    /// Once this handle's own actors have ended: the balancer running under its name on this
    /// node, if any — the one found last time while it runs (no lock), else looked up again.
    #[cold]
    fn successor(&self) -> Option<Arc<Balancer>> {
        let shared = &self.shared;
        // A balancer whose actor has ended routes nothing (it drains, on the keeper's task).
        shared.mark_stopping();
        if let Some(found) = shared.successor.load().as_ref() {
            if found.is_own_running() {
                return Some(Arc::clone(found));
            }
        }
        let found = shared
            .node
            .balancers
            .get(&shared.name)
            .ok()
            .filter(|b| !Arc::ptr_eq(&b.shared, shared))
            .map(Arc::new);
        shared.successor.store(found.clone());
        found
    }

    /// The current members (sorted by node name, one per node).
    pub fn members(&self) -> Arc<Members> {
        self.current().shared.members()
    }

    /// Selections of this balancer in flight on this node: routed calls and casts not yet
    /// finished plus live [`SelectionGuard`]s (all algorithms; per member see
    /// [`Member::in_flight`]).
    pub fn in_flight(&self) -> usize {
        self.current().shared.in_flight.get()
    }

    /// A watch of the members snapshot: changes on every join and leave. It watches the
    /// balancer this handle stands for when it is called (see
    /// [Restarts](Balancer#restarts-a-handle-follows-its-name)): after a restart, take a new
    /// watch. To an actor as messages: [`Balancer::forward_members_to`].
    pub fn watch_members(&self) -> watch::Receiver<Arc<Members>> {
        self.current().shared.watch()
    }

    /// Waits until the balancer has at least `count` members, at most `timeout`, and returns
    /// that snapshot (at once if there are already enough). Useful on a caller that has just
    /// joined: members appear as sessions to them come up.
    ///
    /// Errors: [`Error::NoMembers`] if fewer are there at the deadline; [`Error::UnknownBalancer`]
    /// if the balancer is stopped.
    pub async fn wait_for_members(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<Arc<Members>, Error> {
        self.current().shared.wait_for_members(count, timeout).await
    }

    /// Calls of this balancer this node is serving as a member now (routed to it by any node,
    /// itself included). [`Balancer::stop`] waits for them.
    pub fn served(&self) -> usize {
        self.current().shared.served.get()
    }

    /// Counts work (e.g. a random-node call tracked by this balancer) in this handle's own
    /// balancer's in-flight total, which [`Balancer::stop`] drains, until the token drops
    /// (owned, so it can move into a run on this node; for handles fresh from the node's
    /// registry).
    pub(crate) fn track(&self) -> in_flight::OwnedInFlightToken {
        in_flight::OwnedInFlightToken::new(&self.shared)
    }

    /// This handle's own balancer's state (for handles fresh from the node's registry; callers
    /// that may hold an older handle use [`Balancer::current_shared`]).
    pub(crate) fn shared(&self) -> &Arc<BalancerShared> {
        &self.shared
    }
}

/// The balancer a handle stands for now (see [`Balancer::current`]).
pub(crate) enum Current<'a> {
    /// The handle's own.
    Own(&'a Balancer),
    /// One started under its name since its own ended.
    Followed(Arc<Balancer>),
}

impl std::ops::Deref for Current<'_> {
    type Target = Balancer;

    #[inline]
    fn deref(&self) -> &Balancer {
        match self {
            Current::Own(own) => own,
            Current::Followed(successor) => successor,
        }
    }
}
