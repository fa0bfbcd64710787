//! The members snapshot: the nodes a balancer can route to, deduplicated by node and sorted by
//! node name, so every caller on every node indexes the same list. Built by the LoadBalancer
//! actor on each membership change and read lock-free by callers.

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
    /// restarted).
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
        f.debug_struct("Member")
            .field("node", &self.node())
            .field("local", &self.is_local())
            .finish()
    }
}

/// A balancer's members at one moment: sorted by node name, one entry per node.
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
        for member in &mut members {
            member.selected = metrics.member_counter(member.node_arc());
            let id = member.id();
            if let Some(kept) = previous.as_slice().iter().find(|m| m.id() == id) {
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

    /// The members, sorted by node name.
    pub fn as_slice(&self) -> &[Member] {
        &self.members
    }

    /// Node names of the members, sorted.
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

    /// The member on `node`, if any.
    pub fn get(&self, node: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.node() == node)
    }

    /// Whether `node` is a member.
    pub fn contains(&self, node: &str) -> bool {
        self.members.iter().any(|m| m.node() == node)
    }
}

#[cfg(test)]
mod tests;
