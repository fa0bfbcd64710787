//! The capacity-limited demo function `work` of every `rpclb node`, the real-process twin of a
//! lab member (`rpclb demo --scenario`): at most `capacity` calls are in service at once (a
//! tokio [`Semaphore`]; the rest wait in its FIFO queue), each sleeps a lognormal service time
//! (median `median_ms`, shape σ, from a seeded [`StdRng`]), and the node can be made slow
//! (service × a factor, for ever or for its first seconds) or failing (a fraction of calls fail
//! at once, unserved, with an error reply or a failure of the retryable kind: [`FailKind`]) —
//! the lab's `slow`, `join` with a factor and `fail` faults — and can have stragglers (a
//! fraction of its calls take a factor times their service time, drawn from the same seeded
//! RNG: the lab's `[stragglers]`).
//!
//! Sleeping burns no CPU, so the work reports its own **utilization** instead: the mean of
//! calls in service ÷ capacity since the previous reading, in percent
//! ([`Work::utilization_percent`]). `rpclb node --cpu-from-work` makes that the node's CPU
//! reading (a [`CpuSampler::custom`](rpc_load_balancer::cpu::CpuSampler::custom)), so LeastCpu
//! routes by it.
//!
//! | name | args | reply | does |
//! |---|---|---|---|
//! | `work` | `()` | `()` | waits for a free slot, sleeps one service time (or fails at once, with the failing fraction) |
//! | `work_fault` | [`WorkFault`] | `()` | sets this node's slow factor, failing fraction and failure kind from now on |

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rpc_load_balancer::{Error, FunctionError, Node, RemoteFunction};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
// tokio's clock: the same as std's in a node, and paused time in tests.
use tokio::time::Instant;

mod fail_kind;
mod settings;

pub use fail_kind::{FailKind, LOST_CONNECTION};
use settings::{check_fail, check_slow};
pub use settings::{WorkSettingError, WorkSettings, MAX_CAPACITY};

/// The longest service time `work` sleeps, whatever the sample and factor: a cast (no
/// deadline) ends then at the latest.
pub const MAX_SERVICE: Duration = Duration::from_secs(60);

/// What `work_fault` sets on a node, from the moment it runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkFault {
    /// Service time multiplier (1–1,000); 1 = healthy.
    pub slow_factor: f64,
    /// Fraction of calls (0–1) that fail at once; 0 = none.
    pub fail_fraction: f64,
    /// How they fail (default: an error reply of the function); absent from JSON means
    /// [`FailKind::Application`].
    #[serde(default)]
    pub fail_kind: FailKind,
}

/// The fault state: the slow factor (until when) and the failing fraction.
#[derive(Debug)]
struct Fault {
    slow_factor: f64,
    slow_until: Option<Instant>,
    fail_fraction: f64,
    fail_kind: FailKind,
}

/// Calls in service, integrated over time, for the utilization readings.
#[derive(Debug)]
struct Busy {
    in_service: u32,
    since: Instant,
    /// ∫ calls in service dt since `sampled_at`, in call·ns.
    integral: u128,
    sampled_at: Instant,
}

impl Busy {
    fn advance(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.since).as_nanos();
        self.integral += dt * u128::from(self.in_service);
        self.since = now;
    }
}

/// One node's `work`: its queue, its service-time RNG, its fault and its utilization. Share it
/// with [`Arc`]: the functions and the CPU sampler hold it.
#[derive(Debug)]
pub struct Work {
    capacity: u32,
    median_ms: f64,
    sigma: f64,
    /// The straggling fraction and factor (`[stragglers]`; fraction 0: none).
    stragglers: (f64, f64),
    slots: Semaphore,
    rng: Mutex<StdRng>,
    fault: Mutex<Fault>,
    busy: Mutex<Busy>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Leaves the busy count when a call's service ends or is dropped (its caller gave up).
struct InService<'a>(&'a Work);

impl Drop for InService<'_> {
    fn drop(&mut self) {
        let mut busy = lock(&self.0.busy);
        busy.advance(Instant::now());
        busy.in_service = busy.in_service.saturating_sub(1);
    }
}

