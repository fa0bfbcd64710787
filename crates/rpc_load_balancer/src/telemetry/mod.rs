//! Observability: `tracing` spans and events, and `metrics` series named after the original's
//! telemetry (reference: the Elixir library's `RpcLoadBalancer.Metrics`).
//!
//! **Spans and events** (the library installs no subscriber):
//!
//! | name | level | fields |
//! |---|---|---|
//! | span `rpc_load_balancer.rpc` | DEBUG | `type` (`call`/`cast`), `function`, `load_balancer` (empty for direct calls), `node` (the **target**), `status` (`ok`, the error code, or `cancelled`) |
//! | span `rpc_load_balancer.serve` (the serving node's side of a call or cast from another node; the function runs in it) | DEBUG | `function`, `load_balancer` (empty for direct calls), `call_id` (the id the caller gave the call or cast). Given the caller's trace context by the [`TracePropagator`], if one is installed |
//! | event `node selected` (target `rpc_load_balancer::selection`) | TRACE | `load_balancer`, `algorithm`, `node`, `pool_size` |
//! | event `no members` (target `rpc_load_balancer::selection`) | TRACE | `load_balancer`, `algorithm` |
//! | event `selection explained` (target `rpc_load_balancer::selection`) | DEBUG | `load_balancer`, `algorithm`, `node`, `rule`, `scores` |
//! | span `rpc_load_balancer.least_cpu.poll` | DEBUG | `load_balancer`, `members` (remote members asked), `failures` |
//! | event `cpu reading` | DEBUG | `load_balancer`, `node`, `cpu` (%), `age_ms` |
//! | event `cpu reading failed` | WARN | `load_balancer`, `node`, `kind` (`timeout`, `unreachable`, `remote_error`, `bad_reply`), `error` |
//! | event `call refused: at the concurrency cap` (target `rpc_load_balancer::pushback`) | DEBUG | `function`, `cap` (`node`, `function`), `limit` |
//! | event `call refused by an overloaded member` (target `rpc_load_balancer::pushback`) | DEBUG | `load_balancer`, `node` |
//! | event `retrying an idempotent call on another member` (target `rpc_load_balancer::retry`) | DEBUG | `load_balancer`, `node` (the member that failed it), `reason` |
//! | event `not retried: the retry budget is spent` (target `rpc_load_balancer::retry`) | DEBUG | `load_balancer`, `reason` |
//! | event `hedging a slow idempotent call on another member` (target `rpc_load_balancer::hedge`) | DEBUG | `load_balancer`, `node` (the member the second copy goes to) |
//! | event `not hedged: the hedge budget is spent` (target `rpc_load_balancer::hedge`) | DEBUG | `load_balancer` |
//! | event `the hedged copy replied first` (target `rpc_load_balancer::hedge`) | DEBUG | `load_balancer`, `node` (the member that served it) |
//!
//! The explaining event costs nothing unless DEBUG is enabled for
//! `rpc_load_balancer::selection`: only then is
//! the balancer's [`Selector::explain`](crate::routing::Selector::explain) called.
//!
//! **Traces across nodes**: install a [`TracePropagator`] with [`set_trace_propagator`] and
//! every call or cast that leaves this process carries its `rpc_load_balancer.rpc` span's
//! [`TraceContext`] (an appended call-header field, at most [`MAX_TRACE_CONTEXT_LEN`] bytes),
//! and the serving node hands it to its own propagator with its `rpc_load_balancer.serve`
//! span — so one trace shows both sides. Without one, nothing of it runs.
//!
//! **Metrics** (the library installs no recorder; install yours *before* starting balancers,
//! since their selection handles are registered when a members snapshot is built; the
//! `rpc.*` call series follow a recorder installed at any time: their handles are made once
//! per label set and made again when the current recorder is another, see `handles.rs`): see
//! [`describe`] for every series with its kind, labels, unit and histogram buckets. Names use
//! dots; Prometheus exporters write them with `_`. Selection only increments handles created
//! in advance, so it allocates nothing with no recorder or with a recorder whose handles are
//! plain atomics. Stock recorders (metrics-util's, the Prometheus exporter's) may allocate
//! when samples arrive; that cost is theirs.

mod handles;
mod hedge;
mod poll;
mod pushback;
mod retry;
mod rpc;
mod trace;

/// Whether instrumentation is compiled in (cargo feature `telemetry`, on by default). Without
/// it, spans, events and metrics are compiled out: only for measuring their cost.
pub(crate) const ENABLED: bool = cfg!(feature = "telemetry");

