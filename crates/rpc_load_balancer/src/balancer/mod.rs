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

mod call;
mod config;
mod in_flight;
mod load_balancer;
mod members;
mod shared;
pub(crate) mod supervisor;

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
pub use config::{BalancerConfig, DEFAULT_DRAIN_TIMEOUT, DEFAULT_LEAVE_GRACE};
pub use members::{Member, Members};
pub use supervisor::SupervisorMsg;

pub(crate) use in_flight::OwnedInFlightToken;
pub(crate) use members::member_name;
use shared::BalancerShared;
use supervisor::BalancerSupervisor;

use crate::function::RemoteFunction;
use crate::node::shared::NodeShared;
use crate::{Error, Node};

/// A handle to a balancer started on this node. Cheap to clone.
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
        config.algorithm.init(&config.name)?;
        let name = config.name.clone();
        node.reserve_balancer(&name)?;
        let shared = Arc::new(BalancerShared::new(config, Arc::clone(&node)));
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
                node.register_balancer(balancer.clone());
                tracing::info!(balancer = %name, member = balancer.shared.member, "balancer started");
                Ok(balancer)
            }
            Err(error) => {
                node.release_balancer(&name);
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
        node.shared().balancer(name)
    }

    /// The balancer's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The name of the balancer's selection algorithm.
    pub fn algorithm_name(&self) -> &'static str {
        self.shared.config.algorithm.name()
    }

    /// Whether this node is a member (matches `node_match_list`).
    pub fn is_member(&self) -> bool {
        self.shared.member
    }

    /// The balancer's supervisor actor, for linking and monitoring.
    pub fn actor(&self) -> &ActorRef<SupervisorMsg> {
        &self.supervisor
    }

    /// Whether the balancer's actors are still running.
    pub fn is_running(&self) -> bool {
        matches!(
            self.supervisor.get_status(),
            ractor::ActorStatus::Running | ractor::ActorStatus::Starting
        )
    }

    /// The current members (sorted by node name, one per node).
    pub fn members(&self) -> Arc<Members> {
        self.shared.members()
    }

    /// Selections of this balancer in flight on this node: routed calls and casts not yet
    /// finished plus live [`SelectionGuard`]s (all algorithms; per member see
    /// [`Member::in_flight`]).
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.get()
    }

    /// A watch of the members snapshot: changes on every join and leave.
    pub fn watch_members(&self) -> watch::Receiver<Arc<Members>> {
        self.shared.watch()
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
        self.shared.check_running()?;
        let mut members = self.watch_members();
        let shared = &self.shared;
        let reached = tokio::time::timeout(
            timeout,
            members.wait_for(|m| m.len() >= count || shared.stopping.load(Ordering::Acquire)),
        )
        .await;
        shared.check_running()?;
        match reached {
            Ok(Ok(members)) => Ok(Arc::clone(&members)),
            _ => Err(Error::NoMembers {
                balancer: self.shared.name.clone(),
            }),
        }
    }

    /// Selects a member without calling it (the original's `select_node`), optionally for a
    /// routing `key`. The returned guard releases the selection when dropped (counting
    /// algorithms count the member busy until then).
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`] (no retry: it
    /// fails at once); the algorithm's own errors (e.g. [`Error::NoEligibleMembers`]);
    /// [`Error::InvalidConfig`] (`algorithm`) when a custom algorithm returns an index out of
    /// range.
    pub fn select_node(&self, key: Option<&[u8]>) -> Result<SelectionGuard<'_>, Error> {
        let (members, index) = self.shared.choose(key, &[])?;
        Ok(SelectionGuard::new(&self.shared, members, index))
    }

    /// Replica selection: `min(count, members)` distinct member nodes (full names) for `key`,
    /// the preferred first (HashRing walks the ring; other algorithms sample at random by default). Nothing
    /// is counted in flight: use [`Balancer::select_node`] or calls for that.
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`]; the algorithm's
    /// own errors; [`Error::InvalidConfig`] (`algorithm`) when a custom algorithm's
    /// [`choose_nodes`](crate::SelectionAlgorithm::choose_nodes) breaks its contract (an index
    /// out of range, a repeat, or other than `min(count, members)` indices).
    pub fn select_nodes(&self, count: usize, key: Option<&[u8]>) -> Result<Vec<String>, Error> {
        self.shared.check_running()?;
        let members = self.members();
        if members.is_empty() {
            self.shared.metrics.empty();
            return Err(Error::NoMembers {
                balancer: self.shared.name.clone(),
            });
        }
        let request = crate::SelectionRequest {
            balancer: &self.shared.name,
            key,
            version: members.version(),
        };
        let algorithm = &self.shared.config.algorithm;
        let picked = algorithm.choose_nodes(members.as_slice(), count, &request)?;
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

    /// Stops the balancer on this node gracefully (draining), and returns when it is stopped:
    ///
    /// 1. new calls through this balancer on this node fail with [`Error::UnknownBalancer`];
    /// 2. this node leaves the group, so other nodes stop selecting it;
    /// 3. for `leave_grace` (500 ms) it still serves calls other nodes selected before they saw
    ///    it leave; later ones are refused unrun and their callers send them to another member;
    /// 4. it waits until the calls this node routed through the balancer and the calls it
    ///    serves as a member have finished, or `drain_timeout` (15 s, grace included) is up —
    ///    then it stops anyway: callers of calls still running here may get
    ///    [`Error::ServiceUnavailable`] (`ConnectionLost`: the call may have run), and those
    ///    calls' [`CallContext`](crate::CallContext)s are cancelled. A call run in-process (a
    ///    local member, `CallDirect`, `call_directly`) counts until its function has ended,
    ///    even when its caller stopped waiting first;
    /// 5. a member keeps refusing (not dropping) calls for at least 250 ms after leaving,
    ///    whatever the grace, then it stops its actors and frees the name (a new start under
    ///    it may follow).
    ///
    /// A second call (or [`Node::shutdown`]) while one drains returns when that one is done.
    /// Killing the balancer's supervisor (or its parent, see [`Balancer::spawn_linked`]) skips
    /// the drain: call this from the parent's `post_stop`.
    pub async fn stop(&self) {
        let shared = &self.shared;
        let mut stopped = shared.stopped.subscribe();
        if !shared.stopping.swap(true, Ordering::AcqRel) {
            // Waits on this balancer (an empty pool, wait_for_members, random-node calls
            // tracked by it) end now, not when the drain is over.
            shared.notify_stopping();
            // The drain runs on its own task: dropping this future does not abandon it.
            let balancer = self.clone();
            tokio::spawn(async move { balancer.drain_and_stop().await });
        }
        let _ = stopped.wait_for(|done| *done).await;
    }

    /// The work of [`Balancer::stop`], once.
    async fn drain_and_stop(&self) {
        let shared = &self.shared;
        let config = &shared.config;
        let started = tokio::time::Instant::now();
        let deadline = crate::deadline::after(config.drain_timeout);
        if shared.member {
            if let Some(cell) =
                ractor::registry::where_is(member_name(&shared.name, &shared.node.name))
            {
                ractor::pg::leave_scoped(
                    crate::wire::SCOPE.to_string(),
                    shared.name.clone(),
                    vec![cell],
                );
            }
            tokio::time::sleep_until(deadline.min(crate::deadline::after(config.leave_grace)))
                .await;
        }
        shared.accepting.store(false, Ordering::Release);
        let drained = loop {
            if shared.in_flight.get() == 0 && shared.served.get() == 0 {
                break true;
            }
            if tokio::time::Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(DRAIN_POLL).await;
        };
        if !drained {
            // Given up: calls of this balancer still running here see their cancellation.
            shared.abandoned.fire();
        }
        if shared.member {
            // Refuse (not drop) calls until every peer has seen the leave, so nothing is
            // selected for this member any more, and at least MIN_REFUSING after it: a call
            // reaching a stopped actor fails (it may have run, for all its caller knows); a
            // refused one goes to another member.
            shared.wait_until_peers_saw_leave(PEERS_SAW_LEAVE).await;
            tokio::time::sleep_until(started + MIN_REFUSING).await;
        }
        if !drained {
            tracing::warn!(
                balancer = %shared.name,
                routed = shared.in_flight.get(),
                served = shared.served.get(),
                drain_timeout_ms = config.drain_timeout.as_millis() as u64,
                "drain timed out; stopping with calls in flight"
            );
        }
        let _ = self
            .supervisor
            .stop_and_wait(
                Some("balancer stopped".into()),
                Some(Duration::from_secs(5)),
            )
            .await;
        shared.clear();
        shared.node.release_balancer(&shared.name);
        shared.stopped.send_replace(true);
        tracing::info!(balancer = %shared.name, drained, "balancer stopped");
    }

    /// Calls of this balancer this node is serving as a member now (routed to it by any node,
    /// itself included). [`Balancer::stop`] waits for them.
    pub fn served(&self) -> usize {
        self.shared.served.get()
    }

    /// Counts work (e.g. a random-node call tracked by this balancer) in the balancer's
    /// in-flight total, which [`Balancer::stop`] drains, until the token drops (owned, so it
    /// can move into a run on this node).
    pub(crate) fn track(&self) -> in_flight::OwnedInFlightToken {
        in_flight::OwnedInFlightToken::new(&self.shared)
    }

    pub(crate) fn shared(&self) -> &Arc<BalancerShared> {
        &self.shared
    }
}