impl Work {
    /// The work of `settings`, starting now (a `slow_for` counts from here).
    ///
    /// Errors: [`WorkSettingError`] for a setting out of range.
    pub fn new(settings: WorkSettings) -> Result<Arc<Self>, WorkSettingError> {
        settings.validate()?;
        let now = Instant::now();
        Ok(Arc::new(Self {
            capacity: settings.capacity,
            median_ms: settings.median_ms,
            sigma: settings.sigma,
            stragglers: (settings.straggler_fraction, settings.straggler_factor),
            slots: Semaphore::new(settings.capacity as usize),
            rng: Mutex::new(StdRng::seed_from_u64(settings.seed)),
            fault: Mutex::new(Fault {
                slow_factor: settings.slow_factor,
                slow_until: settings.slow_for.and_then(|d| now.checked_add(d)),
                fail_fraction: settings.fail_fraction,
                fail_kind: FailKind::Application,
            }),
            busy: Mutex::new(Busy {
                in_service: 0,
                since: now,
                integral: 0,
                sampled_at: now,
            }),
        }))
    }

    /// Sets the fault from now on (a slow factor set here lasts for ever).
    ///
    /// Errors: [`WorkSettingError`] for a value out of range (nothing changes).
    pub fn set_fault(&self, fault: WorkFault) -> Result<(), WorkSettingError> {
        check_slow(fault.slow_factor)?;
        check_fail(fault.fail_fraction)?;
        let mut state = lock(&self.fault);
        state.slow_factor = fault.slow_factor;
        state.slow_until = None;
        state.fail_fraction = fault.fail_fraction;
        state.fail_kind = fault.fail_kind;
        Ok(())
    }

    /// The factor in force now (1 once a `slow_for` has passed).
    fn factor(&self, now: Instant) -> f64 {
        let fault = lock(&self.fault);
        match fault.slow_until {
            Some(until) if now >= until => 1.0,
            _ => fault.slow_factor,
        }
    }

    /// One lognormal service time, `median · e^(σ·Z)` (Z standard normal, Box–Muller), times
    /// the factor in force and, for a straggler (with the straggling fraction), the
    /// straggler factor, at most [`MAX_SERVICE`]; `None` when the call fails instead.
    fn draw(&self) -> Option<Duration> {
        let factor = self.factor(Instant::now());
        let fail = lock(&self.fault).fail_fraction;
        let mut rng = lock(&self.rng);
        if fail > 0.0 && rng.random::<f64>() < fail {
            return None;
        }
        let u1 = 1.0 - rng.random::<f64>();
        let u2 = rng.random::<f64>();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let mut ms = self.median_ms * (self.sigma * z).exp() * factor;
        // (No draw without stragglers: the other faults' service times are unchanged.)
        let (fraction, straggler) = self.stragglers;
        if fraction > 0.0 && rng.random::<f64>() < fraction {
            ms *= straggler;
        }
        Some(Duration::from_secs_f64(
            (ms / 1e3).clamp(0.0, MAX_SERVICE.as_secs_f64()),
        ))
    }

    /// Serves one call: a failure at once with the failing fraction, else a slot then a sleep.
    async fn serve(&self) -> Result<(), FunctionError> {
        let Some(service) = self.draw() else {
            return Err(FunctionError::new(match lock(&self.fault).fail_kind {
                FailKind::Application => "work: failed (the node's failing fraction)",
                FailKind::Retryable => LOST_CONNECTION,
            }));
        };
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| FunctionError::new("work: the queue is closed"))?;
        {
            let mut busy = lock(&self.busy);
            busy.advance(Instant::now());
            busy.in_service += 1;
        }
        let _in_service = InService(self);
        tokio::time::sleep(service).await;
        Ok(())
    }

    /// The mean of calls in service ÷ capacity since the previous reading (or the start), in
    /// percent (0–100); resets the averaging window.
    pub fn utilization_percent(&self) -> f64 {
        let now = Instant::now();
        let mut busy = lock(&self.busy);
        busy.advance(now);
        let window = now.saturating_duration_since(busy.sampled_at).as_nanos();
        let integral = std::mem::take(&mut busy.integral);
        busy.sampled_at = now;
        if window == 0 {
            return f64::from(busy.in_service.min(self.capacity)) / f64::from(self.capacity)
                * 100.0;
        }
        let mean = integral as f64 / window as f64;
        (mean / f64::from(self.capacity) * 100.0).clamp(0.0, 100.0)
    }
}

