//! The Poller: one actor per LeastCpu balancer that fetches its remote members' CPU readings
//! into the process-wide cache on fixed-rate ticks.
//!
//! Each tick asks every remote member's node for its own reading (a `Control` request every
//! node answers), all at once, [`REMOTE_TIMEOUT`] each, so a cycle is bounded whatever the
//! cluster size. Cycles run beside the Poller, not in it: a node that does not answer holds up
//! neither the ticks nor the other nodes' readings, and is skipped by later cycles until its
//! outstanding request ends. A reading is stored with the age the remote reported. A member
//! whose replies brought a reading (their load reports) less than a poll interval ago is not
//! asked: calls that flow keep readings fresh without polls. Failures are events and
//! metrics, by kind: `timeout`, `unreachable`, `remote_error`, `bad_reply`; they never stop the
//! Poller. Sampling is not the Poller's job: every node samples itself (see [`crate::cpu`]).

mod cycle;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use rand::Rng as _;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::balancer::Child;
use crate::node::shared::NodeShared;
use crate::routing::CpuPolling;
use crate::telemetry::PollMetrics;
use crate::{Error, Node};

/// The target of the Poller's spans and events (where the module lived before it moved into
/// the balancer layer: log filters keep working).
const TARGET: &str = "rpc_load_balancer::cpu::poller";

/// How long one remote reading may take.
pub const REMOTE_TIMEOUT: Duration = Duration::from_millis(2_000);
/// The Poller actor's registered name for balancer `balancer`.
pub(crate) fn poller_name(balancer: &str) -> String {
    format!("rpc_load_balancer/{balancer}/cpu_poller")
}

/// The Poller child of balancer `balancer`.
pub(crate) fn child(balancer: &str, options: CpuPolling) -> Child {
    let balancer = balancer.to_string();
    Child {
        name: poller_name(&balancer),
        // Only the balancer's first Poller waits out the startup jitter: a restarted one polls
        // at once, so a crash does not leave readings stale for up to the jitter.
        spawn: Arc::new({
            let restarted = Arc::new(std::sync::atomic::AtomicBool::new(false));
            move |supervisor: ActorCell| {
                let balancer = balancer.clone();
                let restart = restarted.swap(true, std::sync::atomic::Ordering::AcqRel);
                Box::pin(async move {
                    let node = Node::current().ok_or_else(|| {
                        ractor::SpawnErr::StartupFailed("no node runs in this process".into())
                    })?;
                    let args = PollerArgs {
                        node: node.shared(),
                        metrics: PollMetrics::new(&balancer),
                        balancer: balancer.clone(),
                        group: None,
                        options,
                        restart,
                    };
                    let (actor, _) =
                        Actor::spawn_linked(Some(poller_name(&balancer)), Poller, args, supervisor)
                            .await?;
                    Ok(actor.get_cell())
                })
            }
        }),
    }
}

/// Starts the Poller of an actor group (whose state is `group`), linked to `supervisor` (the
/// group's watcher), unnamed: an actor group is no balancer of the node's registry.
pub(crate) async fn spawn_for_group(
    group: Arc<super::BalancerShared>,
    options: CpuPolling,
    restart: bool,
    supervisor: ActorCell,
) -> Result<ActorCell, ractor::SpawnErr> {
    let args = PollerArgs {
        node: Arc::clone(&group.node),
        metrics: PollMetrics::new(&group.name),
        balancer: group.name.clone(),
        group: Some(group),
        options,
        restart,
    };
    let (actor, _) = Actor::spawn_linked(None, Poller, args, supervisor).await?;
    Ok(actor.get_cell())
}

/// Makes balancer `balancer`'s Poller fail (admin control, to test its restart): it panics
/// while handling the request, and its balancer's supervisor restarts it alone.
///
/// Errors: [`Error::InvalidConfig`] (`balancer`) if no Poller of that balancer runs on this
/// node: it is not a LeastCpu balancer here, or its Poller is restarting.
pub(crate) fn crash(balancer: &str) -> Result<(), Error> {
    let unknown = || {
        Error::InvalidConfig {
        option: "balancer",
        reason: format!(
            "no LeastCpu Poller of balancer {balancer} runs on this node (not started here, not LeastCpu, or its Poller is restarting)"
        ),
    }
    };
    let cell = ractor::registry::where_is(poller_name(balancer)).ok_or_else(unknown)?;
    ActorRef::<PollerMsg>::from(cell)
        .cast(PollerMsg::Crash)
        .map_err(|_| unknown())
}

/// Messages of the Poller.
#[derive(Debug, ractor_cluster::RactorMessage)]
pub(crate) enum PollerMsg {
    /// Poll now and schedule the next tick.
    Tick,
    /// The balancer's members changed: poll the ones without a request outstanding now,
    /// so a member that joins between ticks has a reading before the next tick.
    MembersChanged,
    /// Fail (admin control).
    Crash,
}

struct Poller;

