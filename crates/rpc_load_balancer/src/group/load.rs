//! Load reports for an actor group: its actors' replies carry none, so when the group's
//! algorithm reads reports ([`Needs::reports`](crate::routing::Needs::reports), e.g.
//! LoadWeighted) a task asks each member's node for its load every period
//! ([`ControlRequest::LoadReport`]; this node's own is read in place) and stores one report
//! per member in its view.
//!
//! A member's report is its node's load (`node_in_flight`, `cpu`, `utilization`: shared by
//! the node's actors) with the rates of this caller's own calls: `qps` and `eps` are the calls
//! and failures this group sent to the node's actors over the period, per second, divided
//! among them. The node's own rates count only calls of registered functions, not messages to
//! actors; this caller's rate over the node's utilization is the weight's shape gRFC A58 uses
//! (calls served per unit of load): a node whose load comes from elsewhere serves this caller
//! fewer calls per unit, so its actors weigh less; among callers alike, each sees the same
//! ratios.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::balancer::BalancerShared;
use crate::control::{ControlReply, ControlRequest};
use crate::load::LoadReport;

/// The longest a node's answer is waited for (the period, when shorter).
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The calls (and failures) this group sent to each node's actors, counted as they end.
#[derive(Debug, Default)]
pub(crate) struct NodeCalls {
    by_node: Mutex<HashMap<Arc<str>, Arc<Counts>>>,
}

#[derive(Debug, Default)]
struct Counts {
    calls: AtomicU64,
    failures: AtomicU64,
}

impl NodeCalls {
    /// Counts one call or cast to an actor of `node` that ended, `ok` when it succeeded.
    pub(super) fn ended(&self, node: &Arc<str>, ok: bool) {
        let counts = {
            let mut by_node = self.by_node.lock().unwrap_or_else(|e| e.into_inner());
            match by_node.get(&**node) {
                Some(counts) => Arc::clone(counts),
                None => Arc::clone(by_node.entry(Arc::clone(node)).or_default()),
            }
        };
        counts.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            counts.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counts since the last take, per node (nodes with none left out), reset.
    fn take(&self) -> HashMap<Arc<str>, (u64, u64)> {
        let mut by_node = self.by_node.lock().unwrap_or_else(|e| e.into_inner());
        // Nodes no call went to since the last take are forgotten (no entry grows for ever
        // for nodes that left).
        let mut taken = HashMap::new();
        by_node.retain(|node, counts| {
            let calls = counts.calls.swap(0, Ordering::Relaxed);
            let failures = counts.failures.swap(0, Ordering::Relaxed);
            if calls > 0 {
                taken.insert(Arc::clone(node), (calls, failures));
            }
            calls > 0
        });
        taken
    }
}

/// One member's report: its node's `load` with this caller's `calls` and `failures` to the
/// node over `elapsed`, shared among the node's `actors` (rates rounded, at least 1 call per
/// second while any call went there).
pub(super) fn member_report(
    load: &LoadReport,
    calls: u64,
    failures: u64,
    elapsed: Duration,
    actors: usize,
) -> LoadReport {
    let per_second = |n: u64| {
        let seconds = elapsed.as_secs_f64().max(1e-3);
        let rate = n as f64 / seconds / actors.max(1) as f64;
        match n {
            0 => 0,
            _ => (rate.round() as u32).max(1),
        }
    };
    let qps = per_second(calls);
    LoadReport {
        in_flight: 0,
        node_in_flight: load.node_in_flight,
        qps,
        eps: per_second(failures).min(qps),
        cpu: load.cpu,
        utilization: load.utilization,
    }
}

/// Runs until aborted: every `period`, asks each member's node for its load and stores the
/// members' reports (see the module docs).
pub(super) async fn run(shared: Arc<BalancerShared>, calls: Arc<NodeCalls>, period: Duration) {
    let period = period.max(Duration::from_millis(1));
    let timeout = period.min(ASK_TIMEOUT);
    let mut last = Instant::now();
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        if shared.is_stopping() {
            return;
        }
        let members = shared.members();
        // The actors of each node, in member order.
        let mut actors: Vec<(Arc<str>, usize)> = Vec::new();
        for view in members.views() {
            match actors.last_mut() {
                Some((node, n)) if **node == *view.node() => *n += 1,
                _ => actors.push((Arc::clone(view.node_arc()), 1)),
            }
        }
        let loads = join_all(
            actors
                .iter()
                .map(|(node, _)| load_of(&shared, node, timeout)),
        )
        .await;
        let now = Instant::now();
        let (elapsed, counts) = (now - last, calls.take());
        last = now;
        let now_ms = shared.clock.now_ms();
        // The views are in node order: each node's report goes to its run of views.
        let mut views = members.views().iter();
        for ((node, n), load) in actors.iter().zip(loads) {
            let run = views.by_ref().take(*n);
            let Some(load) = load else { continue };
            let (sent, failed) = counts.get(node).copied().unwrap_or((0, 0));
            let report = member_report(&load, sent, failed, elapsed, *n);
            run.for_each(|view| view.store_report(&report, now_ms));
        }
    }
}