pub(crate) use hedge::{hedge_refused, hedge_won, hedged};
pub(crate) use poll::PollMetrics;
pub(crate) use pushback::{pushback_seen, pushback_sent};
pub(crate) use retry::{retried, retry_refused};
pub(crate) use rpc::{serve_span, RpcTelemetry};
pub(crate) use trace::{extract as extract_trace, inject as inject_trace};
pub use trace::{set_trace_propagator, TraceContext, TracePropagator, MAX_TRACE_CONTEXT_LEN};

/// `rpc_load_balancer.rpc.request.start.count`: calls and casts started.
pub const RPC_START: &str = "rpc_load_balancer.rpc.request.start.count";
/// `rpc_load_balancer.rpc.request.stop.count`: calls and casts finished, by status.
pub const RPC_STOP: &str = "rpc_load_balancer.rpc.request.stop.count";
/// `rpc_load_balancer.rpc.duration.milliseconds`: how long calls and casts took.
pub const RPC_DURATION: &str = "rpc_load_balancer.rpc.duration.milliseconds";
/// `rpc_load_balancer.rpc.in_flight`: routed calls and casts selected and not yet finished.
pub const RPC_IN_FLIGHT: &str = "rpc_load_balancer.rpc.in_flight";
/// `rpc_load_balancer.node.selected.count`: selections of a member.
pub const NODE_SELECTED: &str = "rpc_load_balancer.node.selected.count";
/// `rpc_load_balancer.node.selected.empty.count`: selections on an empty pool.
pub const NODE_SELECTED_EMPTY: &str = "rpc_load_balancer.node.selected.empty.count";
/// `rpc_load_balancer.node.pool_size`: members per snapshot, recorded when it changes.
pub const POOL_SIZE: &str = "rpc_load_balancer.node.pool_size";

/// `rpc_load_balancer.member.ejected.count`: members outlier ejection ejected, by node and
/// `reason` (`consecutive_failures`, `success_rate`, `silent`).
pub const MEMBER_EJECTED: &str = "rpc_load_balancer.member.ejected.count";
/// `rpc_load_balancer.member.suspected.count`: members outlier ejection suspected of being
/// silent, by node.
pub const MEMBER_SUSPECTED: &str = "rpc_load_balancer.member.suspected.count";
/// `rpc_load_balancer.members.ejected`: members ejected now (as of the last look over them).
pub const MEMBERS_EJECTED: &str = "rpc_load_balancer.members.ejected";
/// `rpc_load_balancer.members.suspected`: members suspected now (as of the last look over
/// them).
pub const MEMBERS_SUSPECTED: &str = "rpc_load_balancer.members.suspected";
/// `rpc_load_balancer.members.slow_start`: members in their slow-start window now (as of the
/// last membership change or pick that saw a window end).
pub const MEMBERS_SLOW_START: &str = "rpc_load_balancer.members.slow_start";
/// `rpc_load_balancer.members.weight_unknown`: a `LoadWeighted` balancer's members without a
/// usable weight (no report yet, in their blackout, or expired), as of its last
/// recomputation.
pub const MEMBERS_WEIGHT_UNKNOWN: &str = "rpc_load_balancer.members.weight_unknown";

/// `rpc_load_balancer.pushback.sent.count`: calls this node refused unrun at one of its
/// concurrency caps, by `function` and `cap` (`node`, `function`).
pub const PUSHBACK_SENT: &str = "rpc_load_balancer.pushback.sent.count";
/// `rpc_load_balancer.pushback.count`: refusals of calls at a serving node's concurrency cap
/// seen by this node's calls, by `load_balancer` (empty for a direct call) and `node` (the
/// member that refused).
pub const PUSHBACK: &str = "rpc_load_balancer.pushback.count";
/// `rpc_load_balancer.retry.count`: calls of idempotent functions sent again to another
/// member after a failure of the retryable kind, by `load_balancer` and `reason` (the
/// failure's [`Unavailable::as_str`](crate::Unavailable::as_str): `connection_lost`,
/// `disconnected`, `unknown_node`, `no_endpoint`, `overloaded`).
pub const RETRY: &str = "rpc_load_balancer.retry.count";
/// `rpc_load_balancer.retry.budget_exhausted.count`: failures of the retryable kind of
/// idempotent calls that were not retried because the balancer's retry budget was spent, by
/// `load_balancer` and `reason`.
pub const RETRY_BUDGET_EXHAUSTED: &str = "rpc_load_balancer.retry.budget_exhausted.count";
/// `rpc_load_balancer.hedge.count`: second copies of hedged calls sent (a call of an
/// idempotent function still unanswered after its balancer's hedge delay, sent to another
/// member), by `load_balancer`.
pub const HEDGE: &str = "rpc_load_balancer.hedge.count";
/// `rpc_load_balancer.hedge.budget_exhausted.count`: calls due a second copy that were not
/// hedged because the balancer's hedge budget was spent, by `load_balancer`.
pub const HEDGE_BUDGET_EXHAUSTED: &str = "rpc_load_balancer.hedge.budget_exhausted.count";
/// `rpc_load_balancer.hedge.won.count`: hedged calls whose second copy replied first (its
/// reply is the call's), by `load_balancer`.
pub const HEDGE_WON: &str = "rpc_load_balancer.hedge.won.count";

