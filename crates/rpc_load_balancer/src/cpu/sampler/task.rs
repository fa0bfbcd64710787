//! The node's sampling task: a sample every interval on the blocking pool, good ones
//! published to the cache, failed ones logged.

use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::state::{rejection, Sample, SamplerState};
use super::CpuSampler;

/// Starts node `node`'s sampling task on the current tokio runtime: a sample with `sampler`
/// at once and then every `interval` (a late tick delays the next ones rather than bunching
/// them), each on the blocking pool; good samples are stored under `node` in the cache. Runs
/// until the returned handle is aborted (or the runtime stops).
///
/// Panics outside a tokio runtime (as `tokio::spawn` does).
pub(crate) fn spawn(sampler: CpuSampler, node: String, interval: Duration) -> JoinHandle<()> {
    let state = SamplerState::new(sampler, tokio::runtime::Handle::try_current().ok());
    tokio::spawn(run(node, interval.max(Duration::from_millis(1)), state))
}

/// The sampling loop.
async fn run(node: String, interval: Duration, mut state: SamplerState) {
    tracing::debug!(%node, sampler = %state.sampler, interval_ms = interval.as_millis() as u64, "CPU sampling started");
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let taken = tokio::task::spawn_blocking(move || {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| state.sample()));
            (state, outcome, Instant::now())
        })
        .await;
        let (back, outcome, taken_at) = match taken {
            Ok(taken) => taken,
            // Cancelled: the runtime is shutting down. (Panics are caught inside.)
            Err(_) => return,
        };
        state = back;
        let why = match outcome {
            Ok(Ok(Sample::Value(cpu))) => match rejection(cpu) {
                None => {
                    let age_ms = taken_at.elapsed().as_millis() as u64;
                    crate::cpu::cache().store(&node, cpu, age_ms);
                    tracing::trace!(%node, cpu, "CPU sample published");
                    continue;
                }
                Some(why) => why,
            },
            Ok(Ok(Sample::Withheld)) => {
                tracing::trace!(%node, "CPU sample withheld (nothing to compare with yet)");
                continue;
            }
            Ok(Err(why)) => why,
            Err(panic) => format!(
                "the sampler panicked: {}",
                crate::panic::panic_message(panic.as_ref())
            ),
        };
        tracing::warn!(
            %node,
            sampler = %state.sampler,
            reason = %why,
            "CPU sample failed; nothing published (the node's last reading keeps aging)"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::cpu::{cache, CpuReading};

    /// Waits (≤ 5 s) until `node` has a reading that satisfies `ok`.
    async fn reading_of(node: &str, ok: impl Fn(&CpuReading) -> bool) -> Option<CpuReading> {
        tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let Some(reading) = cache().get(node) {
                    if ok(&reading) {
                        return reading;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .ok()
    }

    /// A custom sampler returning `value`, counting its calls.
    fn counted(value: f64) -> (CpuSampler, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let sampler = CpuSampler::custom(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            value
        });
        (sampler, calls)
    }

    /// Waits (≤ 5 s) until `calls` reaches `n`.
    async fn calls_reach(calls: &AtomicUsize, n: usize) {
        tokio::time::timeout(Duration::from_secs(5), async {
            while calls.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the sampler was called");
    }

    #[tokio::test]
    async fn const_publishes_to_the_cache() {
        let node = "sampler-const@test";
        let task = spawn(
            CpuSampler::Const(42.5),
            node.into(),
            Duration::from_millis(20),
        );
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert_eq!(reading.cpu, 42.5);
        assert!(reading.age_ms < 1_000, "fresh: {reading:?}");
        task.abort();
    }

    #[tokio::test]
    async fn failed_samples_publish_nothing_and_sampling_goes_on() {
        let panics = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&panics);
        let panicking = CpuSampler::custom(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            panic!("sampler failure for a test")
        });
        let mut cases = vec![("sampler-panic@test", panicking, panics)];
        for (node, value) in [
            ("sampler-nan@test", f64::NAN),
            ("sampler-inf@test", f64::INFINITY),
            ("sampler-neginf@test", f64::NEG_INFINITY),
            ("sampler-negative@test", -0.5),
            ("sampler-over@test", 100.5),
        ] {
            let (sampler, calls) = counted(value);
            cases.push((node, sampler, calls));
        }
        let mut tasks = Vec::new();
        for (node, sampler, calls) in &cases {
            tasks.push(spawn(
                sampler.clone(),
                node.to_string(),
                Duration::from_millis(10),
            ));
            // Several samples were taken (and the task survived the failures).
            calls_reach(calls, 3).await;
        }
        for (task, (node, ..)) in tasks.iter().zip(&cases) {
            assert_eq!(cache().get(node), None, "{node} published nothing");
            assert!(!task.is_finished(), "{node}'s sampling goes on");
            task.abort();
        }
    }

    #[tokio::test]
    async fn the_edges_of_the_range_are_published() {
        for (node, value) in [("sampler-zero@test", 0.0), ("sampler-full@test", 100.0)] {
            let task = spawn(
                CpuSampler::Const(value),
                node.into(),
                Duration::from_millis(10),
            );
            let reading = reading_of(node, |_| true).await.expect("a reading");
            assert_eq!(reading.cpu, value);
            task.abort();
        }
    }

    #[tokio::test]
    async fn the_system_sampler_publishes_after_its_withheld_first_sample() {
        let node = "sampler-system@test";
        let task = spawn(CpuSampler::System, node.into(), Duration::from_millis(250));
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert!((0.0..=100.0).contains(&reading.cpu), "{reading:?}");
        task.abort();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_runtime_sampler_gives_a_percentage() {
        let mut state =
            SamplerState::new(CpuSampler::Runtime, Some(tokio::runtime::Handle::current()));
        assert_eq!(state.sample(), Ok(Sample::Withheld));
        // Some async work on the workers, some idle time.
        let busy = tokio::spawn(async {
            let until = Instant::now() + Duration::from_millis(30);
            while Instant::now() < until {
                tokio::task::yield_now().await;
            }
        });
        busy.await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        match state.sample() {
            Ok(Sample::Value(cpu)) => assert!((0.0..=100.0).contains(&cpu), "{cpu}"),
            other => panic!("expected a value, got {other:?}"),
        }
        // And through the sampling task.
        let node = "sampler-runtime@test";
        let task = spawn(CpuSampler::Runtime, node.into(), Duration::from_millis(20));
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert!((0.0..=100.0).contains(&reading.cpu), "{reading:?}");
        task.abort();
    }

    #[tokio::test]
    async fn const_then_panic_switches_and_the_reading_ages() {
        let mut state = SamplerState::new(
            CpuSampler::ConstThenPanic {
                value: 30.0,
                after: Duration::from_secs(3_600),
            },
            None,
        );
        assert_eq!(state.sample(), Ok(Sample::Value(30.0)));
        let mut switched = SamplerState::new(
            CpuSampler::ConstThenPanic {
                value: 30.0,
                after: Duration::ZERO,
            },
            None,
        );
        assert!(std::panic::catch_unwind(AssertUnwindSafe(|| switched.sample())).is_err());

        let node = "sampler-const-then-panic@test";
        let sampler = CpuSampler::ConstThenPanic {
            value: 30.0,
            after: Duration::from_millis(150),
        };
        let task = spawn(sampler, node.into(), Duration::from_millis(10));
        let reading = reading_of(node, |_| true).await.expect("a reading");
        assert_eq!(reading.cpu, 30.0);
        // After the switch nothing new is stored: the last reading only gets older.
        let aged = reading_of(node, |r| r.age_ms >= 400).await;
        assert_eq!(
            aged.map(|r| r.cpu),
            Some(30.0),
            "the reading aged past 400 ms"
        );
        assert!(!task.is_finished());
        task.abort();
    }

    #[tokio::test]
    async fn aborting_the_task_stops_sampling() {
        let (sampler, calls) = counted(10.0);
        let task = spawn(
            sampler,
            "sampler-abort@test".into(),
            Duration::from_millis(5),
        );
        calls_reach(&calls, 2).await;
        task.abort();
        let _ = task.await;
        let seen = calls.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A sample handed to the blocking pool just before the abort may still run.
        assert!(calls.load(Ordering::SeqCst) <= seen + 1);
    }
}
