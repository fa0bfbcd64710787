//! The Poller: one actor per LeastCpu balancer that fetches its remote members' CPU readings
//! into the process-wide cache on fixed-rate ticks.
//!
//! Each tick asks every remote member's node for its own reading (a `Control` request every
//! node answers), all at once, [`REMOTE_TIMEOUT`] each, so a cycle is bounded whatever the
//! cluster size. Cycles run beside the Poller, not in it: a node that does not answer holds up
//! neither the ticks nor the other nodes' readings, and is skipped by later cycles until its
//! outstanding request ends. A reading is stored with the age the remote reported. Failures are events and
//! metrics, by kind: `timeout`, `unreachable`, `remote_error`, `bad_reply`; they never stop the
//! Poller. Sampling is not the Poller's job: every node samples itself (see [`crate::cpu`]).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::StreamExt as _;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use rand::Rng as _;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::balancer::Child;
use crate::control::{ControlReply, ControlRequest};
use crate::node::shared::NodeShared;
use crate::routing::CpuPolling;
use crate::telemetry::PollMetrics;
use crate::{Error, Node};

/// The target of the Poller's spans and events (where the module lived before it moved into
/// the balancer layer: log filters keep working).
const TARGET: &str = "rpc_load_balancer::cpu::poller";

/// How long one remote reading may take.
pub const REMOTE_TIMEOUT: Duration = Duration::from_millis(2_000);

/// When a node has no reading yet, how soon it is asked again (within the poll interval).
const NO_READING_RETRY: Duration = Duration::from_millis(500);
/// How many times one cycle asks a node that has no reading yet.
const NO_READING_ASKS: u32 = 6;

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

/// The kind of a failed remote reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// No reply within [`REMOTE_TIMEOUT`].
    Timeout,
    /// No session to the node, or it went away.
    Unreachable,
    /// The node answered with an error.
    RemoteError,
    /// The reply did not decode, or was not a CPU reading.
    BadReply,
}

impl FailureKind {
    /// The `kind` label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Unreachable => "unreachable",
            Self::RemoteError => "remote_error",
            Self::BadReply => "bad_reply",
        }
    }

    fn of(error: &Error) -> Self {
        match error {
            Error::RequestTimeout { .. } => Self::Timeout,
            Error::ServiceUnavailable { .. } | Error::ConnectFailed { .. } => Self::Unreachable,
            Error::Codec { .. } | Error::WireVersion { .. } | Error::PayloadTooLarge { .. } => {
                Self::BadReply
            }
            _ => Self::RemoteError,
        }
    }
}

impl PollerState {
    /// Once the balancer is registered: forwards its membership changes to the Poller.
    fn watch_members(&mut self, myself: &ActorRef<PollerMsg>) {
        if self.watcher.is_some() {
            return;
        }
        let Ok(balancer) = self.args.node.balancers.entry(&self.args.balancer) else {
            return;
        };
        let mut changes = balancer.member_changes();
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
        let Ok(balancer) = self.args.node.balancers.entry(&self.args.balancer) else {
            return;
        };
        let nodes: Vec<Arc<str>> = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            balancer
                .remote_member_nodes()
                .into_iter()
                .filter(|node| **node != *self.args.node.name)
                .filter(|node| pending.insert(Arc::clone(node)))
                .collect()
        };
        let span = tracing::debug_span!(target: TARGET, "rpc_load_balancer.least_cpu.poll", load_balancer = %self.args.balancer, members = nodes.len(), failures = tracing::field::Empty);
        let cycle = cycle(Arc::clone(&self.args), nodes, Arc::clone(&self.pending));
        self.cycles.spawn(cycle.instrument(span));
    }
}

/// One poll cycle: every node's reading, concurrently, each stored as it arrives.
async fn cycle(
    args: Arc<PollerArgs>,
    nodes: Vec<Arc<str>>,
    pending: Arc<Mutex<HashSet<Arc<str>>>>,
) {
    let started = Instant::now();
    let fetches = nodes.iter().map(|node| {
        let (args, pending) = (&args, &pending);
        async move {
            let request = ControlRequest::CpuReading;
            let mut reply =
                crate::call::control(&args.node.transport, node, &request, REMOTE_TIMEOUT).await;
            // A node that has no reading yet (it just started), or whose endpoint is not known
            // here yet (it just joined), is asked again soon, a few times within the poll
            // interval, not only at the next tick.
            let mut asked = 1;
            let patience = crate::deadline::after(args.options.poll_interval).into_std();
            while not_yet(&reply)
                && asked < NO_READING_ASKS
                && Instant::now() + NO_READING_RETRY < patience
            {
                tokio::time::sleep(NO_READING_RETRY).await;
                reply = crate::call::control(&args.node.transport, node, &request, REMOTE_TIMEOUT)
                    .await;
                asked += 1;
            }
            let failed = record(args, node, reply);
            pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(node);
            failed
        }
    });
    let failures = join_all(fetches).await.into_iter().filter(|f| *f).count();
    tracing::Span::current().record("failures", failures);
    crate::cpu::cache().evict();
    // A cycle with nobody to ask (a balancer of this node alone) measured nothing.
    if !nodes.is_empty() {
        args.metrics.polled(started.elapsed());
    }
}

