//! Checking a scenario: every field's range, with [`ScenarioError::Invalid`] naming the
//! field; and the bounds that keep one run's memory and time finite.

use super::budget::{MAX_RUN_CALLS, MAX_SLOTS};
use super::{Action, Scenario, ScenarioError, Service};

/// Bounds that keep one run's memory and time finite.
const MAX_MEMBERS: usize = 100_000;
const MAX_CALLERS: usize = 10_000;
/// Each caller's selector holds a view of every member.
const MAX_MEMBER_VIEWS: usize = 2_000_000;
/// Each task holds a call at all times (more once its calls time out).
const MAX_TASKS: usize = 500_000;
const MAX_KEYS: u64 = 10_000_000;
const MAX_SECONDS: f64 = 86_400.0;
/// The shortest CPU sampling interval, ms (a member samples at most 100 times a simulated
/// second).
const MIN_CPU_SAMPLE_MS: f64 = 10.0;
const MAX_EVENT_REPEATS: f64 = 100_000.0;

impl Scenario {
    /// Checks every field's range.
    ///
    /// Errors: [`ScenarioError::Invalid`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let invalid = |field: &str, reason: String| {
            Err(ScenarioError::Invalid {
                scenario: self.name.clone(),
                field: field.to_string(),
                reason,
            })
        };
        let positive = |field: &str, value: f64, max: f64| {
            if value.is_finite() && value > 0.0 && value <= max {
                Ok(())
            } else {
                invalid(
                    field,
                    format!("must be above 0 and at most {max}, not {value}"),
                )
            }
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return invalid(
                "name",
                format!("{:?} is not lowercase letters, digits and -", self.name),
            );
        }
        if !(1..=MAX_MEMBERS).contains(&self.members) {
            return invalid(
                "members",
                format!("must be 1..={MAX_MEMBERS}, not {}", self.members),
            );
        }
        if !(1..=MAX_CALLERS).contains(&self.callers) {
            return invalid(
                "callers",
                format!("must be 1..={MAX_CALLERS}, not {}", self.callers),
            );
        }
        if self.members * self.callers > MAX_MEMBER_VIEWS {
            return invalid(
                "callers",
                format!(
                    "{} callers × {} members is above {MAX_MEMBER_VIEWS} member views (each caller's selector holds every member)",
                    self.callers, self.members
                ),
            );
        }
        if self.subset == Some(0) {
            return invalid("subset", "must be at least 1".into());
        }
        if self.subset_scheme.is_some() && self.subset.is_none() {
            return invalid("subset_scheme", "needs `subset` (the subset size K)".into());
        }
        if self.capacity == 0 {
            return invalid("capacity", "must be at least 1".into());
        }
        match self.service {
            Service::Lognormal { median_ms, sigma } => {
                positive("service.median_ms", median_ms, 3_600_000.0)?;
                if !(sigma.is_finite() && (0.0..=5.0).contains(&sigma)) {
                    return invalid("service.sigma", format!("must be 0..=5, not {sigma}"));
                }
            }
            Service::Exponential { mean_ms } => positive("service.mean_ms", mean_ms, 3_600_000.0)?,
        }
        if !(self.network_delay_us.is_finite() && (0.0..=1e9).contains(&self.network_delay_us)) {
            return invalid(
                "network_delay_us",
                format!("must be 0..=1e9, not {}", self.network_delay_us),
            );
        }
        positive("timeout_ms", self.timeout_ms, MAX_SECONDS * 1e3)?;
        if !(self.warmup_s.is_finite() && (0.0..=MAX_SECONDS).contains(&self.warmup_s)) {
            return invalid(
                "warmup_s",
                format!("must be 0..={MAX_SECONDS}, not {}", self.warmup_s),
            );
        }
        positive("measure_s", self.measure_s, MAX_SECONDS)?;
        positive(
            "heartbeat.interval_ms",
            self.heartbeat.interval_ms,
            MAX_SECONDS * 1e3,
        )?;
        positive(
            "heartbeat.timeout_ms",
            self.heartbeat.timeout_ms,
            MAX_SECONDS * 1e3,
        )?;
        if !(self.cpu_sample_interval_ms.is_finite()
            && (MIN_CPU_SAMPLE_MS..=MAX_SECONDS * 1e3).contains(&self.cpu_sample_interval_ms))
        {
            return invalid(
                "cpu_sample_interval_ms",
                format!(
                    "must be {MIN_CPU_SAMPLE_MS}..={}, not {}",
                    MAX_SECONDS * 1e3,
                    self.cpu_sample_interval_ms
                ),
            );
        }
        for (i, fraction) in self.load.open_loop.iter().enumerate() {
            positive(&format!("load.open_loop[{i}]"), *fraction, 100.0)?;
        }
        if let Some(tasks) = self.load.closed_loop_tasks {
            if !(1..=MAX_TASKS).contains(&tasks) {
                return invalid(
                    "load.closed_loop_tasks",
                    format!("must be 1..={MAX_TASKS}, not {tasks}"),
                );
            }
        }
        if self.load.open_loop.is_empty() && self.load.closed_loop_tasks.is_none() {
            return invalid(
                "load",
                "has no open-loop fraction and no closed loop".into(),
            );
        }
        if let Some(keys) = self.keys {
            if !(1..=MAX_KEYS).contains(&keys.count) {
                return invalid(
                    "keys.count",
                    format!("must be 1..={MAX_KEYS}, not {}", keys.count),
                );
            }
            if !(keys.zipf_s.is_finite() && (0.0..=10.0).contains(&keys.zipf_s)) {
                return invalid(
                    "keys.zipf_s",
                    format!("must be 0..=10, not {}", keys.zipf_s),
                );
            }
        }
        if let Some(s) = self.stragglers {
            if !(s.fraction.is_finite() && (0.0..=1.0).contains(&s.fraction)) {
                return invalid(
                    "stragglers.fraction",
                    format!("must be 0..=1, not {}", s.fraction),
                );
            }
            positive("stragglers.factor", s.factor, 1e6)?;
        }
        for (i, m) in self.member.iter().enumerate() {
            if m.index >= self.members {
                return invalid(
                    &format!("member[{i}].index"),
                    format!("{} is not below members ({})", m.index, self.members),
                );
            }
            if let Some(first) = self.member[..i].iter().position(|p| p.index == m.index) {
                return invalid(
                    &format!("member[{i}].index"),
                    format!("member {} is already given by member[{first}]", m.index),
                );
            }
            if m.capacity == Some(0) {
                return invalid(
                    &format!("member[{i}].capacity"),
                    "must be at least 1".into(),
                );
            }
            if let Some(f) = m.slow_factor {
                positive(&format!("member[{i}].slow_factor"), f, 1e6)?;
            }
        }
        self.validate_events()?;
        if self.initial_members() == 0 {
            return invalid(
                "event",
                "every member joins later: none at the start".into(),
            );
        }
        self.validate_budget()
    }

    /// The bounds of [`super::budget`]: slots, and the calls each load simulates.
    fn validate_budget(&self) -> Result<(), ScenarioError> {
        let invalid = |field: String, reason: String| {
            Err(ScenarioError::Invalid {
                scenario: self.name.clone(),
                field,
                reason,
            })
        };
        let slots = self.slots();
        if slots > MAX_SLOTS {
            return invalid(
                "capacity".into(),
                format!(
                    "gives {slots} slots over the {} members (calls served at once), above {MAX_SLOTS}",
                    self.members
                ),
            );
        }
        let length_s = self.warmup_s + self.measure_s;
        let samples = self.members as f64 * length_s / (self.cpu_sample_interval_ms / 1e3);
        if samples > MAX_RUN_CALLS {
            return invalid(
                "cpu_sample_interval_ms".into(),
                format!(
                    "makes the {} members sample their CPU about {samples:.3e} times in a run of {length_s} s, above {MAX_RUN_CALLS:.0e}: sample less often or shorten measure_s",
                    self.members
                ),
            );
        }
        for load in self.loads() {
            let calls = self.estimated_calls(load);
            if calls <= MAX_RUN_CALLS {
                continue;
            }
            let field = match load {
                super::LoadPoint::Open { fraction } => {
                    let i = self
                        .load
                        .open_loop
                        .iter()
                        .position(|&f| f == fraction)
                        .unwrap_or(0);
                    format!("load.open_loop[{i}]")
                }
                super::LoadPoint::Closed { .. } => "load.closed_loop_tasks".to_string(),
            };
            return invalid(
                field,
                format!(
                    "makes a run of {length_s} s (warm-up + measured) simulate about {calls:.3e} calls, above {MAX_RUN_CALLS:.0e}: lower the load, raise timeout_ms or shorten measure_s"
                ),
            );
        }
        Ok(())
    }

    fn validate_events(&self) -> Result<(), ScenarioError> {
        let invalid = |i: usize, field: &str, reason: String| {
            Err(ScenarioError::Invalid {
                scenario: self.name.clone(),
                field: format!("event[{i}].{field}"),
                reason,
            })
        };
        let end = self.warmup_s + self.measure_s;
        for (i, e) in self.event.iter().enumerate() {
            if !(e.at_s.is_finite() && (0.0..=MAX_SECONDS).contains(&e.at_s)) {
                return invalid(
                    i,
                    "at_s",
                    format!("must be 0..={MAX_SECONDS}, not {}", e.at_s),
                );
            }
            if e.member >= self.members {
                return invalid(
                    i,
                    "member",
                    format!("{} is not below members ({})", e.member, self.members),
                );
            }
            if let Some(f) = e.for_s {
                if !(f.is_finite() && f > 0.0) {
                    return invalid(i, "for_s", format!("must be above 0, not {f}"));
                }
            }
            if let Some(every) = e.every_s {
                let Some(f) = e.for_s else {
                    return invalid(i, "every_s", "needs for_s".into());
                };
                if !(every.is_finite() && every > f) {
                    return invalid(
                        i,
                        "every_s",
                        format!("must be above for_s ({f}), not {every}"),
                    );
                }
                if end / every > MAX_EVENT_REPEATS {
                    return invalid(
                        i,
                        "every_s",
                        format!("repeats more than {MAX_EVENT_REPEATS} times in the run"),
                    );
                }
            }
            match e.action {
                Action::Slow => match e.factor {
                    Some(f) if f.is_finite() && f > 0.0 && f <= 1e6 => {}
                    other => {
                        return invalid(
                            i,
                            "factor",
                            format!("slow needs a factor in (0, 1e6], not {other:?}"),
                        )
                    }
                },
                Action::Join => {
                    if let Some(f) = e.factor {
                        if !(f.is_finite() && f > 0.0 && f <= 1e6) {
                            return invalid(i, "factor", format!("must be in (0, 1e6], not {f}"));
                        }
                    }
                    if e.every_s.is_some() {
                        return invalid(i, "every_s", "a join happens once".into());
                    }
                    if self.event[..i]
                        .iter()
                        .any(|p| p.member == e.member && p.action == Action::Join)
                    {
                        return invalid(i, "member", format!("member {} joins twice", e.member));
                    }
                }
                Action::Fail => match e.fraction {
                    Some(f) if f.is_finite() && (0.0..=1.0).contains(&f) => {}
                    other => {
                        return invalid(
                            i,
                            "fraction",
                            format!("fail needs a fraction in 0..=1, not {other:?}"),
                        )
                    }
                },
                Action::Leave => {
                    if e.for_s.is_some() || e.every_s.is_some() {
                        return invalid(i, "for_s", "a leave is for good".into());
                    }
                }
                Action::Pause => {}
            }
        }
        if let Some(Err((field, reason))) = self.retries.as_ref().map(|r| r.kit()) {
            return Err(ScenarioError::Invalid {
                scenario: self.name.clone(),
                field,
                reason,
            });
        }
        if let Some(Err((field, reason))) = self.hedging.as_ref().map(|h| h.kit()) {
            return Err(ScenarioError::Invalid {
                scenario: self.name.clone(),
                field,
                reason,
            });
        }
        if self.hedging.is_some() && self.retries.is_some() {
            // (The model's copies do not retry: a failed copy ends its call.)
            return Err(ScenarioError::Invalid {
                scenario: self.name.clone(),
                field: "hedging".into(),
                reason: "cannot be combined with [retries]: the lab does not model both together"
                    .into(),
            });
        }
        Ok(())
    }
}