/// One selected member. Dropping the guard releases the selection in the algorithm, exactly
/// once, whatever happened to the call (success, error, timeout, panic, cancellation). It
/// borrows the balancer and holds the members snapshot it was chosen from.
pub struct SelectionGuard<'a> {
    shared: &'a BalancerShared,
    /// The snapshot the member was picked from: an arc-swap guard, which keeps it alive
    /// without writing its shared reference count (for short-lived selections).
    members: arc_swap::Guard<Arc<Members>>,
    index: usize,
    /// Counts the selection in the balancer's in-flight total and gauge.
    _counted: in_flight::InFlightToken<'a>,
}

impl<'a> SelectionGuard<'a> {
    pub(crate) fn new(
        shared: &'a BalancerShared,
        members: arc_swap::Guard<Arc<Members>>,
        index: usize,
    ) -> Self {
        if shared.counts_members {
            members.as_slice()[index].acquire();
        }
        Self::acquired(shared, members, index)
    }

    /// A guard for a selection whose member count is already taken (by
    /// [`Member::try_acquire`]), or not kept.
    pub(crate) fn acquired(
        shared: &'a BalancerShared,
        members: arc_swap::Guard<Arc<Members>>,
        index: usize,
    ) -> Self {
        let counted = in_flight::InFlightToken::new(shared);
        Self {
            shared,
            members,
            index,
            _counted: counted,
        }
    }

    /// The selected member's node (full name).
    pub fn node(&self) -> &str {
        self.member().node()
    }

    /// The selected member.
    pub fn member(&self) -> &Member {
        &self.members.as_slice()[self.index]
    }
}

impl std::fmt::Debug for SelectionGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectionGuard")
            .field("node", &self.node())
            .finish()
    }
}

impl Drop for SelectionGuard<'_> {
    fn drop(&mut self) {
        if self.shared.counts_members {
            self.member().release();
        }
        self.shared.config.algorithm.release_node(self.member());
        // The token releases the total and the gauge after this.
    }
}
