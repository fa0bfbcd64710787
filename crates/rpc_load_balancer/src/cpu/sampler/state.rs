//! One sample: what each [`CpuSampler`] measures, what it carries from one sample to the
//! next, and which figures are publishable.

use std::time::{Duration, Instant};

use super::CpuSampler;

/// What a sampler gave this time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Sample {
    /// A figure to check and publish.
    Value(f64),
    /// Nothing to publish yet (the first sample of a measuring sampler).
    Withheld,
}

/// What a sampler carries from one sample to the next. Owned by the sampling task and lent to
/// a blocking-pool thread for each sample.
pub(super) struct SamplerState {
    pub(super) sampler: CpuSampler,
    /// When sampling started (for the `const-then-panic` test sampler).
    #[cfg(any(test, feature = "test-hooks"))]
    started: Instant,
    /// sysinfo's state (System and Process).
    system: Option<sysinfo::System>,
    /// When the first System refresh was made.
    primed_at: Option<Instant>,
    /// The previous cumulative busy time (seconds) and when it was read (Process, Runtime).
    previous: Option<(f64, Instant)>,
    /// The runtime the node was started on (Runtime).
    runtime: Option<tokio::runtime::Handle>,
}

impl SamplerState {
    pub(super) fn new(sampler: CpuSampler, runtime: Option<tokio::runtime::Handle>) -> Self {
        Self {
            sampler,
            #[cfg(any(test, feature = "test-hooks"))]
            started: Instant::now(),
            system: None,
            primed_at: None,
            previous: None,
            runtime,
        }
    }

    /// Takes one sample. `Err` is a failed sample with the reason; may panic (test samplers,
    /// custom functions).
    pub(super) fn sample(&mut self) -> Result<Sample, String> {
        #[cfg(any(test, feature = "test-hooks"))]
        let started = self.started;
        let Self {
            sampler,
            system,
            primed_at,
            previous,
            runtime,
            ..
        } = self;
        match sampler {
            CpuSampler::System => {
                let system = system.get_or_insert_with(sysinfo::System::new);
                system.refresh_cpu_usage();
                // sysinfo re-reads the counters only every MINIMUM_CPU_UPDATE_INTERVAL: until
                // one such period has passed since the first refresh, its figure is still 0.0.
                let primed = *primed_at.get_or_insert_with(Instant::now);
                if primed.elapsed() < sysinfo::MINIMUM_CPU_UPDATE_INTERVAL {
                    return Ok(Sample::Withheld);
                }
                Ok(measured(f64::from(system.global_cpu_usage())))
            }
            CpuSampler::Process => {
                let pid = sysinfo::get_current_pid()
                    .map_err(|e| format!("cannot find this process's id: {e}"))?;
                let system = system.get_or_insert_with(sysinfo::System::new);
                system.refresh_processes_specifics(
                    sysinfo::ProcessesToUpdate::Some(&[pid]),
                    false,
                    sysinfo::ProcessRefreshKind::nothing().with_cpu(),
                );
                let now = Instant::now();
                let cpu_ms = system
                    .process(pid)
                    .ok_or_else(|| format!("sysinfo does not list this process ({pid})"))?
                    .accumulated_cpu_time();
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                Ok(busy_share(previous, cpu_ms as f64 / 1_000.0, now, cores))
            }
            CpuSampler::Runtime => {
                let handle = runtime
                    .as_ref()
                    .ok_or("the node was not started on a tokio runtime")?;
                let (busy, workers) = runtime_busy(handle)?;
                Ok(busy_share(previous, busy, Instant::now(), workers))
            }
            CpuSampler::Custom(sample) => Ok(Sample::Value(sample())),
            #[cfg(any(test, feature = "test-hooks"))]
            CpuSampler::Const(value) => Ok(Sample::Value(*value)),
            #[cfg(any(test, feature = "test-hooks"))]
            CpuSampler::Panic => panic!("the `panic` test sampler panics on every sample"),
            #[cfg(any(test, feature = "test-hooks"))]
            CpuSampler::ConstThenPanic { value, after } => {
                if started.elapsed() >= *after {
                    panic!(
                        "the `const-then-panic` test sampler panics {} ms after sampling started",
                        after.as_millis()
                    );
                }
                Ok(Sample::Value(*value))
            }
        }
    }
}

