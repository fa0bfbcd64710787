//! [`OutlierEjection`]: a balancer option that stops picking members that fail or go silent,
//! whatever the algorithm; its selector wraps the algorithm's.

mod health;
mod selector;

use std::sync::Arc;
use std::time::Duration;

use super::{Algorithm, BuildContext, Needs, Rng, Selector};
use crate::Error;

pub use selector::EjectionStats;
pub(crate) use selector::{Ejecting, EjectionEvent};

/// Outlier ejection, a balancer option that stops picking members that fail or go silent,
/// whatever the algorithm (Envoy's outlier detection; gRPC's `outlier_detection` policy,
/// gRFC A50). Its selector wraps the algorithm's ([`OutlierEjection::wrap`]).
///
/// - **Ejection** (Envoy's `consecutive_5xx` and success-rate detectors): a member with
///   [`consecutive_failures`](OutlierEjection::consecutive_failures) failures in a row, or —
///   when at least [`success_rate_min_members`](OutlierEjection::success_rate_min_members)
///   members each made at least
///   [`success_rate_min_calls`](OutlierEjection::success_rate_min_calls) calls in one
///   [`interval`](OutlierEjection::interval) — a success rate below mean −
///   [`success_rate_stdev_factor`](OutlierEjection::success_rate_stdev_factor) × standard
///   deviation, is not picked for
///   [`base_ejection_time`](OutlierEjection::base_ejection_time) × the times it was ejected (at
///   most [`max_ejection_time`](OutlierEjection::max_ejection_time)). At most
///   [`max_ejected_percent`](OutlierEjection::max_ejected_percent) of the members (at least
///   one) are ejected at once. Each interval a member spends un-ejected takes one off its count
///   of ejections.
/// - **Suspicion of a silent member** (this library's own; the timeout and the heartbeat are
///   far too slow to see a paused member): a member with at least
///   [`suspicion_min_in_flight`](OutlierEjection::suspicion_min_in_flight) calls in flight and
///   no reply for max([`suspicion_floor`](OutlierEjection::suspicion_floor),
///   [`suspicion_p99_factor`](OutlierEjection::suspicion_p99_factor) × its p99 latency), while
///   other members reply lately, is not picked while any of its calls is in flight, until it
///   replies; so is a member one of whose calls times out with no reply from it for that
///   limit, with as many calls in flight, while another member replied after the call was
///   sent and none failed to answer since (a stall of this caller suspects nobody). A suspect
///   whose call times out (silent past the whole call timeout) is ejected as above; at the
///   ejection cap it stays suspected, and takes one call — a probe — whenever none of its
///   calls is in flight.
///
/// A failure is an outcome of kind [`Timeout`](crate::routing::OutcomeKind::Timeout) or
/// [`Error`](crate::routing::OutcomeKind::Error) with any code but
/// [`BadRequest`](crate::ErrorCode::BadRequest) (the caller's own fault); a
/// [`Cancelled`](crate::routing::OutcomeKind::Cancelled) selection counts for nothing. When every member
/// is out, the algorithm's own pick stands (fail open, as Envoy's panic threshold).
///
/// [`Default`]: Envoy's defaults where it has them.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{BalancerConfig, OutlierEjection, RoundRobin};
///
/// let config = BalancerConfig::new("jobs")
///     .algorithm(RoundRobin::new())
///     .outlier_ejection(OutlierEjection::new().base_ejection_time(Duration::from_secs(10)));
/// # let _ = config;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierEjection {
    pub(crate) consecutive_failures: u32,
    pub(crate) interval: Duration,
    pub(crate) success_rate_min_members: usize,
    pub(crate) success_rate_min_calls: u64,
    pub(crate) success_rate_stdev_factor: f64,
    pub(crate) base_ejection_time: Duration,
    pub(crate) max_ejection_time: Duration,
    pub(crate) max_ejected_percent: u8,
    pub(crate) suspicion: bool,
    pub(crate) suspicion_floor: Duration,
    pub(crate) suspicion_p99_factor: f64,
    pub(crate) suspicion_min_in_flight: usize,
}

impl Default for OutlierEjection {
    fn default() -> Self {
        Self {
            consecutive_failures: 5,
            interval: Duration::from_secs(10),
            success_rate_min_members: 5,
            success_rate_min_calls: 100,
            success_rate_stdev_factor: 1.9,
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejected_percent: 10,
            suspicion: true,
            suspicion_floor: Duration::from_millis(50),
            suspicion_p99_factor: 10.0,
            suspicion_min_in_flight: 2,
        }
    }
}

impl OutlierEjection {
    /// The defaults: 5 consecutive failures; success rate over 10 s intervals with ≥ 5
    /// members of ≥ 100 calls, below mean − 1.9 sd; ejected 30 s × times ejected, at most
    /// 300 s; at most 10 % of members (at least one) ejected at once; suspicion on, after
    /// max(50 ms, 10 × p99) of silence with ≥ 2 calls in flight.
    pub fn new() -> Self {
        Self::default()
    }

    /// Failures in a row that eject a member (default 5; 0 turns this detector off).
    pub fn consecutive_failures(mut self, failures: u32) -> Self {
        self.consecutive_failures = failures;
        self
    }

    /// The success-rate detector's interval, and how often ejection counts decay (default
    /// 10 s; > 0).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Members with enough calls in an interval for the success-rate detector to run
    /// (default 5; 0 turns it off).
    pub fn success_rate_min_members(mut self, members: usize) -> Self {
        self.success_rate_min_members = members;
        self
    }