/// `rpc_load_balancer.least_cpu.poll.duration.milliseconds`: how long a LeastCpu Poller's
/// cycle took.
pub const LEAST_CPU_POLL_DURATION: &str = "rpc_load_balancer.least_cpu.poll.duration.milliseconds";
/// `rpc_load_balancer.least_cpu.poll.remote_error.count`: remote CPU readings a Poller could
/// not get, by node and kind (`timeout`, `unreachable`, `remote_error`, `bad_reply`).
pub const LEAST_CPU_POLL_FAILURES: &str = "rpc_load_balancer.least_cpu.poll.remote_error.count";

/// The `status` label of a call or cast whose caller dropped it before its outcome (an outer
/// timeout, an aborted task): not an error code, since the caller got no error.
pub const CANCELLED: &str = "cancelled";

/// The original's duration buckets, in ms.
pub const DURATION_BUCKETS_MS: &[f64] = &[
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
    10000.0, 30000.0, 60000.0,
];
/// The original's pool-size buckets, in members.
pub const POOL_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 250.0];

/// The kind of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesKind {
    /// A monotonic counter.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A distribution of samples (bucketed by the exporter).
    Histogram,
}

/// One metric series the library emits.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesDescription {
    /// The series name (dots; Prometheus writes `_`).
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: SeriesKind,
    /// Label names, in a fixed order.
    pub labels: &'static [&'static str],
    /// The unit of the values.
    pub unit: metrics::Unit,
    /// What it counts or measures.
    pub description: &'static str,
    /// Histogram bucket bounds to configure in the exporter (`None` for counters and gauges).
    pub buckets: Option<&'static [f64]>,
}

const RPC_LABELS: &[&str] = &["node", "function", "type", "load_balancer"];
const RPC_STATUS_LABELS: &[&str] = &["node", "function", "type", "load_balancer", "status"];

