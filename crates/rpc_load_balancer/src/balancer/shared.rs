//! State of one balancer shared by its handle, its actors and its callers: the members
//! snapshot (read lock-free), the algorithm and the node.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use tokio::sync::watch;

use super::drain::DrainReport;
use super::in_flight::InFlightTotal;
use super::members::{Member, Members};
use super::{Balancer, BalancerConfig};
use crate::algorithm::{NodeChange, SelectionRequest};
use crate::node::shared::NodeShared;
use crate::telemetry::SelectionMetrics;
use crate::wire::SCOPE;
use crate::Error;

/// The next members snapshot's version, process-wide (0 is never used).
static NEXT_VERSION: AtomicU64 = AtomicU64::new(1);

pub(crate) struct BalancerShared {
    pub(crate) name: String,
    pub(crate) config: BalancerConfig,
    pub(crate) node: Arc<NodeShared>,
    /// Whether this node joins the group (it matches `node_match_list`).
    pub(crate) member: bool,
    members: ArcSwap<Members>,
    members_watch: watch::Sender<Arc<Members>>,
    version: AtomicU64,
    /// Set when a stop begins, or when the actors are found gone without one: from then on
    /// the balancer routes nothing.
    pub(crate) stopping: AtomicBool,
    /// The report of the stop, once it has finished (a second stop waits for it and returns
    /// it too); a [`DrainOutcome::Killed`](super::DrainOutcome::Killed) report when the actors
    /// ended without a stop.
    pub(crate) stopped: watch::Sender<Option<DrainReport>>,
    /// Once this balancer's actors have ended: the balancer started under its name on this
    /// node since, as last looked up (handles follow it; see [`Balancer`]'s docs).
    pub(crate) successor: ArcSwapOption<Balancer>,
    pub(crate) metrics: SelectionMetrics,
    /// Selections in flight on this node (every guard).
    pub(crate) in_flight: InFlightTotal,
    /// Calls and casts routed through this balancer that this node is serving as a member.
    pub(crate) served: InFlightTotal,
    /// Fired when [`Balancer::stop`](super::Balancer::stop)'s drain gives up: the calls of
    /// this balancer still running here have their [`CallContext`](crate::CallContext)s
    /// cancelled.
    pub(crate) abandoned: Arc<crate::function::Signal>,
    /// Whether this member takes routed calls; false once its leave grace is over.
    pub(crate) accepting: AtomicBool,
    /// Whether guards also count each member's in-flight selections: only when the algorithm
    /// reads them ([`SelectionAlgorithm::counts_in_flight`](crate::SelectionAlgorithm::counts_in_flight)),
    /// so that other algorithms' selections write no memory shared between threads.
    pub(crate) counts_members: bool,
}

impl BalancerShared {
    pub(crate) fn new(config: BalancerConfig, node: Arc<NodeShared>) -> Self {
        let member = config.matches_excluding(&node.name, &node.config.excluded_node_patterns);
        let counts_members =
            config.algorithm.counts_in_flight() || config.max_in_flight_per_member.is_some();
        Self {
            in_flight: InFlightTotal::default(),
            served: InFlightTotal::default(),
            abandoned: Arc::default(),
            accepting: AtomicBool::new(true),
            counts_members,
            metrics: SelectionMetrics::new(config.algorithm.name(), &config.name),
            name: config.name.clone(),
            member,
            config,
            node,
            members: ArcSwap::default(),
            members_watch: watch::channel(Arc::new(Members::default())).0,
            version: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            stopped: watch::channel(None).0,
            successor: ArcSwapOption::empty(),
        }
    }

