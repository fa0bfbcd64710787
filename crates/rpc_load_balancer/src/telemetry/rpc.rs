//! The span and metrics of one call or cast.

use std::sync::Arc;
use std::time::Instant;

use metrics::SharedString;
use tracing::field::Empty;
use tracing::Span;

use super::{status_of, RPC_DURATION, RPC_START, RPC_STOP};
use crate::Error;

/// Tracks one call or cast from start to outcome: a DEBUG span, the start and stop counters
/// and the duration histogram.
pub(crate) struct RpcTelemetry {
    span: Span,
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
        if self.node.is_none() {
            // Failed before a target was chosen (e.g. no members): still counted as started.
            let none: Arc<str> = Arc::from("");
            self.target(&none);
        }
        let status = status_of(outcome);
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
        if let Err(error) = outcome {
            tracing::debug!(parent: &self.span, kind = error.kind(), %error, "call failed");
        }
    }
}