/// `node`'s load: read in place for this node, else asked for (`None` when it does not
/// answer in `timeout`, answers an error — a node older than the request — or is gone).
async fn load_of(shared: &BalancerShared, node: &str, timeout: Duration) -> Option<LoadReport> {
    let transport = &shared.node.transport;
    if *node == *shared.node.name {
        let in_flight = transport.served.in_flight.load(Ordering::Relaxed) as usize;
        return Some(transport.serving_load.report(in_flight, in_flight));
    }
    match crate::call::control(transport, node, &ControlRequest::LoadReport, timeout).await {
        Ok(ControlReply::LoadReport(report)) => Some(report),
        Ok(other) => {
            tracing::debug!(group = %shared.name, %node, ?other, "not a load report");
            None
        }
        Err(error) => {
            tracing::debug!(group = %shared.name, %node, %error, "no load report");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_members_report_is_its_nodes_load_with_this_callers_rate_per_actor() {
        let load = LoadReport {
            in_flight: 7,
            node_in_flight: 9,
            qps: 5_000,
            eps: 10,
            cpu: Some(80.0),
            utilization: Some(0.5),
        };
        // 400 calls, 40 failed, over 2 s to a node of 2 actors: 100 and 10 per actor and s.
        let report = member_report(&load, 400, 40, Duration::from_secs(2), 2);
        assert_eq!((report.qps, report.eps), (100, 10));
        assert_eq!(report.in_flight, 0, "no calls of this group counted there");
        assert_eq!(report.node_in_flight, 9);
        assert_eq!((report.cpu, report.utilization), (Some(80.0), Some(0.5)));
        // No call: no rate (an empty report, which LoadWeighted ignores); one call: 1 per s.
        assert_eq!(member_report(&load, 0, 0, Duration::from_secs(1), 4).qps, 0);
        assert_eq!(member_report(&load, 1, 1, Duration::from_secs(1), 4).qps, 1);
        assert_eq!(member_report(&load, 1, 1, Duration::from_secs(1), 4).eps, 1);
    }

    #[test]
    fn calls_are_counted_per_node_and_taken_once() {
        let calls = NodeCalls::default();
        let (a, b): (Arc<str>, Arc<str>) = ("a@h".into(), "b@h".into());
        for ok in [true, true, false] {
            calls.ended(&a, ok);
        }
        calls.ended(&b, true);
        let taken = calls.take();
        assert_eq!(taken.get(&a).copied(), Some((3, 1)));
        assert_eq!(taken.get(&b).copied(), Some((1, 0)));
        assert!(calls.take().is_empty(), "taken once");
        assert!(
            calls.by_node.lock().unwrap().is_empty(),
            "nodes without calls are forgotten"
        );
    }
}
