//! `LoadWeighted` sets the gauge `rpc_load_balancer.members.weight_unknown{load_balancer}` to
//! its members without a usable weight at each recomputation: all of them before any report,
//! fewer once reports have come for longer than the blackout.

use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use rpc_load_balancer::routing::LoadReport;
use rpc_load_balancer::telemetry::MEMBERS_WEIGHT_UNKNOWN;
use rpc_load_balancer::testkit::SelectorKit;
use rpc_load_balancer::LoadWeighted;

#[test]
fn the_gauge_counts_members_without_a_usable_weight() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let unknown = || -> Option<f64> {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, ..)| key.key().name() == MEMBERS_WEIGHT_UNKNOWN)
            .map(|(key, _, _, value)| {
                let labels: Vec<_> = key.key().labels().map(|l| l.value().to_string()).collect();
                assert_eq!(labels, ["testkit"], "labelled by its balancer");
                match value {
                    DebugValue::Gauge(v) => v.into_inner(),
                    other => panic!("{other:?}"),
                }
            })
    };
    let mut kit = metrics::with_local_recorder(&recorder, || {
        SelectorKit::seeded(&LoadWeighted::new(), 1).unwrap()
    });
    kit.join(["a@h", "b@h", "c@h"]);
    assert_eq!(unknown(), Some(3.0), "no report yet");
    let mut report = LoadReport::default();
    report.qps = 100;
    report.cpu = Some(50.0);
    // Reports every second for 12 s from a and b: past the 10 s blackout.
    for _ in 0..12 {
        for node in ["a@h", "b@h"] {
            kit.set_report(node, &report, Duration::ZERO);
        }
        kit.clock().advance(Duration::from_secs(1));
        kit.pick_and_release(None).unwrap();
    }
    assert_eq!(unknown(), Some(1.0), "c never reported");
}
