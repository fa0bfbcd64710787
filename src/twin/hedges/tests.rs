use super::*;
use crate::twin::recorder::{CallerCounters, CallerRecorder};
use rpc_load_balancer::telemetry::{HEDGE, HEDGE_BUDGET_EXHAUSTED, HEDGE_WON};

#[test]
fn the_recorder_keeps_the_three_hedge_counters_and_drops_the_rest() {
    let all = CallerCounters::default();
    let counters = all.hedges.clone();
    let recorder = CallerRecorder(all);
    let start = counters.read();
    metrics::with_local_recorder(&recorder, || {
        metrics::counter!(HEDGE, "load_balancer" => "demo").increment(3);
        metrics::counter!(HEDGE_WON, "load_balancer" => "demo").increment(1);
        metrics::counter!(HEDGE_BUDGET_EXHAUSTED, "load_balancer" => "demo").increment(2);
        metrics::counter!("rpc_load_balancer.retry.count").increment(7);
        metrics::gauge!("g").set(1.0);
        metrics::histogram!("h").record(1.0);
    });
    assert_eq!(
        counters.since(start),
        HedgeTally {
            sent: 3,
            won: 1,
            refused_by_budget: 2
        }
    );
    let later = counters.read();
    metrics::with_local_recorder(&recorder, || {
        metrics::counter!(HEDGE, "load_balancer" => "demo").increment(1);
    });
    assert_eq!(counters.since(later).sent, 1, "only what came after");
}
