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
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::balancer::BalancerShared;
use crate::control::{ControlReply, ControlRequest};
use crate::load::LoadReport;
use crate::routing::MemberView;

/// The longest a node's answer is waited for (the period, when shorter).
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The shortest period between two asks of a node, whatever the algorithm asks for: a group
/// sends each member node at most 10 requests a second.
pub(crate) const MIN_ASK_PERIOD: Duration = Duration::from_millis(100);

/// The calls (and failures) this group sent to each node's actors, counted as they end: one
/// short lock per call or cast (a hash of the node's name and two adds), taken with the
/// counts by the report task, so a call is counted in exactly one period.
#[derive(Debug, Default)]
pub(crate) struct NodeCalls {
    by_node: Mutex<HashMap<Arc<str>, (u64, u64)>>,
}

impl NodeCalls {
    /// Counts one call or cast to an actor of `node` that ended, `ok` when it succeeded.
    pub(super) fn ended(&self, node: &Arc<str>, ok: bool) {
        let mut by_node = self.by_node.lock().unwrap_or_else(|e| e.into_inner());
        let counts = match by_node.get_mut(&**node) {
            Some(counts) => counts,
            None => by_node.entry(Arc::clone(node)).or_default(),
        };
        counts.0 += 1;
        counts.1 += u64::from(!ok);
    }

