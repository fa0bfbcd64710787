//! Balancers: call a remote function on "some member of balancer X".
//!
//! A balancer is identified by its name. Started on many nodes, those instances form one
//! logical balancer: every node that runs it can select and call; every node that also matches
//! its `node_match_list` is a **member** (a target). Members are found through a `ractor::pg`
//! group (scope `rpc_load_balancer`, group = the balancer's name), kept as a sorted,
//! deduplicated snapshot that callers read without locks.
//!
//! Per balancer and node there are two actors: a BalancerSupervisor and, under
//! it, the LoadBalancer, which joins the group, watches it and serves routed calls. Start one
//! with [`Balancer::start`] or, inside a supervision tree, [`Balancer::spawn_linked`].
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
mod config;
pub(crate) mod cpu_poller;
mod cpu_selection;
mod drain;
mod in_flight;
mod load_balancer;
mod members;
mod registered;
mod selection;
mod selection_metrics;
mod shared;
pub(crate) mod supervisor;
#[cfg(test)]
mod tests;

/// The least time a leaving member refuses calls (rather than dropping them) before its
/// actor stops, whatever `leave_grace` and the drain took.
const MIN_REFUSING: Duration = Duration::from_millis(250);

/// The longest a leaving member waits for every peer to drop it from its members.
const PEERS_SAW_LEAVE: Duration = Duration::from_secs(2);

/// How often [`Balancer::stop`] checks whether the counts reached zero.
const DRAIN_POLL: Duration = Duration::from_millis(10);

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef};
use tokio::sync::watch;

pub use call::{BalancedCall, BalancedCast};
pub use child::{Child, SpawnChild};
pub use config::{BalancerConfig, DEFAULT_DRAIN_TIMEOUT, DEFAULT_LEAVE_GRACE};
pub use drain::{DrainOutcome, DrainReport};
pub use members::{Member, Members};
pub use selection::SelectionGuard;
pub use supervisor::SupervisorMsg;

pub(crate) use members::member_name;
pub(crate) use registered::BalancerLookup;
pub(crate) use selection::Selection;
pub(crate) use shared::BalancerShared;
use supervisor::BalancerSupervisor;

use crate::function::RemoteFunction;
use crate::node::shared::NodeShared;
use crate::routing::Request;
use crate::{Error, Node};