/// Every series the library emits: name, kind, labels, unit, description and, for histograms,
/// the bucket bounds of the original (0.1 … 60,000 ms for durations; 1 … 250 for pool sizes).
///
/// Label values: `node` is the target node's full name (empty when none was selected),
/// `function` the remote function's `NAME`, `type` `call` or `cast`, `load_balancer` the
/// balancer's name (empty for direct calls), `status` `ok`, the error's
/// [`code`](crate::Error::code) or [`CANCELLED`] (the caller dropped the call or cast before
/// its outcome), `algorithm` the algorithm's [`name`](crate::routing::Algorithm::name).
pub fn describe() -> Vec<SeriesDescription> {
    use metrics::Unit;
    vec![
        SeriesDescription {
            name: RPC_START,
            kind: SeriesKind::Counter,
            labels: RPC_LABELS,
            unit: Unit::Count,
            description: "Calls and casts started (direct, balanced and local).",
            buckets: None,
        },
        SeriesDescription {
            name: RPC_STOP,
            kind: SeriesKind::Counter,
            labels: RPC_STATUS_LABELS,
            unit: Unit::Count,
            description: "Calls and casts finished, by status (ok, the error code, or cancelled when the caller dropped it before its outcome).",
            buckets: None,
        },
        SeriesDescription {
            name: RPC_DURATION,
            kind: SeriesKind::Histogram,
            labels: RPC_STATUS_LABELS,
            unit: Unit::Milliseconds,
            description: "Duration of calls and casts, from the call to its outcome, in ms.",
            buckets: Some(DURATION_BUCKETS_MS),
        },
        SeriesDescription {
            name: RPC_IN_FLIGHT,
            kind: SeriesKind::Gauge,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Routed calls and casts selected and not yet finished, per balancer.",
            buckets: None,
        },
        SeriesDescription {
            name: NODE_SELECTED,
            kind: SeriesKind::Counter,
            labels: &["algorithm", "load_balancer", "node"],
            unit: Unit::Count,
            description: "Selections of a member.",
            buckets: None,
        },
        SeriesDescription {
            name: NODE_SELECTED_EMPTY,
            kind: SeriesKind::Counter,
            labels: &["algorithm", "load_balancer"],
            unit: Unit::Count,
            description: "Selections attempted while the balancer had no members.",
            buckets: None,
        },
        SeriesDescription {
            name: POOL_SIZE,
            kind: SeriesKind::Histogram,
            labels: &["algorithm", "load_balancer"],
            unit: Unit::Count,
            description: "Number of members, recorded whenever the members snapshot changes.",
            buckets: Some(POOL_SIZE_BUCKETS),
        },
        SeriesDescription {
            name: LEAST_CPU_POLL_DURATION,
            kind: SeriesKind::Histogram,
            labels: &["load_balancer"],
            unit: Unit::Milliseconds,
            description: "Duration of a LeastCpu Poller's cycle (every remote member's reading), in ms.",
            buckets: Some(DURATION_BUCKETS_MS),
        },
        SeriesDescription {
            name: LEAST_CPU_POLL_FAILURES,
            kind: SeriesKind::Counter,
            labels: &["load_balancer", "node", "kind"],
            unit: Unit::Count,
            description: "Remote CPU readings a LeastCpu Poller could not get, by kind: timeout, unreachable, remote_error, bad_reply.",
            buckets: None,
        },
        SeriesDescription {
            name: MEMBER_EJECTED,
            kind: SeriesKind::Counter,
            labels: &["load_balancer", "node", "reason"],
            unit: Unit::Count,
            description: "Members outlier ejection ejected, by reason: consecutive_failures, success_rate, silent.",
            buckets: None,
        },
        SeriesDescription {
            name: MEMBER_SUSPECTED,
            kind: SeriesKind::Counter,
            labels: &["load_balancer", "node"],
            unit: Unit::Count,
            description: "Members outlier ejection suspected of being silent (calls in flight, no reply while others reply).",
            buckets: None,
        },
        SeriesDescription {
            name: MEMBERS_EJECTED,
            kind: SeriesKind::Gauge,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Members ejected now, as of the last look over the members.",
            buckets: None,
        },
        SeriesDescription {
            name: MEMBERS_SUSPECTED,
            kind: SeriesKind::Gauge,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Members suspected of being silent now, as of the last look over the members.",
            buckets: None,
        },
        SeriesDescription {
            name: MEMBERS_SLOW_START,
            kind: SeriesKind::Gauge,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Members in their slow-start window now, set at each membership change and by the first pick after a window ends.",
            buckets: None,
        },
        SeriesDescription {
            name: MEMBERS_WEIGHT_UNKNOWN,
            kind: SeriesKind::Gauge,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "A LoadWeighted balancer's members without a usable weight (no report yet, in their blackout, or expired), as of its last recomputation (at most once per second).",
            buckets: None,
        },
        SeriesDescription {
            name: PUSHBACK_SENT,
            kind: SeriesKind::Counter,
            labels: &["function", "cap"],
            unit: Unit::Count,
            description: "Calls this node refused unrun at one of its concurrency caps, by function and cap (node or function).",
            buckets: None,
        },
        SeriesDescription {
            name: PUSHBACK,
            kind: SeriesKind::Counter,
            labels: &["load_balancer", "node"],
            unit: Unit::Count,
            description: "Refusals at a serving node's concurrency cap seen by this node's calls, by balancer (empty for a direct call) and refusing node.",
            buckets: None,
        },
        SeriesDescription {
            name: RETRY,
            kind: SeriesKind::Counter,
            labels: &["load_balancer", "reason"],
            unit: Unit::Count,
            description: "Calls of idempotent functions sent again to another member after a failure of the retryable kind, by balancer and reason (connection_lost, disconnected, unknown_node, no_endpoint, overloaded).",
            buckets: None,
        },
        SeriesDescription {
            name: RETRY_BUDGET_EXHAUSTED,
            kind: SeriesKind::Counter,
            labels: &["load_balancer", "reason"],
            unit: Unit::Count,
            description: "Failures of the retryable kind of idempotent calls not retried because the balancer's retry budget was spent, by balancer and reason.",
            buckets: None,
        },
        SeriesDescription {
            name: HEDGE,
            kind: SeriesKind::Counter,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Second copies of hedged calls of idempotent functions sent to another member after the balancer's hedge delay, by balancer.",
            buckets: None,
        },
        SeriesDescription {
            name: HEDGE_BUDGET_EXHAUSTED,
            kind: SeriesKind::Counter,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Calls due a second copy that were not hedged because the balancer's hedge budget was spent, by balancer.",
            buckets: None,
        },
        SeriesDescription {
            name: HEDGE_WON,
            kind: SeriesKind::Counter,
            labels: &["load_balancer"],
            unit: Unit::Count,
            description: "Hedged calls whose second copy replied first, by balancer.",
            buckets: None,
        },
    ]
}

