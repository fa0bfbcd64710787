//! A balancer's drain report (`stop_balancer`) as JSON and as one line of text.

use rpc_load_balancer::{DrainOutcome, DrainReport};
use serde_json::{json, Value};

/// A balancer's [`DrainReport`] as JSON: `{"balancer", "outcome", "routed_in_flight",
/// "served_in_flight", "took_ms"}`, `outcome` being `"drained"`, `"timed_out"` or `"killed"`.
pub fn drain_json(report: &DrainReport) -> Value {
    json!({
        "balancer": report.balancer,
        "outcome": outcome_name(report.outcome),
        "routed_in_flight": report.routed_in_flight,
        "served_in_flight": report.served_in_flight,
        "took_ms": report.took.as_millis() as u64,
    })
}

/// The `outcome` of [`drain_json`].
fn outcome_name(outcome: DrainOutcome) -> &'static str {
    match outcome {
        DrainOutcome::Drained => "drained",
        DrainOutcome::TimedOut => "timed_out",
        DrainOutcome::Killed => "killed",
        _ => "unknown",
    }
}

/// Plain text of a [`DrainReport`]: one line.
pub(super) fn drain_text(report: &DrainReport) -> String {
    let took = report.took.as_millis();
    match report.outcome {
        DrainOutcome::Drained => format!(
            "balancer {} drained and stopped in {took} ms",
            report.balancer
        ),
        DrainOutcome::TimedOut => format!(
            "balancer {} stopped after {took} ms: the drain timed out with {} routed and {} served \
             calls still running",
            report.balancer, report.routed_in_flight, report.served_in_flight
        ),
        _ => format!(
            "balancer {} had been killed: nothing was drained",
            report.balancer
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_drain_report_reads_as_json_and_as_text() {
        let report = |outcome, routed, served, ms| {
            let mut report: DrainReport = serde_json::from_value(json!({
                "balancer": "work", "outcome": "Drained", "routed_in_flight": routed,
                "served_in_flight": served, "took": {"secs": 0, "nanos": 0},
            }))
            .unwrap();
            report.outcome = outcome;
            report.took = Duration::from_millis(ms);
            report
        };
        let timed_out = report(DrainOutcome::TimedOut, 1, 2, 1_500);
        assert_eq!(
            drain_json(&timed_out),
            json!({"balancer": "work", "outcome": "timed_out", "routed_in_flight": 1,
                   "served_in_flight": 2, "took_ms": 1500})
        );
        assert!(drain_text(&timed_out).contains("timed out with 1 routed and 2 served"));
        let drained = report(DrainOutcome::Drained, 0, 0, 512);
        assert_eq!(drain_json(&drained)["outcome"], "drained");
        assert_eq!(
            drain_text(&drained),
            "balancer work drained and stopped in 512 ms"
        );
        let killed = report(DrainOutcome::Killed, 0, 0, 0);
        assert_eq!(drain_json(&killed)["outcome"], "killed");
    }
}
