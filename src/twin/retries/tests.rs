use metrics::with_local_recorder;

use super::*;
use crate::twin::recorder::{CallerCounters, CallerRecorder};
use rpc_load_balancer::telemetry::{RETRY, RETRY_BUDGET_EXHAUSTED};

#[test]
fn the_recorder_keeps_the_two_retry_counters_and_nothing_else() {
    let all = CallerCounters::default();
    let counters = all.retries.clone();
    let recorder = CallerRecorder(all);
    let start = counters.read();
    with_local_recorder(&recorder, || {
        metrics::counter!(RETRY, "load_balancer" => "demo", "reason" => "connection_lost")
            .increment(3);
        metrics::counter!(RETRY_BUDGET_EXHAUSTED, "load_balancer" => "demo").increment(1);
        metrics::counter!("rpc_load_balancer.calls.count").increment(100);
    });
    assert_eq!(
        counters.since(start),
        RetryTally {
            sent: 3,
            refused_by_budget: 1
        }
    );
    let later = counters.read();
    with_local_recorder(&recorder, || {
        metrics::counter!(RETRY, "load_balancer" => "demo").increment(2);
    });
    assert_eq!(counters.since(later).sent, 2);
}
