//! The span and metrics of one call or cast.
//!
//! Every call or cast ends with exactly one stop: [`RpcTelemetry::finish`] records its outcome,
//! and one dropped unfinished — its caller's future was dropped (an outer timeout, an aborted
//! task) — records the status [`CANCELLED`].

use std::sync::Arc;
use std::time::Instant;

use metrics::SharedString;
use tracing::field::Empty;
use tracing::Span;

use super::{status_of, CANCELLED, RPC_DURATION, RPC_START, RPC_STOP};
use crate::Error;

/// Tracks one call or cast from start to outcome: a DEBUG span, the start and stop counters
/// and the duration histogram. Dropped before [`finish`](Self::finish), it records the status
/// [`CANCELLED`].
pub(crate) struct RpcTelemetry {
    span: Span,
    /// Whether the stop was recorded.
    stopped: bool,
    started: Instant,
    kind: &'static str,
    function: &'static str,
    balancer: SharedString,
    node: Option<Arc<str>>,
}

fn shared(value: &Arc<str>) -> SharedString {
    SharedString::from_shared(Arc::clone(value))
}

impl RpcTelemetry {
    /// Starts tracking a `kind` (`"call"`/`"cast"`) of `function`, routed by `balancer` (or
    /// direct when `None`).
    pub(crate) fn start(
        kind: &'static str,
        function: &'static str,
        balancer: Option<&Arc<str>>,
    ) -> Self {
        let span = if !super::ENABLED {
            Span::none()
        } else {
            tracing::debug_span!(
                "rpc_load_balancer.rpc",
                r#type = kind,
                function,
                load_balancer = balancer.map(|b| &**b).unwrap_or(""),
                node = Empty,
                status = Empty,
            )
        };
        let balancer = balancer.map(shared).unwrap_or(SharedString::const_str(""));
        Self {
            span,
            stopped: false,
            started: Instant::now(),
            kind,
            function,
            balancer,
            node: None,
        }
    }

    /// The span to run the call in.
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Records the target node (once selected) and, the first time, counts the start: a call
    /// sent on to another member (at most 3 times) is still one call, so start and stop
    /// counts match; the stop carries the last member's name.
    pub(crate) fn target(&mut self, node: &Arc<str>) {
        if !super::ENABLED {
            return;
        }
        if self.node.as_ref().is_some_and(|n| Arc::ptr_eq(n, node)) {
            return;
        }
        self.span.record("node", &**node);
        let first = self.node.replace(Arc::clone(node)).is_none();
        if !first {
            return;
        }
        metrics::counter!(
            RPC_START,
            "node" => shared(node),
            "function" => self.function,
            "type" => self.kind,
            "load_balancer" => self.balancer.clone(),
        )
        .increment(1);
    }

    /// Records the outcome: status on the span, stop counter, duration.
    pub(crate) fn finish<T>(mut self, outcome: &Result<T, Error>) {
        if !super::ENABLED {
            return;
        }
        self.stop(status_of(outcome));
        if let Err(error) = outcome {
            tracing::debug!(parent: &self.span, kind = error.kind(), %error, "call failed");
        }
    }

    /// Records the stop with `status`, once: status on the span, stop counter, duration.
    fn stop(&mut self, status: &'static str) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.node.is_none() {
            // Ended before a target was chosen (e.g. no members): still counted as started.
            let none: Arc<str> = Arc::from("");
            self.target(&none);
        }
        self.span.record("status", status);
        let node = self
            .node
            .as_ref()
            .map(shared)
            .unwrap_or(SharedString::const_str(""));
        let labels = [
            ("node", node),
            ("function", SharedString::const_str(self.function)),
            ("type", SharedString::const_str(self.kind)),
            ("load_balancer", self.balancer.clone()),
            ("status", SharedString::const_str(status)),
        ];
        let labels: Vec<metrics::Label> = labels
            .into_iter()
            .map(|(k, v)| metrics::Label::new(k, v))
            .collect();
        metrics::counter!(RPC_STOP, labels.clone()).increment(1);
        metrics::histogram!(RPC_DURATION, labels)
            .record(self.started.elapsed().as_secs_f64() * 1000.0);
    }
}

impl Drop for RpcTelemetry {
    /// A call or cast dropped before its outcome (its caller's future was dropped) stops as
    /// [`CANCELLED`].
    fn drop(&mut self) {
        if super::ENABLED && !self.stopped {
            self.stop(CANCELLED);
            tracing::debug!(parent: &self.span, "call dropped by its caller before its outcome");
        }
    }
}