    /// `Err(UnknownBalancer)` once the balancer is stopped: its handles no longer route.
    pub(crate) fn check_running(&self) -> Result<(), Error> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(Error::UnknownBalancer {
                balancer: self.name.clone(),
            });
        }
        Ok(())
    }

    /// Wakes everything waiting on the members watch (the balancer begins to stop).
    pub(crate) fn notify_stopping(&self) {
        self.members_watch.send_modify(|_| {});
    }

    /// Waits (at most `bound`) until no connected peer lists this node among the balancer's
    /// members: after that no peer selects it any more.
    pub(crate) async fn wait_until_peers_saw_leave(&self, bound: std::time::Duration) {
        let node = &self.node;
        let me = node.name.clone();
        let peers: Vec<String> = node.peers.names();
        let checks = peers.iter().map(|peer| {
            let me = me.clone();
            async move {
                let request = crate::control::ControlRequest::Members(self.name.clone());
                loop {
                    match crate::call::control(node, peer, &request, bound).await {
                        Ok(crate::control::ControlReply::Members(Some(list)))
                            if list.contains(&me) =>
                        {
                            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        }
                        // Not listed, no such balancer there, or unreachable: done.
                        _ => return,
                    }
                }
            }
        });
        let _ = tokio::time::timeout(bound, futures_util::future::join_all(checks)).await;
    }

    /// The balancer's actors are gone without a drain (killed, or stopped after too many
    /// restarts): it routes nothing more, forgets its members (waits on them end now), gets a
    /// [`DrainOutcome::Killed`](super::DrainOutcome::Killed) report and frees its name on the
    /// node (unless a new balancer holds it already). Nothing when a stop has begun: that stop
    /// does all this and reports. Logged at WARN when calls were still in flight (they may
    /// fail), else at DEBUG (e.g. a program that ends without `stop()` lost nothing).
    pub(crate) fn end_without_drain(self: &Arc<Self>) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        let (routed, served) = (self.in_flight.get(), self.served.get());
        if routed == 0 && served == 0 {
            tracing::debug!(balancer = %self.name, routed, served, "balancer actors ended without a drain");
        } else {
            tracing::warn!(balancer = %self.name, routed, served, "balancer actors ended without a drain");
        }
        self.stopped
            .send_replace(Some(DrainReport::killed(&self.name, routed, served)));
        self.clear();
        self.node.balancers.release(&self.name, self);
    }

    /// Forgets the members (at stop).
    pub(crate) fn clear(&self) {
        let empty = Arc::new(Members::default());
        self.members.store(Arc::clone(&empty));
        self.members_watch.send_replace(empty);
    }

    /// The current members.
    pub(crate) fn members(&self) -> Arc<Members> {
        self.members.load_full()
    }

    pub(crate) fn watch(&self) -> watch::Receiver<Arc<Members>> {
        self.members_watch.subscribe()
    }

    /// Rebuilds the snapshot from pg (the truth), tells the algorithm what changed, and
    /// publishes it. Called by the LoadBalancer actor only (one writer).
    pub(crate) fn refresh(&self) {
        let cells = ractor::pg::get_scoped_members(&SCOPE.to_string(), &self.name);
        // Versions are unique in the process, not per balancer: an algorithm instance shared
        // by two balancers never takes one's cached schedule or ring for the other's.
        let version = NEXT_VERSION.fetch_add(1, Ordering::Relaxed);
        let first = self.version.swap(version, Ordering::Relaxed) == 0;
        let previous = self.members.load();
        let next = Members::from_cells(&self.metrics, version, &cells, &previous);
        let before: HashSet<&str> = previous.as_slice().iter().map(Member::node).collect();
        let after: HashSet<&str> = next.as_slice().iter().map(Member::node).collect();
        let joined: Vec<Arc<str>> = next
            .as_slice()
            .iter()
            .filter(|m| !before.contains(m.node()))
            .map(|m| Arc::clone(m.node_arc()))
            .collect();
        let left: Vec<Arc<str>> = previous
            .as_slice()
            .iter()
            .filter(|m| !after.contains(m.node()))
            .map(|m| Arc::clone(m.node_arc()))
            .collect();
        let same_actors = previous.len() == next.len()
            && previous
                .as_slice()
                .iter()
                .zip(next.as_slice())
                .all(|(a, b)| a.id() == b.id());
        if same_actors && !first {
            return;
        }
        // Every published snapshot is announced (also when only a member's actor changed), so
        // algorithms can key what they derive on the snapshot's version.
        self.config.algorithm.on_node_change(&NodeChange {
            balancer: &self.name,
            joined: &joined,
            left: &left,
            members: next.as_slice(),
            version,
        });
        tracing::debug!(balancer = %self.name, members = next.len(), ?joined, ?left, "members changed");
        self.metrics.pool_changed(next.len());
        let next = Arc::new(next);
        self.members.store(Arc::clone(&next));
        self.members_watch.send_replace(next);
    }

    /// Picks a member for a call, skipping `exclude` (members a send just failed to reach):
    /// the snapshot it was picked from and its index there.
    ///
    /// Errors: [`Error::UnknownBalancer`] once the balancer is stopped; [`Error::NoMembers`];
    /// the algorithm's own errors.
    pub(crate) fn choose(
        &self,
        key: Option<&[u8]>,
        exclude: &[Arc<str>],
    ) -> Result<(Guard<Arc<Members>>, usize), Error> {
        self.check_running()?;
        // A guard, not a clone: no reference count shared between threads is written.
        let snapshot = self.members.load();
        let request = SelectionRequest {
            balancer: &self.name,
            key,
            version: snapshot.version(),
        };
        let index = if exclude.iter().any(|node| snapshot.contains(node)) {
            self.pick_excluding(&snapshot, exclude, &request)?
        } else {
            self.pick(snapshot.as_slice(), &request)?
        };
        Ok((snapshot, index))
    }

    /// Runs the algorithm over `list` and records the pick.
    #[inline]
    fn pick(&self, list: &[Member], request: &SelectionRequest<'_>) -> Result<usize, Error> {
        let algorithm = &*self.config.algorithm;
        if list.is_empty() {
            self.metrics.empty();
            return Err(Error::NoMembers {
                balancer: self.name.clone(),
            });
        }
        let index = algorithm.choose_from_nodes(list, request)?;
        if index >= list.len() {
            return Err(Error::InvalidConfig {
                option: "algorithm",
                reason: format!(
                    "{} chose member {index} of {}",
                    algorithm.name(),
                    list.len()
                ),
            });
        }
        self.metrics.selected(algorithm, list, index, request);
        Ok(index)
    }

    /// Rare (a send just failed): picks among the members not in `exclude`, and returns the
    /// pick's index in the whole snapshot.
    #[cold]
    fn pick_excluding(
        &self,
        snapshot: &Members,
        exclude: &[Arc<str>],
        request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        let rest: Vec<Member> = snapshot
            .as_slice()
            .iter()
            .filter(|m| !exclude.iter().any(|node| **node == *m.node()))
            .cloned()
            .collect();
        // Not the snapshot's list: nothing an algorithm cached for the snapshot applies.
        let request = SelectionRequest {
            version: SelectionRequest::UNCACHED,
            ..*request
        };
        let chosen = rest[self.pick(&rest, &request)?].node().to_string();
        Ok(snapshot
            .as_slice()
            .iter()
            .position(|m| m.node() == chosen)
            .unwrap_or(0))
    }
}