/// A handle to a balancer started on this node. Cheap to clone.
///
/// # Restarts: a handle follows its name
///
/// A handle stands for the balancer of its name on this node. While the balancer it was
/// started with (or looked up as) runs, it is that one. Once that balancer's actors have
/// ended — stopped with [`Balancer::stop`], killed (`actor().kill()`, or with a parent that
/// stopped without stopping it), or given up after too many restarts — and a new balancer has
/// been started under the same name on this node (by your supervisor, say), every operation of
/// the old handle goes to the new one: calls, casts and selections route on its live members
/// and count in its in-flight total (so its [`stop`](Balancer::stop) drains them), and
/// [`members`](Balancer::members), [`is_running`](Balancer::is_running),
/// [`in_flight`](Balancer::in_flight) and [`stop`](Balancer::stop) report on it. Until one is
/// started, the old handle's calls fail with [`Error::UnknownBalancer`], as
/// [`Balancer::lookup`] does. Only [`actor`](Balancer::actor) stays the handle's own
/// supervisor actor (to match supervision events against). Following costs the call path
/// nothing while the handle's own balancer runs (one atomic read of its actor's status).
///
/// A killed balancer does not drain: calls it had routed or was serving when it was killed are
/// not waited for by anyone. Its members' snapshot is dropped, its pg membership ends with its
/// actors (peers stop selecting it within milliseconds), and its name is freed on the node.
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
    /// Starts the balancer on this process's node (see [`Node::current`]), standalone.
    /// Returns once this node is selectable (if it is a member).
    ///
    /// Errors: [`Error::NodeNotRunning`]; [`Error::InvalidConfig`] naming the option;
    /// [`Error::BalancerAlreadyStarted`]; [`Error::Startup`] if its actors cannot start.
    pub async fn start(config: BalancerConfig) -> Result<Balancer, Error> {
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        Self::start_on(node.shared(), config, None).await
    }

    /// Starts the balancer linked to `supervisor` (an actor of the app's supervision tree),
    /// which receives its supervisor's supervision events. Stopping that parent kills the
    /// balancer without draining: call [`Balancer::stop`] from the parent's `post_stop` to stop
    /// it gracefully. The other way round, the parent gets a `SupervisionEvent::ActorTerminated`
    /// when the balancer stops — also after a deliberate [`Balancer::stop`] — and ractor's
    /// default `handle_supervisor_evt` stops the parent then: override it in the parent to
    /// keep running.
    ///
    /// Errors: as [`Balancer::start`].
    pub async fn spawn_linked(
        config: BalancerConfig,
        supervisor: ActorCell,
    ) -> Result<Balancer, Error> {
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        Self::start_on(node.shared(), config, Some(supervisor)).await
    }

    pub(crate) async fn start_on(
        node: Arc<NodeShared>,
        config: BalancerConfig,
        parent: Option<ActorCell>,
    ) -> Result<Balancer, Error> {
        config.validate()?;
        let name = config.name.clone();
        // Builds the balancer's selector: bad algorithm options fail the start here.
        let shared = Arc::new(BalancerShared::new(config, Arc::clone(&node))?);
        node.balancers.reserve(&name)?;
        let actor_name = Some(format!("rpc_load_balancer/@balancer/{name}"));
        let spawned = match parent {
            Some(parent) => {
                Actor::spawn_linked(actor_name, BalancerSupervisor, Arc::clone(&shared), parent)
                    .await
            }
            None => Actor::spawn(actor_name, BalancerSupervisor, Arc::clone(&shared)).await,
        };
        match spawned {
            Ok((supervisor, _)) => {
                let balancer = Balancer { shared, supervisor };
                node.balancers.register(balancer.clone());
                tracing::info!(balancer = %name, member = balancer.shared.member, "balancer started");
                Ok(balancer)
            }
            Err(error) => {
                node.balancers.release_reservation(&name);
                Err(Error::Startup {
                    reason: format!("balancer {name}: {error}"),
                })
            }
        }
    }

    /// The balancer started on this node under `name`.
    ///
    /// Errors: [`Error::NodeNotRunning`]; [`Error::UnknownBalancer`] if none runs here.
    pub fn lookup(name: &str) -> Result<Balancer, Error> {
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        node.shared().balancers.get(name)
    }

    /// The balancer's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The name of the balancer's selection algorithm (of the balancer this handle stands for
    /// now: see [Restarts](Balancer#restarts-a-handle-follows-its-name)).
    pub fn algorithm_name(&self) -> &'static str {
        self.current().shared.config.algorithm.name()
    }

    /// Whether this node is a member (matches `node_match_list`).
    pub fn is_member(&self) -> bool {
        self.current().shared.member
    }

    /// The supervisor actor of the balancer this handle was started with (or looked up as),
    /// for linking and monitoring. Unlike the other methods it does not follow a restart:
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
        // A dead balancer routes nothing (a kill skips every cleanup: do it now).
        shared.end_without_drain();
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
    /// watch.
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
        let current = self.current();
        let shared = &current.shared;
        shared.check_running()?;
        let mut members = shared.watch();
        let reached = tokio::time::timeout(
            timeout,
            members.wait_for(|m| m.len() >= count || shared.stopping.load(Ordering::Acquire)),
        )
        .await;
        shared.check_running()?;
        match reached {
            Ok(Ok(members)) => Ok(Arc::clone(&members)),
            _ => Err(Error::NoMembers {
                balancer: shared.name.clone(),
            }),
        }
    }

    /// Selects a member without calling it (the original's `select_node`), optionally for a
    /// routing `key`. The returned guard releases the selection when dropped (counting
    /// algorithms count the member busy until then). It is owned (`Send + 'static`): it may
    /// move into a spawned task and outlive this handle.
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`] (no retry: it
    /// fails at once); the algorithm's own errors (e.g. [`Error::NoEligibleMembers`]);
    /// [`Error::InvalidConfig`] (`algorithm`) when a custom algorithm returns an index out of
    /// range.
    pub fn select_node(&self, key: Option<&[u8]>) -> Result<SelectionGuard, Error> {
        let current = self.current();
        let (members, index) = current.shared.choose(key, &[])?;
        Ok(SelectionGuard::new(
            Arc::clone(&current.shared),
            members,
            index,
        ))
    }

    /// Replica selection: `min(count, members)` distinct member nodes (full names) for `key`,
    /// the preferred first (HashRing walks the ring; other algorithms sample at random by default). Nothing
    /// is counted in flight: use [`Balancer::select_node`] or calls for that.
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`]; the algorithm's
    /// own errors; [`Error::InvalidConfig`] (`algorithm`) when a custom selector's
    /// [`pick_many`](crate::routing::Selector::pick_many) breaks its contract (an index
    /// out of range, a repeat, or other than `min(count, members)` indices).
    pub fn select_nodes(&self, count: usize, key: Option<&[u8]>) -> Result<Vec<String>, Error> {
        let current = self.current();
        let shared = &current.shared;
        shared.check_running()?;
        let members = shared.members();
        if members.is_empty() {
            shared.metrics.empty();
            return Err(Error::NoMembers {
                balancer: shared.name.clone(),
            });
        }
        let request = Request {
            balancer: &shared.name,
            key,
            version: members.version(),
        };
        let algorithm = &shared.config.algorithm;
        let picked = shared
            .selector
            .pick_many(members.views(), count, &request)?;
        let broken = || Error::InvalidConfig {
            option: "algorithm",
            reason: format!(
                "{} chose {picked:?} for {count} distinct of {} members",
                algorithm.name(),
                members.len()
            ),
        };
        if picked.len() != count.min(members.len()) {
            return Err(broken());
        }
        let mut nodes = Vec::with_capacity(picked.len());
        for (n, &i) in picked.iter().enumerate() {
            let Some(member) = members.as_slice().get(i) else {
                return Err(broken());
            };
            if picked[..n].contains(&i) {
                return Err(broken());
            }
            nodes.push(member.node().to_string());
        }
        Ok(nodes)
    }

    /// A call of `F` with `args` on a member chosen by the algorithm; set `.key(..)` and
    /// `.timeout(..)` on the returned [`BalancedCall`], then await it. A member on this node is
    /// served in-process (no serialization) with the same errors and timeout.
    ///
    /// Errors when awaited: see [`BalancedCall`] ([`Error::NoMembers`] when the pool stays
    /// empty, [`Error::Overloaded`], then as [`Node::call`]).
    pub fn call<F: RemoteFunction>(&self, args: F::Args) -> BalancedCall<F> {
        BalancedCall::new(self.clone(), args)
    }

    /// A cast of `F` with `args` to a member chosen by the algorithm; await the returned
    /// [`BalancedCast`] (it resolves once the cast is handed over).
    ///
    /// Errors when awaited: see [`BalancedCast`] ([`Error::NoMembers`] when the pool stays
    /// empty, then as [`Node::cast`]).
    pub fn cast<F: RemoteFunction>(&self, args: F::Args) -> BalancedCast<F> {
        BalancedCast::new(self.clone(), args)
    }

    /// Stops the balancer on this node gracefully (draining), and returns when it is stopped,
    /// with a [`DrainReport`] of what happened:
    ///
    /// 1. new calls through this balancer on this node fail with [`Error::UnknownBalancer`];
    /// 2. this node leaves the group, so other nodes stop selecting it;
    /// 3. for `leave_grace` (500 ms) it still serves calls other nodes selected before they saw
    ///    it leave; later ones are refused unrun and their callers send them to another member;
    /// 4. it waits until the calls this node routed through the balancer and the calls it
    ///    serves as a member have finished ([`DrainOutcome::Drained`]), or `drain_timeout`
    ///    (15 s, grace included) is up ([`DrainOutcome::TimedOut`], with the calls still
    ///    running in [`DrainReport::routed_in_flight`] and [`DrainReport::served_in_flight`])
    ///    — then it stops anyway: callers of calls still running here may get
    ///    [`Error::ServiceUnavailable`] (`ConnectionLost`: the call may have run), and those
    ///    calls' [`CallContext`](crate::CallContext)s are cancelled. A call run in-process (a
    ///    local member, `CallDirect`, `call_directly`) counts until its function has ended,
    ///    even when its caller stopped waiting first;
    /// 5. a member keeps refusing (not dropping) calls for at least 250 ms after leaving,
    ///    whatever the grace, then it stops its actors and frees the name (a new start under
    ///    it may follow). [`DrainReport::took`] is the time from 1 to here.
    ///
    /// A second call (or [`Node::shutdown`]) while one drains returns when that one is done,
    /// with the same report; so does a call on a balancer already stopped — unless a new
    /// balancer has been started under the name since: the handle follows it (see
    /// [Restarts](Balancer#restarts-a-handle-follows-its-name)) and stops that one. On a
    /// balancer whose actors were killed (or gave up after too many restarts) and not
    /// replaced, it returns at once with [`DrainOutcome::Killed`]. Killing the balancer's
    /// supervisor (or its parent, see [`Balancer::spawn_linked`]) skips the drain: call this
    /// from the parent's `post_stop`.
    pub async fn stop(&self) -> DrainReport {
        let current = self.current();
        let shared = &current.shared;
        let mut stopped = shared.stopped.subscribe();
        if !current.is_own_running() {
            // Its actors are gone: a stop reported already, or they were killed (reported
            // by `end_without_drain`, which `current` ran).
            shared.end_without_drain();
        } else if !shared.stopping.swap(true, Ordering::AcqRel) {
            // Waits on this balancer (an empty pool, wait_for_members, random-node calls
            // tracked by it) end now, not when the drain is over.
            shared.notify_stopping();
            // The drain runs on its own task: dropping this future does not abandon it.
            let balancer = Balancer::clone(&current);
            tokio::spawn(async move { balancer.drain_and_stop().await });
        }
        let report = stopped.wait_for(|report| report.is_some()).await;
        match report.as_deref() {
            Ok(Some(report)) => report.clone(),
            // The sender lives in `shared`, which this handle holds: not reached.
            _ => DrainReport::killed(&shared.name, 0, 0),
        }
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
