//! The `stragglers` twin with hedging (`rpclb demo --scenario stragglers --hedge`, issue 22):
//! every member makes 1 % of its calls 20× slower, and the two caller processes' balancers
//! hedge the (declared idempotent) calls after their recent p95. The run's `--json` counts
//! the hedges the callers sent, and they stay within the budget the spec sets: 5 % of the
//! calls plus 1 per second over the 10 s window, per caller. Behaviour only: no latency is
//! asserted (bench/README.md has the figures).

use std::time::Duration;

use serde_json::Value;

use crate::commands::rpclb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stragglers_twin_hedges_within_the_budget() {
    // No warm-up: every call is in the window, so each caller's budget was fed by the
    // window's calls alone.
    let (code, stdout) = rpclb(
        &[
            "demo",
            "--scenario",
            "stragglers",
            "--algorithms",
            "round_robin",
            "--hedge",
            "p95,0.05,1",
            "--duration-s",
            "2",
            "--warmup-s",
            "0",
            "--json",
        ],
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["scenario"]["name"], "stragglers", "{report}");
    assert_eq!(report["scenario"]["callers"], 2, "{report}");
    let run = &report["runs"][0];
    assert_eq!(
        run["faulty_member"],
        Value::Null,
        "every member straggles: {run}"
    );
    let calls = run["calls"].as_u64().unwrap();
    let (ok, errors) = (run["ok"].as_u64().unwrap(), run["errors"].as_u64().unwrap());
    assert!(calls > 100, "{run}");
    assert_eq!(calls, ok + errors, "{run}");
    // The calls succeed (a starved machine may time out one call in a hundred at most).
    assert!(errors * 100 <= calls, "{run}");
    let hedges = &run["hedges"];
    let sent = hedges["hedges"].as_u64().unwrap_or_else(|| panic!("{run}"));
    let won = hedges["won"].as_u64().unwrap();
    assert!(hedges["refused_by_budget"].is_u64(), "{run}");
    assert!(sent > 0, "the stragglers were hedged: {run}");
    assert!(won <= sent, "{run}");
    let share = hedges["extra_share"].as_f64().unwrap();
    assert!((share - sent as f64 / calls as f64).abs() < 1e-9, "{run}");
    // The budget: 5 % of the calls plus each caller's reserve of 1/s × 10 s.
    let budget = 0.05 * calls as f64 + 2.0 * 10.0;
    assert!(
        sent as f64 <= budget,
        "{sent} hedges, budget {budget}: {run}"
    );
}
