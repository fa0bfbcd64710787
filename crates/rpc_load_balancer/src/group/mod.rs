//! Actor groups: balance over the actors of **your own** `ractor::pg` group (any scope), with
//! every algorithm of this library, node filters, in-flight counting, call outcomes fed to the
//! selector and membership events — what a [`Balancer`](crate::Balancer) does for remote
//! functions, for plain ractor actors.
//!
//! A group may have many actors per node: a member is one actor, identified by its node's full
//! name and its pid on that node (member id `"{node}#{pid}"`,
//! [`MemberView::id`](crate::routing::MemberView::id)), and the members are sorted by
//! (node, pid) — the same order on every node, so RoundRobin and HashRing agree across
//! callers. Node-level inputs stay per node: LeastCpu's CPU readings, the node filters, and
//! the node load in the reports LoadWeighted weighs (asked of each member's node, since your
//! actors' replies carry none; the call rate in them is this caller's own, per actor).
//!
//! Nothing is sent to the group's actors but your own message type `M`: the group has no
//! actor of its own in the pg group and is not registered as a balancer
//! ([`Balancer::lookup`](crate::Balancer::lookup) does not find it).
//!
//! ```
//! use std::time::Duration;
//! use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
//! use rpc_load_balancer::group::{ActorGroup, ActorGroupConfig};
//! use rpc_load_balancer::{Node, NodeConfig, RoundRobin};
//!
//! enum Work {
//!     Double(u64, RpcReplyPort<u64>),
//! }
//! impl ractor::Message for Work {}
//!
//! struct Worker;
//! impl Actor for Worker {
//!     type Msg = Work;
//!     type State = ();
//!     type Arguments = ();
//!     async fn pre_start(&self, me: ActorRef<Work>, _: ()) -> Result<(), ActorProcessingErr> {
//!         ractor::pg::join_scoped("app".into(), "doublers".into(), vec![me.get_cell()]);
//!         Ok(())
//!     }
//!     async fn handle(&self, _: ActorRef<Work>, msg: Work, _: &mut ()) -> Result<(), ActorProcessingErr> {
//!         let Work::Double(x, reply) = msg;
//!         let _ = reply.send(2 * x);
//!         Ok(())
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let node = Node::start(NodeConfig::new("group_doc", "127.0.0.1:0").cookie("secret")).await?;
//! let (a, _) = Actor::spawn(None, Worker, ()).await?;
//! let (b, _) = Actor::spawn(None, Worker, ()).await?;
//! let group: ActorGroup<Work> =
//!     ActorGroup::start(ActorGroupConfig::new("app", "doublers").algorithm(RoundRobin::new())).await?;
//! group.wait_for_members(2, Duration::from_secs(5)).await?;
//! let four = group.call(|port| Work::Double(2, port)).timeout(Duration::from_secs(1)).await?;
//! assert_eq!(four, 4);
//! let chosen = group.select(None)?; // an ActorRef<Work>, counted in flight until dropped
//! assert_eq!(group.in_flight(), 1);
//! drop(chosen);
//! group.stop().await;
//! # a.stop(None); b.stop(None);
//! # node.shutdown().await;
//! # Ok(()) }
//! ```

mod call;
mod config;
mod load;
#[cfg(test)]
mod tests;
mod watcher;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef, Message};
use tokio::sync::watch;

use crate::balancer::{BalancerShared, Members, SelectionGuard};
use crate::node::Forwarding;
use crate::{Error, Node};

pub use call::{GroupCall, GroupCast};
pub use config::ActorGroupConfig;

use watcher::{GroupWatcher, WatcherMsg};

/// A handle to a balanced actor group on this node: cheap to clone (one reference count).
/// Start one with [`ActorGroup::start`]; see the [module docs](self). The group runs until
/// [`stop`](ActorGroup::stop)ped, its supervisor stops (with
/// [`spawn_linked`](ActorGroup::spawn_linked)), or its last handle is dropped (nothing could
/// route through it any more); live [`GroupSelection`]s stay valid and release as usual.
pub struct ActorGroup<M: Message> {
    inner: Arc<Inner>,
    _message: PhantomData<fn(M)>,
}

/// What every handle of one group shares.
struct Inner {
    shared: Arc<BalancerShared>,
    watcher: ActorRef<WatcherMsg>,
    /// This group's calls per node, counted only when its algorithm reads load reports.
    calls: Option<Arc<load::NodeCalls>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle: nobody can route through the group any more.
        self.shared.mark_stopping();
        self.watcher.stop(None);
    }
}

impl<M: Message> Clone for ActorGroup<M> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            _message: PhantomData,
        }
    }
}

