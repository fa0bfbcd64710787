//! A call's telemetry in the pipeline: one [`RpcTelemetry`] per call or cast, started in one
//! place ([`Telemetry::start`]) — up front for a direct or routed call; for a random-node call
//! once it has its node (it is then recorded as a direct call to that node), or, if it ends or
//! is dropped before, with the tracking balancer's name and no node.

use std::sync::Arc;

use tracing::Span;

use super::target::{Kind, Target};
use crate::telemetry::{RpcTelemetry, TraceContext};
use crate::Error;

/// The telemetry of one call or cast (see the module docs).
pub(crate) struct Telemetry {
    started: Option<RpcTelemetry>,
    kind: Kind,
    function: &'static str,
    /// The `load_balancer` label of a random-node call that ends before it has a node.
    pending_label: Option<Arc<str>>,
    /// Whether the outcome was recorded.
    finished: bool,
    /// The trace context sent with the call, once asked for ([`Self::trace`]).
    trace: Option<Option<TraceContext>>,
}

impl Telemetry {
    /// The telemetry of a `kind` of `function` to `target`; `tracking`: the balancer that
    /// tracks a random-node call.
    pub(crate) fn new(
        kind: Kind,
        function: &'static str,
        target: &Target,
        tracking: Option<&str>,
    ) -> Self {
        let mut telemetry = Self {
            started: None,
            kind,
            function,
            pending_label: None,
            finished: false,
            trace: None,
        };
        match target {
            Target::Node(node) => telemetry.target(node),
            Target::Balancer(shared) => {
                let label = Some(shared.metrics.balancer());
                telemetry.started = Some(Self::start(kind, function, label));
            }
            Target::RandomNode(_) => telemetry.pending_label = tracking.map(Arc::from),
        }
        telemetry
    }

    /// Starts the span and metrics of a call: the one place the pipeline does.
    fn start(kind: Kind, function: &'static str, balancer: Option<&Arc<str>>) -> RpcTelemetry {
        RpcTelemetry::start(kind.as_str(), function, balancer)
    }

    /// Whether it has started (a random-node call's starts once it has its node).
    pub(crate) fn is_started(&self) -> bool {
        self.started.is_some()
    }

    /// The span to run the call in, once started.
    pub(crate) fn span(&self) -> Span {
        self.started
            .as_ref()
            .map_or_else(Span::none, |t| t.span().clone())
    }

    /// The trace context to send with the call: made by the installed propagator from the
    /// call's span the first time it is asked for (the call's first send), then the same for
    /// every send of the call. Without a propagator, `None` at the cost of one load.
    pub(crate) fn trace(&mut self) -> Option<&TraceContext> {
        if self.trace.is_none() {
            let none = Span::none();
            let span = self.started.as_ref().map_or(&none, |t| t.span());
            self.trace = Some(crate::telemetry::inject_trace(span));
        }
        self.trace.as_ref().and_then(Option::as_ref)
    }

    /// Records the node the call goes to (starting a random-node call's telemetry).
    pub(crate) fn target(&mut self, node: &Arc<str>) {
        let (kind, function) = (self.kind, self.function);
        self.started
            .get_or_insert_with(|| Self::start(kind, function, None))
            .target(node);
    }

    /// Records the outcome.
    pub(crate) fn finish<T>(mut self, outcome: &Result<T, Error>) {
        self.finished = true;
        self.take().finish(outcome);
    }

    /// The started telemetry, or one started now for a call that ended before it had a node.
    fn take(&mut self) -> RpcTelemetry {
        let (kind, function) = (self.kind, self.function);
        let label = self.pending_label.take();
        self.started
            .take()
            .unwrap_or_else(|| Self::start(kind, function, label.as_ref()))
    }
}

impl Drop for Telemetry {
    /// Dropped unfinished (its caller's future was dropped): recorded as cancelled, even
    /// before it had a node.
    fn drop(&mut self) {
        if !self.finished {
            // (An `RpcTelemetry` dropped unfinished records `cancelled`.)
            drop(self.take());
        }
    }
}
