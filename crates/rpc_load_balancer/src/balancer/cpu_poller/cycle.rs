//! One poll cycle of the Poller: every remote member's reading asked for at once, a node with
//! no reading yet asked again soon, each reading stored as it arrives, and each failure
//! counted by kind.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use super::{PollerArgs, REMOTE_TIMEOUT, TARGET};
use crate::control::{ControlReply, ControlRequest};
use crate::Error;

/// When a node has no reading yet, how soon it is asked again (within the poll interval).
const NO_READING_RETRY: Duration = Duration::from_millis(500);
/// How many times one cycle asks a node that has no reading yet.
const NO_READING_ASKS: u32 = 6;

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

/// One poll cycle: every node's reading, concurrently, each stored as it arrives.
pub(super) async fn run(
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