impl<M: Message> std::fmt::Debug for ActorGroup<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActorGroup")
            .field("name", &self.inner.shared.name)
            .field("algorithm", &self.inner.shared.config.algorithm.name())
            .finish()
    }
}

/// One selected member of an actor group, counted in flight until dropped: the actor as your
/// message type, and the [`SelectionGuard`] that releases the selection (exactly once, on any
/// thread). Owned (`Send + Sync + 'static`).
pub struct GroupSelection<M> {
    actor: ActorRef<M>,
    guard: SelectionGuard,
}

impl<M> GroupSelection<M> {
    /// The chosen actor.
    pub fn actor(&self) -> &ActorRef<M> {
        &self.actor
    }

    /// The chosen actor's node (full name, `name@host`).
    pub fn node(&self) -> &str {
        self.guard.node()
    }

    /// The chosen member's id, `"{node}#{pid}"` (see
    /// [`MemberView::id`](crate::routing::MemberView::id)).
    pub fn member_id(&self) -> &str {
        self.guard.member().view().id()
    }

    /// The selection guard (dropping this selection drops it).
    pub fn guard(&self) -> &SelectionGuard {
        &self.guard
    }
}

impl<M> std::fmt::Debug for GroupSelection<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupSelection")
            .field("member", &self.member_id())
            .finish()
    }
}

impl<M: Message> ActorGroup<M> {
    /// Starts balancing over the actors of pg group `config.group` in scope `config.scope`,
    /// on this process's node (see [`Node::current`]), standalone. Returns once the group's
    /// current members (those whose node is known) are read.
    ///
    /// Errors: [`Error::NodeNotRunning`]; [`Error::InvalidConfig`] naming the option
    /// (`scope`, `group`, `algorithm` — `call_direct` has no meaning for a group — and the
    /// options shared with [`BalancerConfig`](crate::BalancerConfig)); [`Error::Startup`] if
    /// its watcher actor cannot start.
    pub async fn start(config: ActorGroupConfig) -> Result<Self, Error> {
        Self::spawn(config, None).await
    }

    /// As [`ActorGroup::start`], with the group's watcher actor linked to `supervisor`: it
    /// stops when the supervisor does (the group then routes nothing; its calls fail with
    /// [`Error::UnknownBalancer`]).
    ///
    /// Errors: as [`ActorGroup::start`].
    pub async fn spawn_linked(
        config: ActorGroupConfig,
        supervisor: ActorCell,
    ) -> Result<Self, Error> {
        Self::spawn(config, Some(supervisor)).await
    }

