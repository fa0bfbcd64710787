//! State of one balancer shared by its handle, its actors and its callers: the members
//! snapshot (read lock-free), its selector and the node.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use ractor::ActorRef;
use tokio::sync::watch;

use super::drain::DrainReport;
use super::ejection_metrics::EjectionMetrics;
use super::in_flight::InFlightTotal;
use super::keeper::KeeperMsg;
use super::members::Members;
use super::selection_metrics::SelectionMetrics;
use super::{Balancer, BalancerConfig, Releaser};
use crate::node::shared::NodeShared;
use crate::routing::{
    BuildContext, Change, Clock, Ejecting, MemberView, Needs, Ramping, Request, Selector,
};
use crate::wire::SCOPE;
use crate::Error;

/// Where a balancer's members come from.
pub(crate) enum Source {
    /// The balancer's own pg group (scope `rpc_load_balancer`, group = its name): one member
    /// actor per node, named after the node.
    OwnGroup,
    /// A user's pg group of actors (an `ActorGroup`): every
    /// actor in it whose node is known and matches the filters is a member.
    ActorGroup {
        /// The group's pg scope.
        scope: String,
        /// The group's name in that scope.
        group: String,
    },
}

pub(crate) struct BalancerShared {
    pub(crate) name: String,
    /// Where the members come from.
    pub(crate) source: Source,
    pub(crate) config: BalancerConfig,
    pub(crate) node: Arc<NodeShared>,
    /// Whether this node joins the group (it matches `node_match_list`).
    pub(crate) member: bool,
    members: ArcSwap<Members>,
    members_watch: watch::Sender<Arc<Members>>,
    /// The last published snapshot's version (0 before the first): per balancer.
    version: AtomicU64,
    /// The balancer's own selector, built by its algorithm when it started (shared with the
    /// [`Releaser`] of each snapshot).
    pub(crate) selector: Arc<dyn Selector>,
    /// What the views keep for the algorithm ([`Algorithm::needs`](crate::routing::Algorithm::needs)).
    pub(crate) needs: Needs,
    /// Whether the selector learns from call outcomes ([`Selector::learns`]): only then does
    /// the call path read the clock and report outcomes.
    pub(crate) learns: bool,
    /// Whether it also observes selections that ended without a result
    /// ([`Selector::observes_cancelled`]).
    observes_cancelled: bool,
    /// The selector's outlier ejection, when the balancer has it on (for its counts).
    pub(crate) ejection: Option<Arc<Ejecting>>,
    /// The clock the selector reads (outcome latencies are measured on it).
    pub(crate) clock: Clock,
    /// This balancer's `cpu_cache_ttl` registered with the node's CPU cache, if its
    /// algorithm needs readings (unregistered when this state is dropped).
    _cpu_ttl: Option<CpuTtl>,
    /// Set when a stop or a drain begins, or when the balancer's actor is found gone: from
    /// then on the balancer routes nothing.
    pub(crate) stopping: AtomicBool,
    /// Set by whoever takes on ending the balancer ([`BalancerShared::claim_end`]): a stop,
    /// the drain after its actor ended, or an end without drain. Only one does.
    ended: AtomicBool,
    /// The node-owned keeper of the member actor (set once the balancer has started).
    keeper: OnceLock<ActorRef<KeeperMsg>>,
    /// The report of the stop, once it has finished (a second stop waits for it and returns
    /// it too); a [`DrainOutcome::Killed`](super::DrainOutcome::Killed) report when the actors
    /// ended without a stop.
    pub(crate) stopped: watch::Sender<Option<DrainReport>>,
    /// Once this balancer's actors have ended: the balancer started under its name on this
    /// node since, as last looked up (handles follow it; see [`Balancer`]'s docs).
    pub(crate) successor: ArcSwapOption<Balancer>,
    pub(crate) metrics: Arc<SelectionMetrics>,
    /// Selections in flight on this node (every guard).
    pub(crate) in_flight: Arc<InFlightTotal>,
    /// Calls and casts routed through this balancer that this node is serving as a member.
    pub(crate) served: InFlightTotal,
    /// Fired when [`Balancer::stop`](super::Balancer::stop)'s drain gives up: the calls of
    /// this balancer still running here have their [`CallContext`](crate::CallContext)s
    /// cancelled.
    pub(crate) abandoned: Arc<crate::function::Signal>,
    /// Whether this member takes routed calls; false once its leave grace is over.
    pub(crate) accepting: AtomicBool,
    /// Whether guards also count each member's in-flight selections: only when the algorithm
    /// needs them ([`Needs::in_flight`]) or the balancer caps them, so that other algorithms'
    /// selections write no memory shared between threads.
    pub(crate) counts_members: bool,
    /// Held by [`refresh`](Self::refresh): the LoadBalancer actor and, with locality, the task
    /// that re-reads the members when a peer's labels arrive.
    refreshing: std::sync::Mutex<()>,
    /// Set once that task is started.
    labels_watched: AtomicBool,
    /// With subsetting: the nodes of this caller's subset, sorted (`None` until first
    /// computed: no member then). See `subset.rs`.
    pub(crate) subset: ArcSwapOption<Vec<String>>,
    /// Set once the task that recomputes the subset is started.
    pub(crate) subset_watched: AtomicBool,
    /// With subsetting: the longest timeout, ms, a call of this balancer was given of its own
    /// (0: none yet) — how long a session to a node that left the subset is kept is at least
    /// that (`subset.rs`). Shared with the subset task, which reads it when the balancer stops.
    pub(crate) longest_call_timeout_ms: Arc<AtomicU64>,
    /// The account of the balancer's retry budget (calls of idempotent functions).
    pub(crate) retry_budget: crate::retry::Budget,
    /// Hedged calls' state (boxed: most balancers have none, and calls that are not
    /// idempotent never look at it).
    pub(crate) hedging: Option<Box<crate::retry::Hedging>>,
    /// Time 0 of the retry and hedge budgets' clock.
    budget_epoch: tokio::time::Instant,
}

