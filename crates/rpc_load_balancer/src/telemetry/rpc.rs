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

use super::handles::{handles, RpcHandles};
use super::{status_of, CANCELLED};
use crate::Error;

/// Tracks one call or cast from start to outcome: a DEBUG span, the start and stop counters
/// and the duration histogram (through the label set's [handles](super::handles), made once).
/// Dropped before [`finish`](Self::finish), it records the status [`CANCELLED`].
pub(crate) struct RpcTelemetry {
    span: Span,
    /// Whether the stop was recorded.
    stopped: bool,
    started: Instant,
    kind: &'static str,
    function: &'static str,
    balancer: SharedString,
    /// The handles of the target's label set, once a target is known.
    handles: Option<Arc<RpcHandles>>,
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
        let balancer = balancer
            .map(|b| SharedString::from_shared(Arc::clone(b)))
            .unwrap_or(SharedString::const_str(""));
        Self {
            span,
            stopped: false,
            started: Instant::now(),
            kind,
            function,
            balancer,
            handles: None,
        }
    }

    /// The span to run the call in.
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Records the target node (once selected; its full name) and, the first time, counts
    /// the start: a call sent on to another member (at most 3 times) is still one call, so
    /// start and stop counts match; the stop carries the last member's name.
    pub(crate) fn target(&mut self, node: &str) {
        if !super::ENABLED {
            return;
        }
        if self.handles.as_ref().is_some_and(|h| **h.node() == *node) {
            return;
        }
        self.span.record("node", node);
        let handles = handles(self.kind, self.function, &self.balancer, node);
        if self.handles.replace(Arc::clone(&handles)).is_none() {
            handles.started();
        }
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
        if self.handles.is_none() {
            // Ended before a target was chosen (e.g. no members): still counted as started.
            self.target("");
        }
        self.span.record("status", status);
        let elapsed_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        if let Some(handles) = &self.handles {
            handles.stopped(status, elapsed_ms);
        }
    }
}

/// The serving node's span of a call or cast of `function` (a registered name) routed by
/// `balancer` (`None`: direct), with the id its caller gave it (`call_id`): DEBUG, given the caller's trace
/// context `trace` (see [`super::trace`]). The function runs in it. A disabled span (or the
/// `telemetry` feature off) costs a callsite check and nothing else.
pub(crate) fn serve_span(
    function: &'static str,
    balancer: Option<&str>,
    call_id: u64,
    trace: Option<(&str, &str)>,
) -> Span {
    if !super::ENABLED {
        return Span::none();
    }
    let span = tracing::debug_span!(
        "rpc_load_balancer.serve",
        function,
        load_balancer = balancer.unwrap_or(""),
        call_id,
    );
    super::extract_trace(trace, &span);
    span
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