    async fn spawn(config: ActorGroupConfig, parent: Option<ActorCell>) -> Result<Self, Error> {
        let node = Node::current().ok_or(Error::NodeNotRunning)?;
        let (balancer, scope, group) = config.into_parts()?;
        let source = crate::balancer::shared::Source::ActorGroup {
            scope: scope.clone(),
            group: group.clone(),
        };
        let shared = Arc::new(BalancerShared::with_source(
            balancer,
            node.shared(),
            source,
        )?);
        let calls = shared
            .needs
            .reports
            .map(|_| Arc::new(load::NodeCalls::default()));
        let arguments = (Arc::clone(&shared), scope, group, calls.clone());
        let spawned = match parent {
            Some(parent) => Actor::spawn_linked(None, GroupWatcher, arguments, parent).await,
            None => Actor::spawn(None, GroupWatcher, arguments).await,
        };
        let (watcher, _) = spawned.map_err(|error| Error::Startup {
            reason: format!("actor group {}: {error}", shared.name),
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                shared,
                watcher,
                calls,
            }),
            _message: PhantomData,
        })
    }

    fn shared(&self) -> &Arc<BalancerShared> {
        &self.inner.shared
    }

    /// Counts a call or cast to an actor of `node` that ended (`ok`: it succeeded), when the
    /// group keeps load reports.
    fn ended(&self, node: &Arc<str>, ok: bool) {
        if let Some(calls) = &self.inner.calls {
            calls.ended(node, ok);
        }
    }

    /// The group's name for logs, metrics and errors: `"{scope}/{group}"`.
    pub fn name(&self) -> &str {
        &self.shared().name
    }

    /// The name of the group's selection algorithm.
    pub fn algorithm_name(&self) -> &'static str {
        self.shared().config.algorithm.name()
    }

    /// Selects a member without calling it, optionally for a routing `key` (HashRing): the
    /// chosen actor as `ActorRef<M>`, counted in flight (and busy, for counting algorithms)
    /// until the returned [`GroupSelection`] drops. Its release reaches a learning selector as
    /// a selection without a result (no latency).
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`] (at once, no
    /// wait); the algorithm's own errors (e.g. [`Error::NoEligibleMembers`]).
    pub fn select(&self, key: Option<&[u8]>) -> Result<GroupSelection<M>, Error> {
        let shared = self.shared();
        let (members, index) = shared.choose(key, &[])?;
        let actor = ActorRef::from(members.as_slice()[index].cell().clone());
        let guard = SelectionGuard::new(members, index);
        shared.check_running()?;
        Ok(GroupSelection { actor, guard })
    }

    /// A call of a member chosen by the algorithm, in the style of ractor's `call_t!`: `build`
    /// makes the message from a reply port (it may be called again for another member when a
    /// send provably did not reach one). Set `.timeout(..)` and `.key(..)` on the returned
    /// [`GroupCall`], then await it for the typed reply.
    ///
    /// Errors when awaited: see [`GroupCall`].
    pub fn call<'a, R, B>(&'a self, build: B) -> GroupCall<'a, M, R, B>
    where
        R: Send + 'static,
        B: Fn(ractor::RpcReplyPort<R>) -> M + Send + Sync + 'a,
    {
        GroupCall::new(self, build)
    }

    /// A cast of `message` to a member chosen by the algorithm, in the style of ractor's
    /// `cast!`; await the returned [`GroupCast`] (it resolves once the message is handed over).
    ///
    /// Errors when awaited: see [`GroupCast`].
    pub fn cast(&self, message: M) -> GroupCast<'_, M> {
        GroupCast::new(self, message)
    }

    /// The current members, sorted by (node, pid), one per actor (see [`Members`]; each
    /// [`Member::view`](crate::Member::view)'s [`id`](crate::routing::MemberView::id) is
    /// `"{node}#{pid}"`).
    pub fn members(&self) -> Arc<Members> {
        self.shared().members()
    }

    /// The members as `ActorRef<M>`s, in the order of [`members`](Self::members).
    pub fn actors(&self) -> Vec<ActorRef<M>> {
        let members = self.members();
        members
            .as_slice()
            .iter()
            .map(|m| ActorRef::from(m.cell().clone()))
            .collect()
    }

    /// A watch of the members snapshot: changes on every join and leave.
    pub fn watch_members(&self) -> watch::Receiver<Arc<Members>> {
        self.shared().watch()
    }

    /// Waits until the group has at least `count` members, at most `timeout`, and returns that
    /// snapshot (at once if there are already enough).
    ///
    /// Errors: [`Error::NoMembers`] if fewer are there at the deadline;
    /// [`Error::UnknownBalancer`] once the group is stopped.
    pub async fn wait_for_members(
        &self,
        count: usize,
        timeout: Duration,
    ) -> Result<Arc<Members>, Error> {
        self.shared().wait_for_members(count, timeout).await
    }

    /// Sends the group's members to `actor` as its own messages, as
    /// [`Balancer::forward_members_to`](crate::Balancer::forward_members_to) does: the current
    /// snapshot, then one on every change, mapped by `map` (`None`: skipped). Ends when the
    /// actor stops, the group stops, or the returned guard drops.
    pub fn forward_members_to<A: Message>(
        &self,
        actor: ActorRef<A>,
        map: impl Fn(Arc<Members>) -> Option<A> + Send + 'static,
    ) -> Forwarding {
        crate::balancer::forward::forward_members(Arc::clone(self.shared()), actor, map)
    }

    /// Selections of this group in flight on this node: calls and casts not finished yet plus
    /// live [`GroupSelection`]s.
    pub fn in_flight(&self) -> usize {
        self.shared().in_flight.get()
    }

    /// What outlier ejection did so far, or `None` when the group has it off.
    pub fn ejection_stats(&self) -> Option<crate::routing::EjectionStats> {
        self.shared().ejection.as_ref().map(|e| e.stats())
    }

    /// Whether the group routes (it was not stopped, and its watcher runs).
    pub fn is_running(&self) -> bool {
        !self.shared().is_stopping()
    }

    /// Stops the group on this node (every handle): it routes nothing from now on (calls fail
    /// with [`Error::UnknownBalancer`]), forgets its members and stops its watcher actor. The
    /// group's actors are yours: they are not touched. Calls in flight end as they would.
    pub async fn stop(&self) {
        self.shared().mark_stopping();
        let cell = self.inner.watcher.get_cell();
        let _ = cell.stop_and_wait(None, Some(Duration::from_secs(5))).await;
        self.shared().clear();
    }
}