/// A `cpu_cache_ttl` registered with the node's CPU cache while it lives (its eviction keeps
/// readings as long as the largest TTL in use needs them).
struct CpuTtl(u64);

impl CpuTtl {
    fn register(ttl_ms: u64) -> Self {
        crate::cpu::cache().use_ttl(ttl_ms);
        CpuTtl(ttl_ms)
    }
}

impl Drop for CpuTtl {
    fn drop(&mut self) {
        crate::cpu::cache().unuse_ttl(self.0);
    }
}

impl BalancerShared {
    /// The state of a balancer started with `config` on `node`: builds its selector.
    ///
    /// Errors: the algorithm's [`build`](crate::routing::Algorithm::build) errors
    /// ([`Error::InvalidConfig`] naming the option).
    pub(crate) fn new(config: BalancerConfig, node: Arc<NodeShared>) -> Result<Self, Error> {
        Self::with_source(config, node, Source::OwnGroup)
    }

    /// The state of a balancer over the members of `source` (an actor group's: this node is
    /// no member; it has no member actor).
    ///
    /// Errors: as [`BalancerShared::new`].
    pub(crate) fn with_source(
        config: BalancerConfig,
        node: Arc<NodeShared>,
        source: Source,
    ) -> Result<Self, Error> {
        let member = matches!(source, Source::OwnGroup)
            && config.matches_labeled(
                &node.name,
                Some(&node.config.labels),
                &node.config.excluded_node_patterns,
            );
        if let Some(subsetting) = &config.subsetting {
            super::subset::check(subsetting, &config, &node, &source)?;
        }
        let clock = Clock::system();
        let context = BuildContext {
            balancer: &config.name,
            clock: clock.clone(),
            seed: None,
            cpu_sample_interval: Some(node.config.cpu_sample_interval),
        };
        let mut needs = config.algorithm.needs();
        // Locality innermost: slow start and ejection look at its picks.
        let algorithm = match &config.locality {
            Some(locality) => {
                locality.check(&*config.algorithm)?;
                locality.wrap(
                    Arc::clone(&config.algorithm),
                    config.max_in_flight_per_member,
                )
            }
            None => Arc::clone(&config.algorithm),
        };
        // Slow start's options first, then ejection's, then the algorithm's (as documented).
        if let Some(options) = &config.slow_start {
            options.check(&*config.algorithm)?;
        }
        if let Some(options) = &config.outlier_ejection {
            options.validate()?;
        }
        // One of each: a wrapped algorithm and the same option would keep two records (and
        // two caps) of the same members.
        let name = config.algorithm.name();
        for (set, option, suffix) in [
            (
                config.outlier_ejection.is_some(),
                "outlier_ejection",
                crate::algorithm::EJECTION_SUFFIX,
            ),
            (
                config.slow_start.is_some(),
                "slow_start",
                crate::algorithm::SLOW_START_SUFFIX,
            ),
        ] {
            if set && name.contains(suffix) {
                return Err(Error::InvalidConfig {
                    option,
                    reason: format!(
                        "the algorithm {name} has it already; set the option or the {suffix} wrapper, not both"
                    ),
                });
            }
        }
        let built = match &config.slow_start {
            Some(options) => {
                // (Its options were checked above.)
                let inner = algorithm.build(&context)?;
                let gauge = crate::telemetry::ENABLED.then(|| {
                    metrics::gauge!(
                        crate::telemetry::MEMBERS_SLOW_START,
                        "load_balancer" => config.name.clone()
                    )
                });
                let ramping = Ramping::new(inner, options.clone(), &context).with_listener(
                    Box::new(move |count| {
                        if let Some(gauge) = &gauge {
                            gauge.set(count as f64);
                        }
                    }),
                );
                Box::new(ramping) as Box<dyn Selector>
            }
            None => algorithm.build(&context)?,
        };
        let (selector, ejection): (Arc<dyn Selector>, _) = match &config.outlier_ejection {
            Some(options) => {
                // Slow start inside, ejection outside: ejection looks at slow start's picks.
                let metrics = EjectionMetrics::new(&config.name);
                let ejecting = Arc::new(
                    Ejecting::new(
                        built,
                        options.clone(),
                        clock.clone(),
                        crate::routing::ejection_rng(context.seed),
                    )
                    .with_listener(Box::new(move |event| metrics.record(event))),
                );
                // Suspicion reads each member's calls in flight.
                needs = needs.in_flight();
                (Arc::clone(&ejecting) as Arc<dyn Selector>, Some(ejecting))
            }
            None => (Arc::from(built), None),
        };
        if let Some(polling) = &needs.cpu {
            polling.validate()?;
        }
        let learns = selector.learns();
        let observes_cancelled = learns && selector.observes_cancelled();
        let counts_members = needs.in_flight || config.max_in_flight_per_member.is_some();
        let cpu_ttl = needs
            .cpu
            .map(|cpu| CpuTtl::register(cpu.cpu_cache_ttl.as_millis() as u64));
        let retry_budget = crate::retry::Budget::new(&config.retry_budget);
        let hedging = config
            .hedge
            .map(|policy| Box::new(crate::retry::Hedging::new(policy)));
        Ok(Self {
            selector,
            ejection,
            needs,
            learns,
            observes_cancelled,
            clock,
            _cpu_ttl: cpu_ttl,
            in_flight: Arc::default(),
            served: InFlightTotal::default(),
            abandoned: Arc::default(),
            accepting: AtomicBool::new(true),
            counts_members,
            metrics: Arc::new(SelectionMetrics::new(config.algorithm.name(), &config.name)),
            name: config.name.clone(),
            source,
            member,
            config,
            node,
            members: ArcSwap::default(),
            members_watch: watch::channel(Arc::new(Members::default())).0,
            version: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            ended: AtomicBool::new(false),
            keeper: OnceLock::new(),
            stopped: watch::channel(None).0,
            successor: ArcSwapOption::empty(),
            refreshing: std::sync::Mutex::new(()),
            labels_watched: AtomicBool::new(false),
            subset: ArcSwapOption::empty(),
            subset_watched: AtomicBool::new(false),
            longest_call_timeout_ms: Arc::new(AtomicU64::new(0)),
            retry_budget,
            hedging,
            budget_epoch: tokio::time::Instant::now(),
        })
    }

