use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;

use super::*;

const MS: Duration = Duration::from_millis(1);

/// Awaits `std::future::pending` with a deadline `after` from now: when it came back.
async fn time_out_after(deadlines: &Deadlines, after: Duration) -> Duration {
    let start = Instant::now();
    let outcome = deadlines
        .timeout(start + after, std::future::pending::<()>())
        .await;
    assert_eq!(outcome, Err(Elapsed));
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn a_future_that_ends_first_gives_its_output_and_frees_its_slot() {
    let deadlines = Deadlines::default();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let waiting = deadlines.timeout(Instant::now() + Duration::from_secs(1), rx);
    let mut waiting = std::pin::pin!(waiting);
    assert!(waiting.as_mut().now_or_never().is_none());
    assert_eq!(deadlines.waiting(), 1);
    tx.send(7).unwrap();
    assert_eq!(waiting.await, Ok(Ok(7)));
    assert_eq!(deadlines.waiting(), 0, "freed when it ended");
}

#[tokio::test(start_paused = true)]
async fn a_call_times_out_at_its_deadline_within_a_millisecond() {
    let deadlines = Deadlines::default();
    for after in [100 * MS, Duration::from_micros(1_500), 3 * MS] {
        let took = time_out_after(&deadlines, after).await;
        assert!(took >= after && took <= after + MS, "{after:?}: {took:?}");
    }
    assert_eq!(deadlines.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_earlier_deadline_registered_later_is_not_held_up_by_the_sweep() {
    let deadlines = Arc::new(Deadlines::default());
    let long = tokio::spawn({
        let deadlines = Arc::clone(&deadlines);
        async move { time_out_after(&deadlines, Duration::from_secs(10)).await }
    });
    // The sweep now sleeps until the long one's deadline.
    tokio::time::sleep(MS).await;
    let short = time_out_after(&deadlines, 100 * MS).await;
    assert!(short <= 101 * MS, "{short:?}");
    let long = long.await.unwrap();
    assert!(long >= Duration::from_secs(10) && long <= Duration::from_secs(10) + MS);
}

#[tokio::test(start_paused = true)]
async fn deadlines_come_in_order_whatever_the_order_they_were_registered_in() {
    let deadlines = Arc::new(Deadlines::default());
    let start = Instant::now();
    let calls: Vec<_> = [50u32, 10, 30, 20, 40]
        .into_iter()
        .map(|ms| {
            let deadlines = Arc::clone(&deadlines);
            tokio::spawn(async move {
                let at = start + MS * ms;
                let outcome = deadlines.timeout(at, std::future::pending::<()>()).await;
                (ms, outcome, Instant::now() - start)
            })
        })
        .collect();
    for call in calls {
        let (ms, outcome, took) = call.await.unwrap();
        assert_eq!(outcome, Err(Elapsed));
        assert!(took >= MS * ms && took <= MS * (ms + 1), "{ms}: {took:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn with_no_call_waiting_the_sweep_sleeps_without_a_timer() {
    let deadlines = Deadlines::default();
    // A future ready at once never registers.
    let ready = std::future::ready(());
    let timed = deadlines.timeout(Instant::now() + Duration::from_secs(5), ready);
    assert_eq!(timed.await, Ok(()));
    assert!(deadlines.shared.lock().heap.is_empty());
    // One that ends before its deadline leaves a stale entry behind.
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let waiting = deadlines.timeout(Instant::now() + Duration::from_secs(5), rx);
    let mut waiting = std::pin::pin!(waiting);
    assert!(waiting.as_mut().now_or_never().is_none());
    drop(tx);
    assert!(waiting.await.unwrap().is_err());
    // The sweep wakes at the stale deadline at most, then has no timer: the runtime, idle,
    // would jump any timer's deadline; a long sleep must see no sweep in between.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let sweeps = deadlines.shared.lock().sweeps;
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        deadlines.shared.lock().sweeps,
        sweeps,
        "no sweep while nothing waits"
    );
    assert!(deadlines.shared.lock().armed.is_none());
}

#[tokio::test]
async fn stale_entries_are_dropped_so_memory_follows_the_calls_waiting() {
    let deadlines = Deadlines::default();
    for _ in 0..20_000 {
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let waiting = deadlines.timeout(Instant::now() + Duration::from_secs(60), rx);
        let mut waiting = std::pin::pin!(waiting);
        assert!(waiting.as_mut().now_or_never().is_none());
        tx.send(1).unwrap();
        assert_eq!(waiting.await, Ok(Ok(1)));
    }
    let table = deadlines.shared.lock();
    assert!(
        table.heap.len() <= COMPACT_FLOOR + 1,
        "{}",
        table.heap.len()
    );
    assert_eq!(table.slots.len(), 1, "one slot, reused");
}

#[tokio::test]
async fn the_sweep_task_ends_with_its_table() {
    let deadlines = Deadlines::default();
    let (_tx, rx) = tokio::sync::oneshot::channel::<()>();
    {
        let waiting = deadlines.timeout(Instant::now() + Duration::from_secs(60), rx);
        let mut waiting = std::pin::pin!(waiting);
        assert!(waiting.as_mut().now_or_never().is_none());
        assert!(deadlines.shared.lock().running);
    }
    let shared = Arc::downgrade(&deadlines.shared);
    drop(deadlines);
    // The sweep held the table weakly and ends once woken.
    tokio::task::yield_now().await;
    tokio::task::yield_now().await;
    assert!(shared.upgrade().is_none());
}

#[test]
fn a_call_polled_outside_a_runtime_keeps_no_later_one_from_timing_out() {
    let deadlines = Deadlines::default();
    let (_tx, rx) = tokio::sync::oneshot::channel::<()>();
    let outside = deadlines.timeout(Instant::now() + 10 * MS, rx);
    let mut outside = std::pin::pin!(outside);
    assert!(outside.as_mut().now_or_never().is_none());
    assert!(!deadlines.shared.lock().running, "no runtime to sweep on");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // A later deadline, on a runtime: the sweep starts there.
    let later = async {
        let call = time_out_after(&deadlines, 50 * MS);
        tokio::time::timeout(Duration::from_secs(5), call).await
    };
    let took = runtime
        .block_on(later)
        .expect("timed out by the sweep, not the test");
    assert!(took >= 50 * MS && took < Duration::from_secs(1), "{took:?}");
}
