//! Selection instrumentation: handles registered when a balancer starts or its members
//! snapshot is built, so a selection only increments them.

use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, SharedString};

use crate::routing::{MemberView, Request, Selector};
use crate::telemetry::{NODE_SELECTED, NODE_SELECTED_EMPTY, POOL_SIZE, RPC_IN_FLIGHT};

/// Target of the selection events.
pub(crate) const TARGET: &str = "rpc_load_balancer::selection";

/// One balancer's selection metrics.
pub(crate) struct SelectionMetrics {
    algorithm: &'static str,
    balancer: Arc<str>,
    empty: Counter,
    pool_size: Histogram,
    in_flight: Gauge,
}

impl SelectionMetrics {
    pub(crate) fn new(algorithm: &'static str, balancer: &str) -> Self {
        let balancer: Arc<str> = Arc::from(balancer);
        let label = || SharedString::from_shared(Arc::clone(&balancer));
        Self {
            algorithm,
            empty: metrics::counter!(NODE_SELECTED_EMPTY, "algorithm" => algorithm, "load_balancer" => label()),
            pool_size: metrics::histogram!(POOL_SIZE, "algorithm" => algorithm, "load_balancer" => label()),
            in_flight: metrics::gauge!(RPC_IN_FLIGHT, "load_balancer" => label()),
            balancer,
        }
    }

    /// The balancer's name, shared.
    pub(crate) fn balancer(&self) -> &Arc<str> {
        &self.balancer
    }

    /// A member's selection counter (registered once per snapshot build).
    pub(crate) fn member_counter(&self, node: &Arc<str>) -> Counter {
        metrics::counter!(
            NODE_SELECTED,
            "algorithm" => self.algorithm,
            "load_balancer" => SharedString::from_shared(Arc::clone(&self.balancer)),
            "node" => SharedString::from_shared(Arc::clone(node)),
        )
    }

    /// Records that a member was picked: one increment of its `counter` (its
    /// `node.selected.count` handle).
    #[inline]
    pub(crate) fn selected(&self, counter: &Counter) {
        if !crate::telemetry::ENABLED {
            return;
        }
        counter.increment(1);
    }

    /// The events of a pick of `members[chosen]` by `selector`: only when DEBUG or more is
    /// enabled somewhere.
    #[inline]
    pub(crate) fn explain(
        &self,
        selector: &dyn Selector,
        members: &[MemberView],
        chosen: usize,
        request: &Request<'_>,
    ) {
        if !crate::telemetry::ENABLED {
            return;
        }
        // One load of the global max level: with no subscriber (or one above DEBUG) nothing
        // else runs.
        if tracing::level_enabled!(tracing::Level::DEBUG) {
            self.trace_selected(selector, members, chosen, request);
        }
    }

    #[cold]
    #[inline(never)]
    fn trace_selected(
        &self,
        selector: &dyn Selector,
        members: &[MemberView],
        chosen: usize,
        request: &Request<'_>,
    ) {
        let Some(member) = members.get(chosen) else {
            return;
        };
        tracing::trace!(
            target: TARGET,
            load_balancer = &*self.balancer,
            algorithm = self.algorithm,
            node = member.node(),
            pool_size = members.len(),
            "node selected"
        );
        if tracing::enabled!(target: TARGET, tracing::Level::DEBUG) {
            let explanation = selector.explain(members, chosen, request);
            tracing::debug!(
                target: TARGET,
                load_balancer = &*self.balancer,
                algorithm = self.algorithm,
                node = member.node(),
                rule = %explanation.rule,
                scores = ?explanation.scores,
                "selection explained"
            );
        }
    }

    /// Records a selection on an empty pool.
    pub(crate) fn empty(&self) {
        if !crate::telemetry::ENABLED {
            return;
        }
        self.empty.increment(1);
        tracing::trace!(target: TARGET, load_balancer = &*self.balancer, algorithm = self.algorithm, "no members");
    }

    /// Records a new snapshot's size.
    pub(crate) fn pool_changed(&self, size: usize) {
        if !crate::telemetry::ENABLED {
            return;
        }
        self.pool_size.record(size as f64);
    }

    /// A routed call or cast started (selected) / ended.
    #[inline]
    pub(crate) fn enter(&self) {
        if !crate::telemetry::ENABLED {
            return;
        }
        self.in_flight.increment(1.0);
    }

    #[inline]
    pub(crate) fn exit(&self) {
        if !crate::telemetry::ENABLED {
            return;
        }
        self.in_flight.decrement(1.0);
    }
}