    /// Now on the retry budget's clock, ns since the balancer's state was made.
    pub(crate) fn budget_now(&self) -> u64 {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.budget_epoch);
        u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
    }

    /// `Err(UnknownBalancer)` once the balancer is stopped: its handles no longer route.
    ///
    /// A selection or call counted in flight before this check either passes it, and its
    /// balancer's drain (which marks it stopping, then reads the counts) waits for it, or
    /// fails it: sequentially consistent on both sides (a plain load on x86).
    pub(crate) fn check_running(&self) -> Result<(), Error> {
        if self.stopping.load(Ordering::SeqCst) {
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

    /// Whether the balancer is stopping (or stopped): it routes nothing.
    #[inline]
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Marks the balancer stopping (its actor is gone: it routes nothing), waking what waits
    /// on it; whoever claims its end drains it.
    pub(crate) fn mark_stopping(&self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            self.notify_stopping();
        }
    }

    /// Takes on ending the balancer (a drain or an end without one): true for the first
    /// caller only. Marks it stopping.
    pub(crate) fn claim_end(&self) -> bool {
        let first = !self.ended.swap(true, Ordering::AcqRel);
        self.mark_stopping();
        first
    }

    /// Records the keeper of the member actor (once, at start).
    pub(crate) fn set_keeper(&self, keeper: ActorRef<KeeperMsg>) {
        let _ = self.keeper.set(keeper);
    }

    /// Stops the keeper (and the member with it) and waits for them (≤ 5 s).
    pub(crate) async fn stop_keeper(&self) {
        if let Some(keeper) = self.keeper.get() {
            super::child::stop_and_wait(&keeper.get_cell()).await;
        }
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
                    match crate::call::control(&node.transport, peer, &request, bound).await {
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

    /// The balancer ends without a drain (its member actor restarted too often): it routes
    /// nothing more, forgets its members (waits on them end now), gets a
    /// [`DrainOutcome::Killed`](super::DrainOutcome::Killed) report and frees its name on the
    /// node (unless a new balancer holds it already). Nothing when a stop or drain has begun:
    /// that one does all this and reports. Logged at WARN when calls were still in flight
    /// (they may fail), else at DEBUG.
    pub(crate) fn end_without_drain(self: &Arc<Self>) {
        if !self.claim_end() {
            return;
        }
        let (routed, served) = (self.in_flight.get(), self.served.get());
        if routed == 0 && served == 0 {
            tracing::debug!(balancer = %self.name, routed, served, "balancer actors ended without a drain");
        } else {
            tracing::warn!(balancer = %self.name, routed, served, "balancer actors ended without a drain");
        }
        self.clear();
        self.node.balancers.release(&self.name, self);
        // Reported last: whoever waits for it finds the name free.
        self.stopped
            .send_replace(Some(DrainReport::killed(&self.name, routed, served)));
    }

    /// What selections over the snapshots this balancer publishes need until they end.
    fn releaser(&self) -> Releaser {
        Releaser {
            selector: Arc::clone(&self.selector),
            in_flight: Arc::clone(&self.in_flight),
            metrics: Arc::clone(&self.metrics),
            counts_members: self.counts_members,
            learns: self.learns,
            observes_cancelled: self.observes_cancelled,
            clock: self.clock.clone(),
        }
    }

    /// Forgets the members (at stop).
    pub(crate) fn clear(&self) {
        let _writer = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
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

    /// The nodes of the members whose calls do not run in this process, in member order (an
    /// actor group's node once per actor there).
    pub(crate) fn remote_member_nodes(&self) -> Vec<Arc<str>> {
        self.members()
            .as_slice()
            .iter()
            .filter(|m| !m.is_local())
            .map(|m| Arc::clone(m.node_arc()))
            .collect()
    }

    /// Yields once per change of the members (joins and leaves), until this state is gone.
    pub(crate) fn member_changes(&self) -> futures_util::stream::BoxStream<'static, ()> {
        let members = self.watch();
        Box::pin(futures_util::stream::unfold(
            members,
            |mut members| async move { members.changed().await.ok().map(|()| ((), members)) },
        ))
    }

    /// With locality, or an actor group's label filter: re-reads the members whenever a
    /// peer's labels become known or are forgotten, until the balancer stops (started once,
    /// by its LoadBalancer actor or its group's watcher).
    pub(crate) fn watch_labels(self: &Arc<Self>) {
        let by_labels = match self.source {
            Source::OwnGroup => self.config.locality.is_some(),
            Source::ActorGroup { .. } => self.config.has_label_filter(),
        };
        if !by_labels || self.labels_watched.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut labels = self.node.peers.watch_labels();
        let shared = Arc::downgrade(self);
        tokio::spawn(async move {
            while labels.changed().await.is_ok() {
                match shared.upgrade() {
                    Some(shared) if shared.refresh_unless_stopping() => {}
                    _ => return,
                }
            }
        });
    }

    /// Whether the member on `node` (full name) is in this node's zone under the balancer's
    /// locality: this node's own member when it has the label, a peer's when its labels
    /// (once known) give the same value. `None` without locality.
    fn zone_of(&self) -> Option<impl Fn(&str) -> bool + '_> {
        let key = self.config.locality.as_ref()?.key();
        let own = self.node.config.labels.get(key);
        Some(move |node: &str| match own {
            None => false,
            Some(_) if node == self.node.name => true,
            Some(own) => self
                .node
                .peers
                .labels_of(node)
                .is_some_and(|labels| labels.get(key) == Some(own)),
        })
    }

    /// Rebuilds the snapshot from pg (the truth), tells the selector what changed, and
    /// publishes it. One writer at a time: the LoadBalancer actor, and with locality the
    /// labels watch.
    pub(crate) fn refresh(&self) {
        let _writer = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh_locked();
    }

    /// [`refresh`](Self::refresh) unless the balancer is stopping (checked under the writer's
    /// lock, which [`clear`](Self::clear) takes too: a stopped balancer's members stay
    /// cleared); whether it refreshed.
    pub(crate) fn refresh_unless_stopping(&self) -> bool {
        let _writer = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_stopping() {
            return false;
        }
        self.refresh_locked();
        true
    }

    fn refresh_locked(&self) {
        let cells = match &self.source {
            Source::OwnGroup => self.in_subset(ractor::pg::get_scoped_members(
                &SCOPE.to_string(),
                &self.name,
            )),
            Source::ActorGroup { scope, group } => ractor::pg::get_scoped_members(scope, group),
        };
        // Versions are per balancer: its selector is its own.
        let previous_version = self.version.load(Ordering::Relaxed);
        let (first, version) = (previous_version == 0, previous_version + 1);
        let previous = self.members.load();
        let cpu = self.needs.cpu.is_some();
        let zone = self.zone_of();
        let preferred = zone.as_ref().map(|f| f as super::members::InZone<'_>);
        let next = match &self.source {
            Source::OwnGroup => {
                Members::from_cells(&self.metrics, version, &cells, &previous, cpu, preferred)
            }
            Source::ActorGroup { .. } => {
                Members::from_group_cells(&self.metrics, version, &cells, &previous, cpu, |cell| {
                    self.group_member_node(cell)
                })
            }
        };
        // By member id (a balancer's: its node).
        let before: HashSet<&str> = previous.views().iter().map(MemberView::id).collect();
        let after: HashSet<&str> = next.views().iter().map(MemberView::id).collect();
        let joined: Vec<Arc<str>> = next
            .views()
            .iter()
            .filter(|m| !before.contains(m.id()))
            .map(|m| Arc::clone(m.id_arc()))
            .collect();
        let left: Vec<Arc<str>> = previous
            .views()
            .iter()
            .filter(|m| !after.contains(m.id()))
            .map(|m| Arc::clone(m.id_arc()))
            .collect();
        let same_actors = previous.len() == next.len()
            && previous
                .as_slice()
                .iter()
                .zip(next.as_slice())
                .all(|(a, b)| {
                    a.id() == b.id() && a.view().is_preferred() == b.view().is_preferred()
                });
        if same_actors && !first {
            return;
        }
        // Every published snapshot is announced (also when only a member's actor changed), so
        // the selector can key what it derives on the snapshot's version.
        self.version.store(version, Ordering::Relaxed);
        let change = Change {
            balancer: &self.name,
            joined: &joined,
            left: &left,
            members: next.views(),
            version,
        };
        self.selector.members_changed(&change);
        let derived = self.selector.derive(&change);
        tracing::debug!(balancer = %self.name, members = next.len(), ?joined, ?left, "members changed");
        self.metrics.pool_changed(next.len());
        let next = Arc::new(next.published(self.releaser(), derived));
        self.members.store(Arc::clone(&next));
        self.members_watch.send_replace(next);
    }

    /// Counts a selection of `members[index]`, held by a call (`limit`: the balancer's
    /// `max_in_flight_per_member`, for calls): `None` when that member is at the cap — its
    /// [id](MemberView::id), and those of the other members at the cap now, are added to
    /// `exclude`: pick again.
    ///
    /// Errors: [`Error::Overloaded`] when every member of the snapshot is in `exclude`.
    #[inline]
    pub(crate) fn count_capped(
        &self,
        members: Guard<Arc<Members>>,
        index: usize,
        limit: Option<usize>,
        exclude: &mut Vec<Arc<str>>,
    ) -> Result<Option<super::Selection>, Error> {
        match limit {
            None => Ok(Some(super::Selection::new(members, index))),
            Some(limit) if members.as_slice()[index].try_acquire(limit) => {
                Ok(Some(super::Selection::acquired(members, index)))
            }
            Some(limit) => {
                // At the cap: skip it and, in the same pass, every other member at the cap
                // now (one pick again, not one per full member: with hundreds of actors at
                // the cap a call would otherwise pick hundreds of times); then another member
                // under it, or refuse at once.
                let full = &members.views()[index];
                exclude.push(Arc::clone(full.id_arc()));
                let mut all_full = true;
                for member in members.views() {
                    if exclude.iter().any(|id| **id == *member.id()) {
                        continue;
                    }
                    if member.in_flight() >= limit {
                        exclude.push(Arc::clone(member.id_arc()));
                    } else {
                        all_full = false;
                    }
                }
                if all_full {
                    return Err(Error::Overloaded {
                        balancer: self.name.clone(),
                        node: full.node().to_string(),
                        limit,
                    });
                }
                Ok(None)
            }
        }
    }

    /// Waits until there are at least `count` members, at most `timeout`, and returns that
    /// snapshot (at once if there are already enough).
    ///
    /// Errors: [`Error::NoMembers`] if fewer are there at the deadline;
    /// [`Error::UnknownBalancer`] once stopped.
    pub(crate) async fn wait_for_members(
        &self,
        count: usize,
        timeout: std::time::Duration,
    ) -> Result<Arc<Members>, Error> {
        self.check_running()?;
        let mut members = self.watch();
        let reached = tokio::time::timeout(
            timeout,
            members.wait_for(|m| m.len() >= count || self.stopping.load(Ordering::Acquire)),
        )
        .await;
        self.check_running()?;
        match reached {
            Ok(Ok(members)) => Ok(Arc::clone(&members)),
            _ => Err(Error::NoMembers {
                balancer: self.name.clone(),
            }),
        }
    }

    /// The node (full name), pid there and locality of an actor group's `cell`, if its node is
    /// known (a remote actor's session is authenticated) and matches the group's filters.
    fn group_member_node(&self, cell: &ractor::ActorCell) -> Option<(Arc<str>, u64, bool)> {
        let (node, pid, local) = match cell.get_id() {
            ractor::ActorId::Local(pid) => (Arc::from(self.node.name.as_str()), pid, true),
            ractor::ActorId::Remote { node_id, pid } => {
                (self.node.peers.session_node(node_id)?, pid, false)
            }
        };
        // A peer's labels are looked up (a lock and a clone) only for a label filter.
        let peer_labels = (!local && self.config.has_label_filter())
            .then(|| self.node.peers.labels_of(&node))
            .flatten();
        let labels = match local {
            true => Some(&self.node.config.labels),
            false => peer_labels.as_ref(),
        };
        let excluded = &self.node.config.excluded_node_patterns;
        self.config
            .matches_labeled(&node, labels, excluded)
            .then_some((node, pid, local))
    }

    /// Picks a member for a call, skipping `exclude` (members a send just failed to reach, by
    /// [member id](MemberView::id): for a balancer, their nodes):
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
        let request = snapshot.request(&self.name, key);
        let index = if exclude.iter().any(|id| snapshot.contains_id(id)) {
            self.pick_excluding(&snapshot, exclude, &request)?
        } else {
            self.pick(snapshot.views(), &request)?
        };
        if let Some(member) = snapshot.as_slice().get(index) {
            self.metrics.selected(member.selected_counter());
        }
        Ok((snapshot, index))
    }

    /// Runs the selector over `list` (checking its answer) and traces the pick.
    #[inline]
    fn pick(&self, list: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        if list.is_empty() {
            self.metrics.empty();
            return Err(Error::NoMembers {
                balancer: self.name.clone(),
            });
        }
        let index = self.selector.pick(list, request)?;
        self.checked(list, request, index)
    }

    /// `index` if it is in range of `list` (the pick is traced), else the typed error.
    #[inline]
    fn checked(
        &self,
        list: &[MemberView],
        request: &Request<'_>,
        index: usize,
    ) -> Result<usize, Error> {
        if index >= list.len() {
            return Err(Error::InvalidConfig {
                option: "algorithm",
                reason: format!(
                    "{} chose member {index} of {}",
                    self.config.algorithm.name(),
                    list.len()
                ),
            });
        }
        self.metrics.explain(&*self.selector, list, index, request);
        Ok(index)
    }

    /// Rare (a send just failed, a call was refused, a hedge): re-selects
    /// ([`Selector::repick`]) among the members not in `exclude`, and returns the pick's index
    /// in the whole snapshot.
    #[cold]
    fn pick_excluding(
        &self,
        snapshot: &Members,
        exclude: &[Arc<str>],
        request: &Request<'_>,
    ) -> Result<usize, Error> {
        let rest: Vec<MemberView> = snapshot
            .views()
            .iter()
            .filter(|m| !exclude.iter().any(|id| **id == *m.id()))
            .cloned()
            .collect();
        // Not the snapshot's list: nothing the selector derived for the snapshot applies.
        let request = Request::new(request.balancer, request.key, Request::UNCACHED);
        if rest.is_empty() {
            self.metrics.empty();
            return Err(Error::NoMembers {
                balancer: self.name.clone(),
            });
        }
        // The selector's re-selection (RoundRobin keeps a turn of its own for it).
        let index = self.selector.repick(&rest, &request)?;
        let chosen = rest[self.checked(&rest, &request, index)?].id().to_string();
        Ok(snapshot
            .views()
            .iter()
            .position(|m| m.id() == chosen)
            .unwrap_or(0))
    }
}
