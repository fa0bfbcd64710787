//! The settings of a node's `work` function (`rpclb node --work-*`) and their ranges.

use std::time::Duration;

/// The most calls a node's `work` serves at once (`--work-capacity`).
pub const MAX_CAPACITY: u32 = 10_000;

/// How a node's `work` function serves (`rpclb node --work-*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkSettings {
    /// Calls in service at once (1–10,000); more wait.
    pub capacity: u32,
    /// The service time's median, ms (> 0, ≤ 60,000).
    pub median_ms: f64,
    /// The lognormal shape σ (0–3; 0 = every call takes the median).
    pub sigma: f64,
    /// The service-time RNG's seed.
    pub seed: u64,
    /// Service time multiplier (1–1,000) at start.
    pub slow_factor: f64,
    /// How long after start `slow_factor` applies; `None`: for ever.
    pub slow_for: Option<Duration>,
    /// The fraction of calls (0–1) that fail at once, unserved.
    pub fail_fraction: f64,
    /// The fraction of calls (0–1) that are stragglers: their service time is
    /// `straggler_factor` times its draw (the lab's `[stragglers]`); 0 = none.
    pub straggler_fraction: f64,
    /// A straggler's service-time multiplier (1–1,000).
    pub straggler_factor: f64,
}

impl Default for WorkSettings {
    fn default() -> Self {
        Self {
            capacity: 8,
            median_ms: 10.0,
            sigma: 0.5,
            seed: 1,
            slow_factor: 1.0,
            slow_for: None,
            fail_fraction: 0.0,
            straggler_fraction: 0.0,
            straggler_factor: 1.0,
        }
    }
}

/// A `work` setting out of its range, naming it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("work setting {field} = {value} is out of range: {range}")]
pub struct WorkSettingError {
    /// The setting (`capacity`, `median_ms`, `sigma`, `slow_factor`, `fail_fraction`,
    /// `straggler_fraction`, `straggler_factor`).
    pub field: &'static str,
    /// Its value, as given.
    pub value: String,
    /// The allowed range.
    pub range: &'static str,
}

fn check(
    field: &'static str,
    value: f64,
    ok: bool,
    range: &'static str,
) -> Result<(), WorkSettingError> {
    if ok && value.is_finite() {
        Ok(())
    } else {
        Err(WorkSettingError {
            field,
            value: value.to_string(),
            range,
        })
    }
}

pub(super) fn check_slow(factor: f64) -> Result<(), WorkSettingError> {
    check(
        "slow_factor",
        factor,
        (1.0..=1_000.0).contains(&factor),
        "1 to 1000",
    )
}

pub(super) fn check_fail(fraction: f64) -> Result<(), WorkSettingError> {
    check(
        "fail_fraction",
        fraction,
        (0.0..=1.0).contains(&fraction),
        "0 to 1",
    )
}

impl WorkSettings {
    /// Checks every setting against its range.
    ///
    /// Errors: [`WorkSettingError`] naming the first one out of range.
    pub fn validate(&self) -> Result<(), WorkSettingError> {
        let capacity = f64::from(self.capacity);
        check(
            "capacity",
            capacity,
            (1..=MAX_CAPACITY).contains(&self.capacity),
            "1 to 10000",
        )?;
        check(
            "median_ms",
            self.median_ms,
            self.median_ms > 0.0 && self.median_ms <= 60_000.0,
            "above 0, at most 60000",
        )?;
        check(
            "sigma",
            self.sigma,
            (0.0..=3.0).contains(&self.sigma),
            "0 to 3",
        )?;
        check_slow(self.slow_factor)?;
        check_fail(self.fail_fraction)?;
        check(
            "straggler_fraction",
            self.straggler_fraction,
            (0.0..=1.0).contains(&self.straggler_fraction),
            "0 to 1",
        )?;
        check(
            "straggler_factor",
            self.straggler_factor,
            (1.0..=1_000.0).contains(&self.straggler_factor),
            "1 to 1000",
        )
    }
}