    /// Calls a member must have had in the interval to count for the success-rate detector
    /// (default 100; ≥ 1).
    pub fn success_rate_min_calls(mut self, calls: u64) -> Self {
        self.success_rate_min_calls = calls;
        self
    }

    /// How many standard deviations below the mean success rate eject a member (default 1.9;
    /// finite, ≥ 0).
    pub fn success_rate_stdev_factor(mut self, factor: f64) -> Self {
        self.success_rate_stdev_factor = factor;
        self
    }

    /// How long a first ejection lasts; the n-th lasts n times this (default 30 s; > 0).
    pub fn base_ejection_time(mut self, time: Duration) -> Self {
        self.base_ejection_time = time;
        self
    }

    /// The longest an ejection lasts (default 300 s; ≥ `base_ejection_time`).
    pub fn max_ejection_time(mut self, time: Duration) -> Self {
        self.max_ejection_time = time;
        self
    }

    /// The share of members that may be ejected at once, in % (default 10; 1–100); at least
    /// one member may always be.
    pub fn max_ejected_percent(mut self, percent: u8) -> Self {
        self.max_ejected_percent = percent;
        self
    }

    /// Whether silent members are suspected (default `true`).
    pub fn suspicion(mut self, on: bool) -> Self {
        self.suspicion = on;
        self
    }

    /// The shortest silence that makes a member suspected (default 50 ms; > 0).
    pub fn suspicion_floor(mut self, floor: Duration) -> Self {
        self.suspicion_floor = floor;
        self
    }

    /// The silence that makes a member suspected, as a multiple of its p99 latency (default
    /// 10; finite, > 0); the floor applies when it is shorter.
    pub fn suspicion_p99_factor(mut self, factor: f64) -> Self {
        self.suspicion_p99_factor = factor;
        self
    }

    /// Calls in flight a silent member must have to be suspected (default 2; ≥ 1).
    pub fn suspicion_min_in_flight(mut self, calls: usize) -> Self {
        self.suspicion_min_in_flight = calls;
        self
    }

    /// Checks the options, as a balancer does when it starts.
    ///
    /// Errors: [`Error::InvalidConfig`] naming the option (`interval`, `base_ejection_time`,
    /// `max_ejection_time`, `max_ejected_percent`, `success_rate_min_calls`,
    /// `success_rate_stdev_factor`, `suspicion_floor`, `suspicion_p99_factor`,
    /// `suspicion_min_in_flight`).
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |option, reason: &str| {
            Err(Error::InvalidConfig {
                option,
                reason: reason.to_string(),
            })
        };
        if self.interval.is_zero() {
            return invalid("interval", "must be above 0 ms");
        }
        if self.base_ejection_time.is_zero() {
            return invalid("base_ejection_time", "must be above 0 ms");
        }
        if self.max_ejection_time < self.base_ejection_time {
            return invalid("max_ejection_time", "must be at least base_ejection_time");
        }
        if !(1..=100).contains(&self.max_ejected_percent) {
            return invalid("max_ejected_percent", "must be 1-100");
        }
        if self.success_rate_min_calls == 0 {
            return invalid("success_rate_min_calls", "must be at least 1");
        }
        let factor = self.success_rate_stdev_factor;
        if !factor.is_finite() || factor < 0.0 {
            return invalid("success_rate_stdev_factor", "must be finite and ≥ 0");
        }
        if self.suspicion_floor.is_zero() {
            return invalid("suspicion_floor", "must be above 0 ms");
        }
        let p99 = self.suspicion_p99_factor;
        if !p99.is_finite() || p99 <= 0.0 {
            return invalid("suspicion_p99_factor", "must be finite and above 0");
        }
        if self.suspicion_min_in_flight == 0 {
            return invalid("suspicion_min_in_flight", "must be at least 1");
        }
        Ok(())
    }

    /// `algorithm` with these options on top: its selectors skip ejected and suspected
    /// members. Its [`name`](Algorithm::name) is the algorithm's with `+ejection`, e.g.
    /// `round_robin+ejection`. (A balancer's
    /// [`outlier_ejection`](crate::BalancerConfig::outlier_ejection) does this itself.)
    pub fn wrap(self, algorithm: Arc<dyn Algorithm>) -> Arc<dyn Algorithm> {
        let name = super::names::intern(&format!("{}+ejection", algorithm.name()));
        Arc::new(WithEjection {
            inner: algorithm,
            options: self,
            name,
        })
    }
}

/// An algorithm whose selectors skip outliers.
struct WithEjection {
    inner: Arc<dyn Algorithm>,
    options: OutlierEjection,
    name: &'static str,
}

/// Ejection's own random sequence under a build seed: the seed moved by a constant, so that
/// its draws do not repeat the inner selector's (seeded from the same build seed).
pub(crate) fn ejection_rng(seed: Option<u64>) -> Rng {
    Rng::from_seed(seed.map(|seed| seed ^ 0x6A09_E667_F3BC_C909))
}

impl Algorithm for WithEjection {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        self.options.validate()?;
        let inner = self.inner.build(context)?;
        Ok(Box::new(selector::Ejecting::new(
            inner,
            self.options.clone(),
            context.clock.clone(),
            ejection_rng(context.seed),
        )))
    }

    fn needs(&self) -> Needs {
        // Suspicion reads each member's calls in flight.
        self.inner.needs().in_flight()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}