/// Registers the descriptions (unit and help text) of every series with the installed
/// `metrics` recorder. Call it once after installing the recorder.
pub fn register_descriptions() {
    for series in describe() {
        match series.kind {
            SeriesKind::Counter => {
                metrics::describe_counter!(series.name, series.unit, series.description)
            }
            SeriesKind::Gauge => {
                metrics::describe_gauge!(series.name, series.unit, series.description)
            }
            SeriesKind::Histogram => {
                metrics::describe_histogram!(series.name, series.unit, series.description)
            }
        }
    }
}

/// The status label of an outcome: `ok` or the error's code.
pub(crate) fn status_of<T>(outcome: &Result<T, crate::Error>) -> &'static str {
    match outcome {
        Ok(_) => "ok",
        Err(error) => error.code().as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str) -> SeriesDescription {
        describe()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} not described"))
    }

    #[test]
    fn the_originals_six_series_plus_in_flight_the_pollers_ejection_slow_start_pushback_retries_and_hedges(
    ) {
        let names: Vec<&str> = describe().iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                RPC_START,
                RPC_STOP,
                RPC_DURATION,
                RPC_IN_FLIGHT,
                NODE_SELECTED,
                NODE_SELECTED_EMPTY,
                POOL_SIZE,
                LEAST_CPU_POLL_DURATION,
                LEAST_CPU_POLL_FAILURES,
                MEMBER_EJECTED,
                MEMBER_SUSPECTED,
                MEMBERS_EJECTED,
                MEMBERS_SUSPECTED,
                MEMBERS_SLOW_START,
                MEMBERS_WEIGHT_UNKNOWN,
                PUSHBACK_SENT,
                PUSHBACK,
                RETRY,
                RETRY_BUDGET_EXHAUSTED,
                HEDGE,
                HEDGE_BUDGET_EXHAUSTED,
                HEDGE_WON,
            ]
        );
        // Names as the original wrote them.
        assert_eq!(RPC_START, "rpc_load_balancer.rpc.request.start.count");
        assert_eq!(RPC_STOP, "rpc_load_balancer.rpc.request.stop.count");
        assert_eq!(RPC_DURATION, "rpc_load_balancer.rpc.duration.milliseconds");
        assert_eq!(NODE_SELECTED, "rpc_load_balancer.node.selected.count");
        assert_eq!(
            NODE_SELECTED_EMPTY,
            "rpc_load_balancer.node.selected.empty.count"
        );
        assert_eq!(POOL_SIZE, "rpc_load_balancer.node.pool_size");
    }

    #[test]
    fn labels_units_and_buckets_follow_the_original() {
        let start = series(RPC_START);
        assert_eq!(start.kind, SeriesKind::Counter);
        assert!(!start.labels.contains(&"status"), "start has no status");
        assert!(start.labels.contains(&"load_balancer") && start.labels.contains(&"node"));
        let stop = series(RPC_STOP);
        assert!(stop.labels.contains(&"status") && stop.labels.contains(&"load_balancer"));
        let duration = series(RPC_DURATION);
        assert_eq!(
            (duration.kind, duration.unit),
            (SeriesKind::Histogram, metrics::Unit::Milliseconds)
        );
        assert_eq!(duration.labels, stop.labels);
        let buckets = duration.buckets.unwrap();
        assert_eq!(
            (buckets[0], buckets[buckets.len() - 1], buckets.len()),
            (0.1, 60000.0, 17)
        );
        assert_eq!(
            series(NODE_SELECTED).labels,
            ["algorithm", "load_balancer", "node"]
        );
        assert_eq!(
            series(NODE_SELECTED_EMPTY).labels,
            ["algorithm", "load_balancer"]
        );
        let pool = series(POOL_SIZE);
        assert_eq!(
            pool.buckets,
            Some(&[1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 250.0][..])
        );
        assert!(describe()
            .iter()
            .all(|s| (s.kind == SeriesKind::Histogram) == s.buckets.is_some()));
    }

    #[test]
    fn status_is_ok_or_the_error_code() {
        assert_eq!(status_of::<()>(&Ok(())), "ok");
        let timeout = crate::Error::RequestTimeout {
            node: "a@h".into(),
            timeout: std::time::Duration::from_millis(1),
        };
        assert_eq!(status_of::<()>(&Err(timeout)), "request_timeout");
    }
}
