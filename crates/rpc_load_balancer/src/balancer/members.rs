//! The members snapshot: the nodes a balancer can route to, deduplicated by node and sorted by
//! node name, so every caller on every node indexes the same list. Built by the LoadBalancer
//! actor on each membership change and read lock-free by callers.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{ActorCell, ActorId, ActorRef};

use super::selection_metrics::SelectionMetrics;
use super::Releaser;
use crate::routing::{Derived, MemberView, Request};
use crate::wire::RpcMessage;

/// Whether the member on a node (full name) is in this node's zone (see
/// [`Members::from_cells`]).
pub(crate) type InZone<'a> = &'a dyn Fn(&str) -> bool;

/// Prefix of a member actor's registered name: `rpc_load_balancer/<balancer>/<node>`.
pub(crate) fn member_name(balancer: &str, node: &str) -> String {
    format!("rpc_load_balancer/{balancer}/{node}")
}

/// One member of a balancer: a node and the actor that serves the balancer there, with the
/// [view](MemberView) the balancer's selector sees of it.
#[derive(Clone)]
pub struct Member {
    view: MemberView,
    actor: ActorRef<RpcMessage>,
    selected: metrics::Counter,
}

impl Member {
    /// The member's node, full name (`name@host`).
    pub fn node(&self) -> &str {
        self.view.node()
    }

    /// The node name as a shared string (cheap to clone; no allocation).
    pub fn node_arc(&self) -> &Arc<str> {
        self.view.node_arc()
    }

    /// Whether the member is this node (calls to it run in-process).
    pub fn is_local(&self) -> bool {
        self.view.is_local()
    }

    /// The member as the balancer's selector sees it (same estimates, shared).
    pub fn view(&self) -> &MemberView {
        &self.view
    }

    /// The id of the actor serving the balancer on that node (it changes when that actor is
    /// restarted); for an actor group's member, the group's actor itself.
    pub fn id(&self) -> ActorId {
        self.actor.get_id()
    }

    /// Calls and casts routed to this member by this node's balancer and not finished yet
    /// (taken at selection, released when the selection guard drops). Counted only when the
    /// balancer's algorithm needs the counts
    /// ([`Needs::in_flight`](crate::routing::Needs::in_flight): LeastConnections,
    /// PowerOfTwo) or the balancer caps them (`max_in_flight_per_member`); otherwise always 0
    /// — the balancer's total is [`Balancer::in_flight`](crate::Balancer::in_flight).
    pub fn in_flight(&self) -> usize {
        self.view.in_flight()
    }

    /// Counts one more routed call in flight if fewer than `limit` are; whether it did.
    pub(crate) fn try_acquire(&self, limit: usize) -> bool {
        self.view.try_acquire(limit)
    }

    /// The member's `node.selected.count` handle.
    pub(crate) fn selected_counter(&self) -> &metrics::Counter {
        &self.selected
    }

    pub(crate) fn actor(&self) -> &ActorRef<RpcMessage> {
        &self.actor
    }

    /// The member's actor, untyped (an actor group's member is the user's actor: it is only
    /// ever sent the group's own message type).
    pub(crate) fn cell(&self) -> &ActorCell {
        &self.actor
    }

    /// A member from a pg cell of `balancer`'s group, if its name is a member name.
    pub(crate) fn from_cell(balancer: &str, cell: &ActorCell) -> Option<Member> {
        let name = cell.get_name()?;
        let node = name
            .strip_prefix("rpc_load_balancer/")?
            .strip_prefix(balancer)?
            .strip_prefix('/')?;
        if node.is_empty() {
            return None;
        }
        Some(Member {
            view: MemberView::new(node, cell.get_id().is_local()),
            actor: ActorRef::from(cell.clone()),
            selected: metrics::Counter::noop(),
        })
    }
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut member = f.debug_struct("Member");
        member.field("node", &self.node());
        // An actor group's member: which actor of the node (a balancer's id is its node).
        if self.view.id() != self.node() {
            member.field("id", &self.view.id());
        }
        member.field("local", &self.is_local()).finish()
    }
}

/// A balancer's members at one moment: sorted by node name, one entry per node. An actor
/// group's (`ActorGroup::members`): one entry per actor, sorted by (node name, the actor's pid
/// on its node), several per node, told apart by their views' [ids](MemberView::id).
#[derive(Clone, Default)]
pub struct Members {
    version: u64,
    members: Vec<Member>,
    /// The members' views, in the same order (what the selector picks from, without
    /// allocating).
    views: Vec<MemberView>,
    /// What the balancer's selector derived from this list, handed to its picks.
    derived: Option<Derived>,
    /// What a selection over this snapshot needs until it ends (`None` only for a snapshot
    /// no balancer published: an empty one, or one built by tests).
    releaser: Option<Releaser>,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members")
            .field("version", &self.version)
            .field("members", &self.members)
            .field("derived", &self.derived.is_some())
            .finish_non_exhaustive()
    }
}

impl Members {
    /// Builds a snapshot from pg cells: keeps member actors, one per node (a local one wins,
    /// else the first), sorted by node name, each with its selection counter registered.
    /// A member whose actor is in `previous` keeps that actor's in-flight count. Counts are
    /// matched by the member actor's id, not by node: a member that left and rejoined (a new
    /// actor on the same node — a restarted member or a reconnected node), even between two
    /// snapshots, starts at 0, and late releases of selections from its earlier membership go
    /// to the earlier counter, which is freed with the last snapshot or guard holding it.
    /// With `cpu`, each view reads its node's slot of the process's CPU cache. With
    /// `preferred` (the balancer has locality), each view is marked in this node's zone when
    /// `preferred(node)` says so.
    pub(crate) fn from_cells(
        metrics: &SelectionMetrics,
        version: u64,
        cells: &[ActorCell],
        previous: &Members,
        cpu: bool,
        preferred: Option<InZone<'_>>,
    ) -> Members {
        let balancer = metrics.balancer();
        let mut members: Vec<Member> = cells
            .iter()
            .filter_map(|c| Member::from_cell(balancer, c))
            .collect();
        members.sort_by(|a, b| a.node().cmp(b.node()).then(b.is_local().cmp(&a.is_local())));
        members.dedup_by(|later, first| later.node() == first.node());
        Self::finish(metrics, version, members, previous, cpu, preferred)
    }