/// `work`: see the [module docs](self).
#[derive(Debug, Clone)]
pub struct WorkFn(pub Arc<Work>);

impl RemoteFunction for WorkFn {
    const NAME: &'static str = "work";
    type Args = ();
    type Reply = ();
    async fn call(&self, _args: ()) -> Result<(), FunctionError> {
        // The library drops the call (and so its sleep) at its deadline or when its caller
        // gives up.
        self.0.serve().await
    }
}

/// `work_fault`: sets the node's fault (see [`WorkFault`]); a value out of range is refused
/// with [`FunctionError::bad_request`].
#[derive(Debug, Clone)]
pub struct WorkFaultFn(pub Arc<Work>);

impl RemoteFunction for WorkFaultFn {
    const NAME: &'static str = "work_fault";
    type Args = WorkFault;
    type Reply = ();
    async fn call(&self, fault: WorkFault) -> Result<(), FunctionError> {
        self.0
            .set_fault(fault)
            .map_err(|e| FunctionError::bad_request(e.to_string()))
    }
}

/// Registers `work` and `work_fault` on `node`.
///
/// Errors: [`Error::DuplicateFunction`] if one of the names is already registered.
pub fn register(node: &Node, work: &Arc<Work>) -> Result<(), Error> {
    node.register(WorkFn(Arc::clone(work)))?;
    node.register(WorkFaultFn(Arc::clone(work)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(settings: WorkSettings) -> Arc<Work> {
        Work::new(settings).unwrap()
    }

    #[test]
    fn settings_out_of_range_are_refused_naming_the_field() {
        let bad = |s: WorkSettings| Work::new(s).unwrap_err().field;
        let ok = WorkSettings::default();
        assert_eq!(bad(WorkSettings { capacity: 0, ..ok }), "capacity");
        assert_eq!(
            bad(WorkSettings {
                median_ms: 0.0,
                ..ok
            }),
            "median_ms"
        );
        assert_eq!(
            bad(WorkSettings {
                median_ms: f64::NAN,
                ..ok
            }),
            "median_ms"
        );
        assert_eq!(bad(WorkSettings { sigma: -1.0, ..ok }), "sigma");
        assert_eq!(
            bad(WorkSettings {
                slow_factor: 0.5,
                ..ok
            }),
            "slow_factor"
        );
        assert_eq!(
            bad(WorkSettings {
                fail_fraction: 1.5,
                ..ok
            }),
            "fail_fraction"
        );
        assert_eq!(
            bad(WorkSettings {
                straggler_fraction: 1.5,
                ..ok
            }),
            "straggler_fraction"
        );
        assert_eq!(
            bad(WorkSettings {
                straggler_factor: 0.5,
                ..ok
            }),
            "straggler_factor"
        );
        let w = work(ok);
        let e = w
            .set_fault(WorkFault {
                slow_factor: 1.0,
                fail_fraction: -0.1,
                fail_kind: FailKind::Application,
            })
            .unwrap_err();
        assert_eq!(e.field, "fail_fraction");
    }

    #[test]
    fn service_times_are_lognormal_around_the_median_and_seeded() {
        let settings = WorkSettings {
            median_ms: 10.0,
            sigma: 0.5,
            seed: 7,
            ..Default::default()
        };
        let (a, b) = (work(settings), work(settings));
        let mut draws: Vec<f64> = (0..4001)
            .map(|_| a.draw().unwrap().as_secs_f64() * 1e3)
            .collect();
        let again: Vec<f64> = (0..4001)
            .map(|_| b.draw().unwrap().as_secs_f64() * 1e3)
            .collect();
        assert_eq!(draws, again, "same seed, same service times");
        draws.sort_by(f64::total_cmp);
        let median = draws[2000];
        assert!((9.5..10.5).contains(&median), "median {median}");
        // e^(0.5·2.326) ≈ 3.2: the 99th percentile of σ 0.5.
        let p99 = draws[3960] / median;
        assert!((2.8..3.6).contains(&p99), "p99/median {p99}");
    }

    #[test]
    fn a_slow_factor_multiplies_and_a_failing_fraction_fails() {
        let slow = work(WorkSettings {
            sigma: 0.0,
            slow_factor: 10.0,
            ..Default::default()
        });
        assert_eq!(slow.draw(), Some(Duration::from_millis(100)));
        let brief = work(WorkSettings {
            sigma: 0.0,
            slow_factor: 5.0,
            slow_for: Some(Duration::ZERO),
            ..Default::default()
        });
        assert_eq!(
            brief.draw(),
            Some(Duration::from_millis(10)),
            "slow_for has passed"
        );
        slow.set_fault(WorkFault {
            slow_factor: 1.0,
            fail_fraction: 0.5,
            fail_kind: FailKind::Application,
        })
        .unwrap();
        let failed = (0..2000).filter(|_| slow.draw().is_none()).count();
        assert!((850..1150).contains(&failed), "{failed} of 2000 failed");
        slow.set_fault(WorkFault {
            slow_factor: 1.0,
            fail_fraction: 1.0,
            fail_kind: FailKind::Application,
        })
        .unwrap();
        assert_eq!(slow.draw(), None);
    }

    #[test]
    fn stragglers_take_the_factor_with_their_fraction_and_repeat_with_the_seed() {
        let settings = WorkSettings {
            sigma: 0.0,
            straggler_fraction: 0.1,
            straggler_factor: 20.0,
            seed: 3,
            ..Default::default()
        };
        let draws =
            |w: Arc<Work>| -> Vec<Duration> { (0..5000).map(|_| w.draw().unwrap()).collect() };
        let (a, b) = (draws(work(settings)), draws(work(settings)));
        assert_eq!(a, b, "same seed, same stragglers");
        let slow = a
            .iter()
            .filter(|&&d| d == Duration::from_millis(200))
            .count();
        let ordinary = a
            .iter()
            .filter(|&&d| d == Duration::from_millis(10))
            .count();
        assert_eq!(slow + ordinary, 5000, "each call is one or the other");
        assert!((400..600).contains(&slow), "{slow} of 5000 straggled");
    }

    #[tokio::test]
    async fn a_failing_fraction_fails_with_its_kind_and_the_kind_defaults_to_application() {
        let w = work(WorkSettings::default());
        let fail_all = |fail_kind| WorkFault {
            slow_factor: 1.0,
            fail_fraction: 1.0,
            fail_kind,
        };
        w.set_fault(fail_all(FailKind::Application)).unwrap();
        let message = w.serve().await.unwrap_err().message().to_string();
        assert_ne!(message, LOST_CONNECTION);
        w.set_fault(fail_all(FailKind::Retryable)).unwrap();
        let message = w.serve().await.unwrap_err().message().to_string();
        assert_eq!(message, LOST_CONNECTION);
        // `rpclb call work_fault` of the release before: no kind.
        let fault: WorkFault =
            serde_json::from_str(r#"{"slow_factor": 1, "fail_fraction": 0.5}"#).unwrap();
        assert_eq!(fault.fail_kind, FailKind::Application);
        let fault: WorkFault = serde_json::from_str(
            r#"{"slow_factor": 1, "fail_fraction": 0.5, "fail_kind": "retryable"}"#,
        )
        .unwrap();
        assert_eq!(fault.fail_kind, FailKind::Retryable);
    }

    #[tokio::test]
    async fn at_most_capacity_calls_are_in_service_and_utilization_follows() {
        let w = work(WorkSettings {
            capacity: 2,
            median_ms: 60_000.0,
            sigma: 0.0,
            ..Default::default()
        });
        assert_eq!(w.utilization_percent(), 0.0);
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let w = Arc::clone(&w);
                tokio::spawn(async move { w.serve().await })
            })
            .collect();
        let two_in_service = async {
            while lock(&w.busy).in_service < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), two_in_service)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The other two wait for a slot.
        assert_eq!(lock(&w.busy).in_service, 2);
        assert_eq!(w.slots.available_permits(), 0);
        let reading = w.utilization_percent();
        assert!(reading > 0.0 && reading <= 100.0, "{reading}");
        // Callers giving up (the calls dropped) leave the service and free the slots.
        for call in &calls {
            call.abort();
        }
        for call in calls {
            let _ = call.await;
        }
        assert_eq!(lock(&w.busy).in_service, 0);
        assert_eq!(w.slots.available_permits(), 2);
        let _ = w.utilization_percent();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(w.utilization_percent(), 0.0);
    }
}
