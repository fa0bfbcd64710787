//! [`Releaser`]: what ending a selection needs, carried by every members snapshot a balancer
//! publishes, so a selection that holds its snapshot needs nothing else of the balancer.

use std::sync::Arc;

use super::in_flight::InFlightTotal;
use super::selection_metrics::SelectionMetrics;
use crate::routing::{Clock, Selector};

/// One balancer's selector, in-flight total and gauge, and the two flags a selection reads
/// when it is taken and when it ends — shared (by reference counts) with the balancer's state
/// and copied into each snapshot when it is built (once per membership change). A selection
/// reaches them through the snapshot it holds: taking and ending one writes no reference count
/// of the balancer's state.
#[derive(Clone)]
pub(crate) struct Releaser {
    /// The balancer's selector (told of each release, and of outcomes when it learns).
    pub(crate) selector: Arc<dyn Selector>,
    /// The balancer's selections in flight on this node.
    pub(crate) in_flight: Arc<InFlightTotal>,
    /// The balancer's selection metrics (the in-flight gauge; the name for logs).
    pub(crate) metrics: Arc<SelectionMetrics>,
    /// Whether selections also count their member's in flight
    /// ([`Needs::in_flight`](crate::routing::Needs::in_flight), or a per-member cap).
    pub(crate) counts_members: bool,
    /// Whether the selector learns from outcomes ([`Selector::learns`]).
    pub(crate) learns: bool,
    /// Whether it also observes selections that ended without a result
    /// ([`Selector::observes_cancelled`]).
    pub(crate) observes_cancelled: bool,
    /// The clock outcome latencies are measured on.
    pub(crate) clock: Clock,
}

impl std::fmt::Debug for Releaser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Releaser")
            .field("balancer", self.metrics.balancer())
            .field("counts_members", &self.counts_members)
            .field("learns", &self.learns)
            .field("observes_cancelled", &self.observes_cancelled)
            .finish_non_exhaustive()
    }
}