struct PollerArgs {
    node: Arc<NodeShared>,
    metrics: PollMetrics,
    balancer: String,
    /// An actor group's state, whose members it polls (`None`: the balancer named `balancer`
    /// in the node's registry).
    group: Option<Arc<super::BalancerShared>>,
    options: CpuPolling,
    /// A restart (not the balancer's first Poller): no startup jitter.
    restart: bool,
}

struct PollerState {
    args: Arc<PollerArgs>,
    /// Nodes with a reading request outstanding.
    pending: Arc<Mutex<HashSet<Arc<str>>>>,
    /// The running cycles (aborted when the Poller stops or fails).
    cycles: JoinSet<()>,
    /// Forwards membership changes as [`PollerMsg::MembersChanged`] (from the first tick on).
    watcher: Option<tokio::task::JoinHandle<()>>,
    /// When the current tick was due (ticks are at fixed offsets from the first).
    due: Instant,
}

impl Drop for PollerState {
    fn drop(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
    }
}

impl Actor for Poller {
    type Msg = PollerMsg;
    type State = PollerState;
    type Arguments = PollerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<PollerMsg>,
        args: PollerArgs,
    ) -> Result<PollerState, ActorProcessingErr> {
        // The first poll after a uniform random delay in [0, jitter], spreading a whole
        // cluster's first polls; later ones at a fixed rate.
        let jitter = args.options.poll_startup_jitter.as_millis() as u64;
        let delay = Duration::from_millis(if jitter == 0 || args.restart {
            0
        } else {
            rand::rng().random_range(0..=jitter)
        });
        myself.send_after(delay, || PollerMsg::Tick);
        Ok(PollerState {
            args: Arc::new(args),
            pending: Arc::default(),
            cycles: JoinSet::new(),
            watcher: None,
            due: crate::deadline::after(delay).into_std(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<PollerMsg>,
        message: PollerMsg,
        state: &mut PollerState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            PollerMsg::Crash => {
                panic!(
                    "LeastCpu poller of {} crashed on request",
                    state.args.balancer
                )
            }
            PollerMsg::MembersChanged => state.start_cycle(),
            PollerMsg::Tick => {
                state.watch_members(&myself);
                state.start_cycle();
                // Never zero (the balancer refuses a zero interval at start; a floor keeps
                // this loop finite whatever it is given).
                let interval = state
                    .args
                    .options
                    .poll_interval
                    .max(Duration::from_millis(1));
                let now = Instant::now();
                state.due += interval;
                while state.due <= now {
                    // Ticks missed by a slow cycle are skipped, keeping the phase.
                    state.due += interval;
                }
                myself.send_after(state.due - now, || PollerMsg::Tick);
            }
        }
        Ok(())
    }
}

impl PollerState {
    /// Once the balancer is registered: forwards its membership changes to the Poller.
    fn watch_members(&mut self, myself: &ActorRef<PollerMsg>) {
        if self.watcher.is_some() {
            return;
        }
        let mut changes = match &self.args.group {
            Some(group) => group.member_changes(),
            None => match self.args.node.balancers.entry(&self.args.balancer) {
                Ok(balancer) => balancer.member_changes(),
                Err(_) => return,
            },
        };
        let poller = myself.clone();
        self.watcher = Some(tokio::spawn(async move {
            while changes.next().await.is_some() {
                if poller.cast(PollerMsg::MembersChanged).is_err() {
                    return;
                }
            }
        }));
    }

    /// Starts a cycle over the remote members that have no request outstanding.
    fn start_cycle(&mut self) {
        while self.cycles.try_join_next().is_some() {}
        // Before the balancer is registered (a first tick at once) there is nothing to poll.
        let remote = match &self.args.group {
            Some(group) => group.remote_member_nodes(),
            None => match self.args.node.balancers.entry(&self.args.balancer) {
                Ok(balancer) => balancer.remote_member_nodes(),
                Err(_) => return,
            },
        };
        // A member whose replies brought a reading within the poll interval (load reports)
        // is not asked: its reading is fresher than a poll would make it.
        // (And only while it stays within its TTL until the next tick.)
        let heard = self.args.options.poll_interval.as_millis() as u64;
        let ttl = self.args.options.cpu_cache_ttl.as_millis() as u64;
        let cache = crate::cpu::cache();
        let mut skipped = 0;
        let nodes: Vec<Arc<str>> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            remote
                .into_iter()
                .filter(|node| **node != *self.args.node.name)
                .filter(|node| {
                    let fresh = cache
                        .get(node)
                        .is_some_and(|r| r.age_ms < heard && r.age_ms + heard < ttl);
                    skipped += usize::from(fresh);
                    !fresh
                })
                .filter(|node| pending.insert(Arc::clone(node)))
                .collect()
        };
        let span = tracing::debug_span!(target: TARGET, "rpc_load_balancer.least_cpu.poll", load_balancer = %self.args.balancer, members = nodes.len(), heard = skipped, failures = tracing::field::Empty);
        let cycle = cycle::run(Arc::clone(&self.args), nodes, Arc::clone(&self.pending));
        self.cycles.spawn(cycle.instrument(span));
    }
}
