//! The failing-member twin with failures of the retryable kind (`rpclb demo --scenario
//! failing-member --fail-kind retryable`, issue 22): without `--retries` the failing member's
//! failures reach the callers as errors; with `--retries` the callers' balancers send those
//! calls again to other members under their retry budgets, so fewer errors reach the callers
//! than the calls that were retried, and the report counts the retries. (Behaviour only: the
//! goal's figures are in bench/README.md, "Issue 22: retry budgets on real processes".)

use std::time::Duration;

use serde_json::Value;

use crate::commands::rpclb;

/// The run's errors other than timeouts: the failures that reached the callers (a timeout is
/// the loaded machine's, and is never retried).
fn failures(run: &Value) -> u64 {
    run["errors"].as_u64().unwrap() - run["timeouts"].as_u64().unwrap()
}

/// The one run of a short failing-member twin (Random) with `extra` flags, from its `--json`.
async fn failing_member_run(extra: &[&str]) -> Value {
    let args: Vec<&str> = [
        "demo",
        "--scenario",
        "failing-member",
        "--fail-kind",
        "retryable",
        "--algorithms",
        "random",
        "--duration-s",
        "3",
        "--warmup-s",
        "0.5",
        "--json",
    ]
    .into_iter()
    .chain(extra.iter().copied())
    .collect();
    let (code, stdout) = rpclb(&args, Duration::from_secs(60)).await;
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["interrupted"], false, "{report}");
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{report}");
    runs[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_failures_are_errors_without_retries_and_retried_away_with_them() {
    let without = failing_member_run(&[]).await;
    let errors_without = failures(&without);
    assert!(
        errors_without > 0,
        "the failures reach the callers: {without}"
    );
    assert!(
        without.get("retries").is_none(),
        "nothing retried: {without}"
    );

    let with = failing_member_run(&["--retries"]).await;
    let retries = &with["retries"];
    let sent = retries["retries"].as_u64().unwrap();
    assert!(
        sent > 0,
        "calls that met the failing member were retried: {with}"
    );
    assert!(retries["extra_share"].as_f64().unwrap() > 0.0, "{with}");
    assert!(retries["refused_by_budget"].as_u64().is_some(), "{with}");
    // Every retry follows one failure of the failing member: fewer failures reached the
    // callers than were retried, and fewer than without retries.
    let errors_with = failures(&with);
    assert!(
        errors_with < sent,
        "{errors_with} errors, {sent} retries: {with}"
    );
    assert!(
        errors_with < errors_without,
        "{errors_with} errors with retries, {errors_without} without"
    );
}