/// A measured figure, with rounding at the edges clamped into 0–100 (NaN and infinities stay,
/// to fail the check).
fn measured(cpu: f64) -> Sample {
    Sample::Value(if cpu.is_finite() {
        cpu.clamp(0.0, 100.0)
    } else {
        cpu
    })
}

/// The share (%) of `units` that was busy since the previous reading of the cumulative busy
/// time `busy_secs`; the first reading is withheld.
fn busy_share(
    previous: &mut Option<(f64, Instant)>,
    busy_secs: f64,
    now: Instant,
    units: usize,
) -> Sample {
    let Some((before, at)) = previous.replace((busy_secs, now)) else {
        return Sample::Withheld;
    };
    let wall = now.duration_since(at).as_secs_f64() * units.max(1) as f64;
    if wall <= 0.0 {
        return Sample::Withheld;
    }
    measured((busy_secs - before).max(0.0) / wall * 100.0)
}

/// The runtime's total worker busy time (seconds) and its number of workers.
#[cfg(target_has_atomic = "64")]
fn runtime_busy(handle: &tokio::runtime::Handle) -> Result<(f64, usize), String> {
    let metrics = handle.metrics();
    let workers = metrics.num_workers();
    let busy: Duration = (0..workers)
        .map(|worker| metrics.worker_total_busy_duration(worker))
        .sum();
    Ok((busy.as_secs_f64(), workers))
}

/// Without 64-bit atomics tokio has no busy-time metric.
#[cfg(not(target_has_atomic = "64"))]
fn runtime_busy(_: &tokio::runtime::Handle) -> Result<(f64, usize), String> {
    Err("tokio's worker busy time needs 64-bit atomics on this target".into())
}

/// Why `cpu` is not a publishable reading, if it isn't.
pub(super) fn rejection(cpu: f64) -> Option<String> {
    if cpu.is_nan() {
        Some("the sample is NaN".into())
    } else if cpu.is_infinite() {
        Some(format!("the sample is {cpu}"))
    } else if cpu < 0.0 {
        Some(format!("the sample {cpu} is negative"))
    } else if cpu > 100.0 {
        Some(format!("the sample {cpu} is above 100"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::panic::AssertUnwindSafe;

    use super::*;

    #[test]
    fn the_panic_sampler_panics_every_time() {
        let mut state = SamplerState::new(CpuSampler::Panic, None);
        for _ in 0..2 {
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| state.sample()));
            assert!(outcome.is_err());
        }
    }

    #[test]
    fn the_first_system_sample_is_withheld_then_a_percentage_arrives() {
        let mut state = SamplerState::new(CpuSampler::System, None);
        assert_eq!(state.sample(), Ok(Sample::Withheld));
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL + Duration::from_millis(50));
        match state.sample() {
            Ok(Sample::Value(cpu)) => assert!((0.0..=100.0).contains(&cpu), "{cpu}"),
            other => panic!("expected a value, got {other:?}"),
        }
    }

    #[test]
    fn the_process_sampler_withholds_then_measures() {
        let mut state = SamplerState::new(CpuSampler::Process, None);
        assert_eq!(state.sample(), Ok(Sample::Withheld));
        // Spin a little so there is CPU time to see.
        let until = Instant::now() + Duration::from_millis(100);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        match state.sample() {
            Ok(Sample::Value(cpu)) => assert!((0.0..=100.0).contains(&cpu), "{cpu}"),
            other => panic!("expected a value, got {other:?}"),
        }
    }

    #[test]
    fn without_a_runtime_the_runtime_sampler_fails() {
        let mut state = SamplerState::new(CpuSampler::Runtime, None);
        assert!(state.sample().is_err());
    }
}
