//! The load engine: concurrent callers make calls back to back until an [`Amount`] is reached
//! or the run is stopped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use tokio::task::JoinSet;

use super::progress::{progress_message, show_progress};
use super::tally::{lock, Tally};
use super::{LoadReport, Outcome};

/// When a load run stops.
#[derive(Debug, Clone, Copy)]
pub enum Amount {
    /// After this many calls.
    Calls(u64),
    /// After this long.
    Duration(Duration),
}

/// The load engine: `concurrency` callers, each on its own task, make calls back to back until
/// `amount` is reached or `stop` resolves; every call is timed from just before `call(caller,
/// n)` is invoked to when its future completes. `caller` is the caller's index
/// (0..concurrency) and `n` the call's number in the run. With `Amount::Calls` the bar
/// advances by one per call; with `Amount::Duration` it shows whole seconds elapsed; its
/// message shows calls, calls/s and errors as they happen. Callers started after the run's
/// end make no call, and a call started before it is awaited. When `stop` resolves first, the
/// calls in flight are dropped and the report counts the calls that had ended; the second
/// value is then `true`.
///
/// The report's `algorithm` is empty. Its memory does not grow with the number of calls.
pub async fn drive_until<C, Fut>(
    concurrency: u32,
    amount: Amount,
    bar: &ProgressBar,
    stop: impl std::future::Future<Output = ()>,
    call: C,
) -> (LoadReport, bool)
where
    C: Fn(u32, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    let issued = Arc::new(AtomicU64::new(0));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let deadline = match amount {
        Amount::Duration(d) => Some(started + d),
        Amount::Calls(_) => None,
    };
    let mut callers = JoinSet::new();
    for caller in 0..concurrency {
        let (call, issued, tally) = (call.clone(), Arc::clone(&issued), Arc::clone(&tally));
        let bar = bar.clone();
        callers.spawn(async move {
            loop {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                match (amount, deadline) {
                    (Amount::Calls(total), _) if n >= total => break,
                    (_, Some(deadline)) if Instant::now() >= deadline => break,
                    _ => {}
                }
                let at = Instant::now();
                let outcome = call(caller, n).await;
                lock(&tally).record(at.elapsed(), outcome);
                if deadline.is_none() {
                    bar.inc(1);
                }
            }
        });
    }
    let progress = tokio::spawn(show_progress(
        bar.clone(),
        Arc::clone(&tally),
        started,
        deadline.is_some(),
    ));
    let all_done = async { while callers.join_next().await.is_some() {} };
    let stopped = tokio::select! {
        () = all_done => false,
        () = stop => true,
    };
    // Stopped: the calls in flight are dropped with their callers.
    callers.shutdown().await;
    progress.abort();
    let elapsed = started.elapsed();
    let tally = std::mem::take(&mut *lock(&tally));
    let rate = tally.calls as f64 / elapsed.as_secs_f64().max(1e-9);
    bar.set_message(progress_message(tally.calls, rate, &tally.errors));
    let mut report = tally.into_report();
    report.elapsed = elapsed;
    (report, stopped)
}

/// [`drive_until`] with no stop: the run ends when `amount` is reached.
pub async fn drive<C, Fut>(
    concurrency: u32,
    amount: Amount,
    bar: &ProgressBar,
    call: C,
) -> LoadReport
where
    C: Fn(u32, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send,
{
    drive_until(concurrency, amount, bar, std::future::pending(), call)
        .await
        .0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::Latencies;
    use crate::load::Failure;

    /// A run of `calls` calls that end at once: every third fails, the others are served by
    /// `a` or `b` in turn.
    async fn instant_run(calls: u64, bar: &ProgressBar) -> LoadReport {
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        drive(4, Amount::Calls(calls), bar, move |_, n| {
            let served = if n % 2 == 0 { a.clone() } else { b.clone() };
            async move {
                if n % 3 == 0 {
                    Err(Failure::new("node_down", format!("call {n}")))
                } else {
                    Ok(served)
                }
            }
        })
        .await
    }

    #[tokio::test]
    async fn a_run_holds_the_same_memory_for_any_number_of_calls() {
        let short = instant_run(30, &ProgressBar::hidden()).await;
        let long = instant_run(300_000, &ProgressBar::hidden()).await;
        assert_eq!(long.calls, 300_000);
        assert_eq!(long.latency.count(), 300_000);
        assert_eq!(long.error_count(), 100_000);
        assert_eq!(long.ok_count(), 200_000);
        assert_eq!(short.latency.size_bytes(), long.latency.size_bytes());
        assert_eq!(short.latency.size_bytes(), Latencies::new().size_bytes());
        // Bounded by nodes and error kinds, not calls.
        assert_eq!(long.per_node.len(), 2);
        assert_eq!(long.error_samples.len(), 1);
        assert_eq!(long.error_samples["node_down"], "call 0");
    }

    #[tokio::test]
    async fn the_progress_counts_calls_and_errors() {
        let bar = ProgressBar::hidden();
        let report = instant_run(30, &bar).await;
        assert_eq!(bar.position(), 30);
        let message = bar.message();
        assert!(
            message.starts_with("30 calls, ")
                && message.ends_with(" calls/s, 10 errors (node_down 10)"),
            "{message}"
        );
        assert_eq!(report.error_count(), 10);
    }

    #[tokio::test]
    async fn a_stopped_run_reports_the_calls_that_ended() {
        let (report, stopped) = drive_until(
            2,
            Amount::Calls(1_000),
            &ProgressBar::hidden(),
            tokio::time::sleep(Duration::from_millis(100)),
            |_, n| async move {
                if n >= 10 {
                    std::future::pending::<()>().await;
                }
                Ok(Arc::from("a"))
            },
        )
        .await;
        assert!(stopped);
        assert_eq!(report.calls, 10);
        assert_eq!(report.per_node["a"], 10);
    }
}