/// Stores a reading or records the failure; `true` for a failure.
fn record(args: &PollerArgs, node: &str, reply: Result<ControlReply, Error>) -> bool {
    let (kind, error) = match reply {
        Ok(ControlReply::CpuReading(Some(reading))) if valid(reading.cpu) => {
            crate::cpu::cache().store(node, reading.cpu, reading.age_ms);
            tracing::debug!(target: TARGET, load_balancer = %args.balancer, node = %node, cpu = reading.cpu, age_ms = reading.age_ms, "cpu reading");
            return false;
        }
        Ok(ControlReply::CpuReading(None)) => {
            // The node has not sampled yet (or its samples fail): not an error here; its
            // old reading, if any, keeps aging.
            tracing::debug!(target: TARGET, load_balancer = %args.balancer, node = %node, "no cpu reading yet");
            return false;
        }
        Ok(other) => (
            FailureKind::BadReply,
            format!("not a valid cpu reading: {other:?}"),
        ),
        Err(error) => (FailureKind::of(&error), error.to_string()),
    };
    args.metrics.failed(node, kind.as_str());
    tracing::warn!(target: TARGET, load_balancer = %args.balancer, node = %node, kind = kind.as_str(), %error, "cpu reading failed");
    true
}

/// Whether a reply means "too early" rather than a failure: no reading yet, or no endpoint of
/// the node known yet.
fn not_yet(reply: &Result<ControlReply, Error>) -> bool {
    matches!(
        reply,
        Ok(ControlReply::CpuReading(None))
            | Err(Error::ServiceUnavailable {
                reason: crate::Unavailable::UnknownNode | crate::Unavailable::NoEndpoint,
                ..
            })
    )
}

fn valid(cpu: f64) -> bool {
    cpu.is_finite() && (0.0..=100.0).contains(&cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_reading_may_take_two_seconds() {
        assert_eq!(REMOTE_TIMEOUT, Duration::from_millis(2_000));
    }

    #[test]
    fn failures_are_classified_by_kind() {
        let timeout = Error::RequestTimeout {
            node: "a@h".into(),
            timeout: REMOTE_TIMEOUT,
        };
        assert_eq!(FailureKind::of(&timeout), FailureKind::Timeout);
        let codec = Error::Codec {
            function: "control".into(),
            message: "bad".into(),
        };
        assert_eq!(FailureKind::of(&codec).as_str(), "bad_reply");
        assert_eq!(FailureKind::Timeout.as_str(), "timeout");
        for reason in [
            crate::Unavailable::UnknownNode,
            crate::Unavailable::NoEndpoint,
            crate::Unavailable::Disconnected,
            crate::Unavailable::ConnectionLost,
        ] {
            let gone = Error::ServiceUnavailable {
                node: "a@h".into(),
                reason,
            };
            assert_eq!(FailureKind::of(&gone).as_str(), "unreachable", "{gone}");
        }
        let refused = Error::ConnectFailed {
            addr: "h:1".into(),
            reason: "refused".into(),
        };
        assert_eq!(FailureKind::of(&refused).as_str(), "unreachable");
        let remote = Error::Remote {
            node: "a@h".into(),
            function: "control".into(),
            failure: crate::RemoteFailure::Failed,
            message: "no".into(),
        };
        assert_eq!(FailureKind::of(&remote).as_str(), "remote_error");
        let version = Error::WireVersion {
            node: "a@h".into(),
            local: 1,
            remote: 2,
        };
        assert_eq!(FailureKind::of(&version).as_str(), "bad_reply");
        assert!(valid(0.0) && valid(100.0));
        assert!(!valid(f64::NAN) && !valid(-1.0) && !valid(100.5) && !valid(f64::INFINITY));
    }
}