    /// The counts since the last take, per node (`(calls, failures)`), reset: the map is
    /// emptied, so nodes that left leave no entry behind.
    fn take(&self) -> HashMap<Arc<str>, (u64, u64)> {
        std::mem::take(&mut *self.by_node.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One member's report: its node's `load` with this caller's `calls` and `failures` to the
/// node over `elapsed`, shared among the node's `actors`. Rates are whole calls per second:
/// `carry` (per node, kept between periods) holds what rounding left off, so that low rates
/// average out right over a few periods (a rate of 0.4 per actor reports 0, 1, 0, 0, 1, ...).
pub(super) fn member_report(
    load: &LoadReport,
    (calls, failures): (u64, u64),
    elapsed: Duration,
    actors: usize,
    carry: &mut (f64, f64),
) -> LoadReport {
    let seconds = elapsed.as_secs_f64().max(1e-3);
    let per_second = |n: u64, carry: &mut f64| {
        let rate = n as f64 / seconds / actors.max(1) as f64 + *carry;
        let whole = rate.round().max(0.0);
        *carry = rate - whole;
        whole.min(f64::from(u32::MAX)) as u32
    };
    let qps = per_second(calls, &mut carry.0);
    let eps = per_second(failures, &mut carry.1);
    LoadReport {
        in_flight: 0,
        node_in_flight: load.node_in_flight,
        qps,
        eps: eps.min(qps),
        cpu: load.cpu,
        utilization: load.utilization,
    }
}

/// Stores each node's report on its actors: `views` in node order (as a group's members
/// are: by node, then pid), `actors` the run of views of each node in that order, `loads`
/// each node's answer (`None`: none — its actors keep the report they had).
fn store_reports(
    views: &[MemberView],
    actors: &[(Arc<str>, usize)],
    loads: &[Option<LoadReport>],
    counts: &HashMap<Arc<str>, (u64, u64)>,
    elapsed: Duration,
    carries: &mut HashMap<Arc<str>, (f64, f64)>,
    now_ms: u64,
) {
    let mut start = 0;
    for ((node, n), load) in actors.iter().zip(loads) {
        let run = views.get(start..start + n).unwrap_or_default();
        start += n;
        let Some(load) = load else { continue };
        let sent = counts.get(node).copied().unwrap_or((0, 0));
        let carry = carries.entry(Arc::clone(node)).or_default();
        let report = member_report(load, sent, elapsed, *n, carry);
        for view in run {
            view.store_report(&report, now_ms);
        }
    }
    // Nodes that left take their carry with them.
    carries.retain(|node, _| actors.iter().any(|(n, _)| n == node));
}

/// The run of views of each node, in member order (`views` sorted by node).
fn runs_by_node(views: &[MemberView]) -> Vec<(Arc<str>, usize)> {
    let mut actors: Vec<(Arc<str>, usize)> = Vec::new();
    for view in views {
        match actors.last_mut() {
            Some((node, n)) if **node == *view.node() => *n += 1,
            _ => actors.push((Arc::clone(view.node_arc()), 1)),
        }
    }
    actors
}

/// Runs until aborted (or the group stops): every `period` (at least [`MIN_ASK_PERIOD`]),
/// asks each member's node for its load and stores the members' reports (see the module
/// docs).
pub(super) async fn run(shared: Arc<BalancerShared>, calls: Arc<NodeCalls>, period: Duration) {
    let period = period.max(MIN_ASK_PERIOD);
    let timeout = period.min(ASK_TIMEOUT);
    let mut last = Instant::now();
    let mut carries = HashMap::new();
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        if shared.is_stopping() {
            return;
        }
        let members = shared.members();
        let actors = runs_by_node(members.views());
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
        store_reports(
            members.views(),
            &actors,
            &loads,
            &counts,
            elapsed,
            &mut carries,
            now_ms,
        );
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

    fn load() -> LoadReport {
        LoadReport {
            in_flight: 7,
            node_in_flight: 9,
            qps: 5_000,
            eps: 10,
            cpu: Some(80.0),
            utilization: Some(0.5),
        }
    }

    #[test]
    fn a_members_report_is_its_nodes_load_with_this_callers_rate_per_actor() {
        let mut carry = (0.0, 0.0);
        // 400 calls, 40 failed, over 2 s to a node of 2 actors: 100 and 10 per actor and s.
        let report = member_report(&load(), (400, 40), Duration::from_secs(2), 2, &mut carry);
        assert_eq!((report.qps, report.eps), (100, 10));
        assert_eq!(report.in_flight, 0, "no calls of this group counted there");
        assert_eq!(report.node_in_flight, 9);
        assert_eq!((report.cpu, report.utilization), (Some(80.0), Some(0.5)));
        // No call: no rate (an empty report, which LoadWeighted ignores).
        let idle = member_report(&load(), (0, 0), Duration::from_secs(1), 4, &mut (0.0, 0.0));
        assert_eq!((idle.qps, idle.eps), (0, 0));
    }

    #[test]
    fn low_rates_average_out_over_periods() {
        // 4 calls a second over 10 actors: 0.4 per actor, as whole numbers over 10 periods.
        let mut carry = (0.0, 0.0);
        let total: u32 = (0..10)
            .map(|_| member_report(&load(), (4, 0), Duration::from_secs(1), 10, &mut carry).qps)
            .sum();
        assert_eq!(total, 4);
        // 1.6 and 2.4 per actor stay apart over a few periods (rounding alone gives 2 and 2).
        let sum = |calls: u64| -> u32 {
            let mut carry = (0.0, 0.0);
            (0..5)
                .map(|_| {
                    member_report(&load(), (calls, 0), Duration::from_secs(1), 10, &mut carry).qps
                })
                .sum()
        };
        assert_eq!((sum(16), sum(24)), (8, 12));
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
        assert!(calls.take().is_empty(), "taken once, nothing left behind");
    }

    #[test]
    fn a_node_without_an_answer_keeps_its_actors_reports_and_shifts_no_other() {
        let view =
            |node: &str, pid: u64| MemberView::new(node, false).with_id(format!("{node}#{pid}"));
        let views = vec![
            view("a@h", 1),
            view("a@h", 2),
            view("b@h", 1),
            view("b@h", 2),
            view("c@h", 1),
        ];
        let actors = runs_by_node(&views);
        let names: Vec<(&str, usize)> = actors.iter().map(|(n, k)| (&**n, *k)).collect();
        assert_eq!(names, [("a@h", 2), ("b@h", 2), ("c@h", 1)]);
        let with_cpu = |cpu: f64| LoadReport {
            cpu: Some(cpu),
            ..LoadReport::default()
        };
        // a answers nothing (an older node, a timeout); b and c answer.
        let loads = [None, Some(with_cpu(20.0)), Some(with_cpu(70.0))];
        let counts = HashMap::from([(Arc::clone(&actors[1].0), (20, 0))]);
        let mut carries = HashMap::new();
        store_reports(
            &views,
            &actors,
            &loads,
            &counts,
            Duration::from_secs(1),
            &mut carries,
            1_000,
        );
        let cpu = |i: usize| views[i].report(1_000).map(|r| (r.report.cpu, r.report.qps));
        assert_eq!(
            (cpu(0), cpu(1)),
            (None, None),
            "a's actors keep having none"
        );
        assert_eq!(
            (cpu(2), cpu(3)),
            (Some((Some(20.0), 10)), Some((Some(20.0), 10)))
        );
        assert_eq!(cpu(4), Some((Some(70.0), 0)));
    }
}
