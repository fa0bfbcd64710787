//! The Poller: one actor per LeastCpu balancer that fetches its remote members' CPU readings
//! into the process-wide cache on fixed-rate ticks.
//!
//! Each tick asks every remote member's node for its own reading (a `Control` request every
//! node answers), all at once, [`REMOTE_TIMEOUT`] each, so a cycle is bounded whatever the
//! cluster size. A reading is stored with the age the remote reported. Failures are events and
//! metrics, by kind: `timeout`, `unreachable`, `remote_error`, `bad_reply`; they never stop the
//! Poller. Sampling is not the Poller's job: every node samples itself (see [`crate::cpu`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use rand::Rng as _;

use crate::algorithm::{AlgorithmChild, LeastCpuOptions};
use crate::control::{ControlReply, ControlRequest};
use crate::node::shared::NodeShared;
use crate::telemetry::PollMetrics;
use crate::{Error, Node};

/// How long one remote reading may take.
pub const REMOTE_TIMEOUT: Duration = Duration::from_millis(2_000);

/// The Poller actor's registered name for balancer `balancer`.
pub(crate) fn poller_name(balancer: &str) -> String {
    format!("rpc_load_balancer/{balancer}/cpu_poller")
}

/// The Poller child of balancer `balancer`.
pub(crate) fn child(balancer: &str, options: LeastCpuOptions) -> AlgorithmChild {
    let balancer = balancer.to_string();
    AlgorithmChild {
        name: poller_name(&balancer),
        spawn: Arc::new(move |supervisor: ActorCell| {
            let balancer = balancer.clone();
            Box::pin(async move {
                let node = Node::current().ok_or_else(|| {
                    ractor::SpawnErr::StartupFailed("no node runs in this process".into())
                })?;
                let args = PollerArgs {
                    node: node.shared(),
                    metrics: PollMetrics::new(&balancer),
                    balancer: balancer.clone(),
                    options,
                };
                let (actor, _) =
                    Actor::spawn_linked(Some(poller_name(&balancer)), Poller, args, supervisor)
                        .await?;
                Ok(actor.get_cell())
            })
        }),
    }
}

/// Makes balancer `balancer`'s Poller fail (admin control, to test its restart): it panics
/// while handling the request, and its balancer's supervisor restarts it alone.
///
/// Errors: [`Error::UnknownBalancer`] if no Poller of that balancer runs on this node.
pub(crate) fn crash(balancer: &str) -> Result<(), Error> {
    let unknown = || Error::UnknownBalancer {
        balancer: balancer.to_string(),
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
    /// Fail (admin control).
    Crash,
}

struct Poller;

struct PollerArgs {
    node: Arc<NodeShared>,
    metrics: PollMetrics,
    balancer: String,
    options: LeastCpuOptions,
}

struct PollerState {
    args: PollerArgs,
    /// When the current tick was due (ticks are at fixed offsets from the first).
    due: Instant,
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
        let delay = Duration::from_millis(if jitter == 0 {
            0
        } else {
            rand::rng().random_range(0..=jitter)
        });
        myself.send_after(delay, || PollerMsg::Tick);
        Ok(PollerState {
            args,
            due: Instant::now() + delay,
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
            PollerMsg::Tick => {
                poll(&state.args).await;
                let interval = state.args.options.poll_interval;
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

/// One poll cycle: every remote member's reading, concurrently, into the cache.
async fn poll(args: &PollerArgs) {
    let started = Instant::now();
    let span = tracing::debug_span!("rpc_load_balancer.least_cpu.poll", load_balancer = %args.balancer, members = tracing::field::Empty, failures = tracing::field::Empty);
    let _entered = span.enter();
    // Before the balancer is registered (the first tick at once) there is nothing to poll.
    let Ok(balancer) = args.node.balancer(&args.balancer) else {
        return;
    };
    let members = balancer.members();
    let remote: Vec<Arc<str>> = members
        .as_slice()
        .iter()
        .filter(|m| !m.is_local() && m.node() != args.node.name)
        .map(|m| Arc::clone(m.node_arc()))
        .collect();
    span.record("members", remote.len());
    let fetches = remote.iter().map(|node| async move {
        let reply = crate::call::control(
            &args.node,
            node,
            &ControlRequest::CpuReading,
            REMOTE_TIMEOUT,
        )
        .await;
        (node, reply)
    });
    let mut failures = 0;
    for (node, reply) in join_all(fetches).await {
        let failure = match reply {
            Ok(ControlReply::CpuReading(Some(reading))) if valid(reading.cpu) => {
                crate::cpu::cache().store(node, reading.cpu, reading.age_ms);
                tracing::debug!(load_balancer = %args.balancer, node = %node, cpu = reading.cpu, age_ms = reading.age_ms, "cpu reading");
                continue;
            }
            Ok(ControlReply::CpuReading(None)) => {
                // The node has not sampled yet (or its samples fail): not an error here; its
                // old reading, if any, keeps aging.
                tracing::debug!(load_balancer = %args.balancer, node = %node, "no cpu reading yet");
                continue;
            }
            Ok(other) => (
                FailureKind::BadReply,
                format!("not a valid cpu reading: {other:?}"),
            ),
            Err(error) => (FailureKind::of(&error), error.to_string()),
        };
        failures += 1;
        args.metrics.failed(node, failure.0.as_str());
        tracing::warn!(load_balancer = %args.balancer, node = %node, kind = failure.0.as_str(), error = %failure.1, "cpu reading failed");
    }
    span.record("failures", failures);
    crate::cpu::cache().evict();
    args.metrics.polled(started.elapsed());
}

fn valid(cpu: f64) -> bool {
    cpu.is_finite() && (0.0..=100.0).contains(&cpu)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(valid(0.0) && valid(100.0));
        assert!(!valid(f64::NAN) && !valid(-1.0) && !valid(100.5) && !valid(f64::INFINITY));
    }
}