    /// Builds the snapshot of an actor group from its pg cells: one member per
    /// actor whose node `node_of` knows (its node's full name, the actor's pid there and
    /// whether it is this node; `None`: skipped — a remote actor whose session is not known
    /// yet, or a node the group's filters reject), with member id `"{node}#{pid}"`, sorted by
    /// (node, pid). Estimates, counters and CPU slots as [`from_cells`](Self::from_cells).
    pub(crate) fn from_group_cells(
        metrics: &SelectionMetrics,
        version: u64,
        cells: &[ActorCell],
        previous: &Members,
        cpu: bool,
        node_of: impl Fn(&ActorCell) -> Option<(Arc<str>, u64, bool)>,
    ) -> Members {
        let mut found: Vec<(Arc<str>, u64, &ActorCell, bool)> = cells
            .iter()
            .filter_map(|cell| node_of(cell).map(|(node, pid, local)| (node, pid, cell, local)))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        found.dedup_by(|later, first| later.0 == first.0 && later.1 == first.1);
        let members = found
            .into_iter()
            .map(|(node, pid, cell, local)| {
                let id = format!("{node}#{pid}");
                Member {
                    view: MemberView::new(node, local).with_id(id),
                    actor: ActorRef::from(cell.clone()),
                    selected: metrics::Counter::noop(),
                }
            })
            .collect();
        Self::finish(metrics, version, members, previous, cpu, None)
    }

    /// Registers each member's selection counter, carries the estimates of the members whose
    /// actor is in `previous`, (with `cpu`) gives each view its node's CPU slot and (with
    /// `preferred`) marks it in this node's zone.
    fn finish(
        metrics: &SelectionMetrics,
        version: u64,
        mut members: Vec<Member>,
        previous: &Members,
        cpu: bool,
        preferred: Option<InZone<'_>>,
    ) -> Members {
        // By actor id: a group may have thousands of members.
        let before: HashMap<ActorId, &Member> =
            previous.as_slice().iter().map(|m| (m.id(), m)).collect();
        for member in &mut members {
            member.selected = metrics.member_counter(member.node_arc());
            if let Some(kept) = before.get(&member.id()) {
                member.view.keep_stats_of(&kept.view);
            }
            if cpu {
                let slot = crate::cpu::cache().slot(member.node());
                member.view = member.view.clone().with_cpu_slot(slot);
            }
            if let Some(preferred) = preferred {
                let zone = preferred(member.node());
                member.view = member.view.clone().with_preferred(zone);
            }
        }
        Members::new(version, members)
    }

    /// A snapshot of `members` (sorted, one per node) as list `version`.
    pub(crate) fn new(version: u64, members: Vec<Member>) -> Members {
        let views = members.iter().map(|m| m.view.clone()).collect();
        Members {
            version,
            members,
            views,
            derived: None,
            releaser: None,
        }
    }

    /// This snapshot as published by a balancer: selections over it end through `releaser`,
    /// and its picks get `derived` (what the selector derived from it).
    pub(crate) fn published(mut self, releaser: Releaser, derived: Option<Derived>) -> Members {
        self.releaser = Some(releaser);
        self.derived = derived;
        self
    }

    /// What a selection over this snapshot needs until it ends (`None`: published by no
    /// balancer; nothing is counted).
    #[inline]
    pub(crate) fn releaser(&self) -> Option<&Releaser> {
        self.releaser.as_ref()
    }

    /// A request of balancer `balancer` for `key` over this list, with what the selector
    /// derived from it.
    #[inline]
    pub(crate) fn request<'a>(&'a self, balancer: &'a str, key: Option<&'a [u8]>) -> Request<'a> {
        Request {
            derived: self.derived.as_ref(),
            ..Request::new(balancer, key, self.version)
        }
    }

    /// The members' views, in the order of [`as_slice`](Self::as_slice).
    pub fn views(&self) -> &[MemberView] {
        &self.views
    }

    /// The members, sorted by node name (an actor group's: by node name, then pid).
    pub fn as_slice(&self) -> &[Member] {
        &self.members
    }

    /// Node names of the members, sorted (an actor group's: a node once per actor).
    pub fn nodes(&self) -> Vec<String> {
        self.members.iter().map(|m| m.node().to_string()).collect()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Identifies the snapshot within its balancer: increasing with every snapshot the
    /// balancer publishes (from 1; 0 for an empty list of a balancer that stopped), so a
    /// selector can key what it derives from a list on it
    /// ([`Request::version`](crate::routing::Request::version)).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The member on `node`, if any (an actor group's: the first actor on `node`).
    pub fn get(&self, node: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.node() == node)
    }

    /// Whether `node` is a member.
    pub fn contains(&self, node: &str) -> bool {
        self.members.iter().any(|m| m.node() == node)
    }

    /// Whether a member has [id](MemberView::id) `id` (for a balancer: whether node `id` is
    /// a member).
    pub(crate) fn contains_id(&self, id: &str) -> bool {
        self.views.iter().any(|m| m.id() == id)
    }
}

#[cfg(test)]
mod tests;
