//! The plan of one twin run: which lab scenario, its fault as the real processes play it, and
//! the timeline, compressed to the twin's short runs; and the same plan as a lab
//! [`Scenario`], so that the lab and the twin run the same thing (`--compare`).
//!
//! The timeline: each algorithm runs for a warm-up `W` then a measured window `D` (the lab's
//! 10 s and 60 s). A lab fault starting 10 s into its 60 s window (20 s from the start) starts
//! at `D/6` into the twin's; a lab duration within the window is scaled by `D/60` (the new
//! member's 30 s of slowness), except a pause, which keeps its length (5 s): a pause is
//! measured against the heartbeat timeout (3 s), which is real time on both sides.
//! `stragglers` has no timeline: every member straggles from its start.

use std::time::Duration;

use rpclb_lab::scenario::{Action, Hedging, Retries, Service};
use rpclb_lab::{LoadPoint, Scenario};

use crate::work::FailKind;

/// The scenarios that have a real-process twin.
pub const TWIN_SCENARIOS: &[&str] = &[
    "slow-member",
    "paused-member",
    "failing-member",
    "new-member",
    "stragglers",
];

/// The lab's measured window, s, to which the twin's timeline is scaled.
const LAB_WINDOW_S: f64 = 60.0;

/// The shortest measured window (`--duration-s`), s: the fault starts at a sixth of it, and
/// the callers count picks per 100 ms.
pub const MIN_DURATION_S: f64 = 1.0;
/// The longest measured window, s.
pub const MAX_DURATION_S: f64 = 3_600.0;
/// The longest warm-up (`--warmup-s`), s.
pub const MAX_WARMUP_S: f64 = 600.0;

/// Parses `rpclb demo --duration-s` (clap's value parser: out of range is a usage error):
/// seconds in [`MIN_DURATION_S`]`..=`[`MAX_DURATION_S`].
///
/// Errors: not a number, or out of range (the message says the range).
pub fn parse_duration_s(text: &str) -> Result<f64, String> {
    seconds_in(text, MIN_DURATION_S, MAX_DURATION_S)
}

/// Parses `rpclb demo --warmup-s`: seconds in `0..=`[`MAX_WARMUP_S`].
///
/// Errors: not a number, or out of range.
pub fn parse_warmup_s(text: &str) -> Result<f64, String> {
    seconds_in(text, 0.0, MAX_WARMUP_S)
}

/// The highest `rpclb demo --load`: twice the uniform cluster's capacity (past it every call
/// of the twin waits out its timeout; the lab's own scenarios allow more).
pub const MAX_LOAD: f64 = 2.0;

/// Parses `rpclb demo --load`: a fraction of the uniform cluster's capacity, above 0 and at
/// most [`MAX_LOAD`] (0.5 is 50 %).
///
/// Errors: not a number, or out of range (the message says the range).
pub fn parse_load(text: &str) -> Result<f64, String> {
    let load: f64 = text
        .parse()
        .map_err(|e| format!("{text:?} is not a fraction of capacity: {e}"))?;
    if load > 0.0 && load <= MAX_LOAD {
        Ok(load)
    } else {
        Err(format!(
            "{text} is outside (0, {MAX_LOAD}]: a fraction of the cluster's capacity (0.5 is 50 %)"
        ))
    }
}

/// The longest `rpclb demo --service-ms`: 60,000 ms (past it every call of the twin outlasts
/// its 1 s timeout many times over).
pub const MAX_SERVICE_MS: f64 = 60_000.0;

/// Parses `rpclb demo --service-ms`: a median service time in ms, above 0 and at most
/// [`MAX_SERVICE_MS`].
///
/// Errors: not a number, or out of range (the message says the range).
pub fn parse_service_ms(text: &str) -> Result<f64, String> {
    let ms: f64 = text
        .parse()
        .map_err(|e| format!("{text:?} is not a number of ms: {e}"))?;
    if ms > 0.0 && ms <= MAX_SERVICE_MS {
        Ok(ms)
    } else {
        Err(format!("{text} is outside (0, {MAX_SERVICE_MS}] ms"))
    }
}

fn seconds_in(text: &str, min: f64, max: f64) -> Result<f64, String> {
    let secs: f64 = text
        .parse()
        .map_err(|e| format!("{text:?} is not a number of seconds: {e}"))?;
    if (min..=max).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!("{text} is outside {min}..={max} seconds"))
    }
}

/// `hedging` as the `--hedge` spec `DELAY,RATIO,MIN_PER_SECOND` that reads back as it (the
/// spec's own fields: a minimum delay and a window other than the spec's are not written).
pub fn hedge_spec(hedging: &Hedging) -> String {
    let delay = match (hedging.percentile, hedging.delay_ms) {
        (Some(p), _) => format!("p{p}"),
        (None, delay) => format!("{}ms", delay.unwrap_or(0.0)),
    };
    format!("{delay},{},{}", hedging.ratio, hedging.min_per_second)
}

/// A twin's fault, as the demo plays it on the real processes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TwinFault {
    /// Member `member` is slower by `factor` from its start (`rpclb node --work-slow-factor`).
    Slow {
        /// Its index.
        member: usize,
        /// The service-time multiplier.
        factor: f64,
    },
    /// Member `member` is SIGSTOPped at `at` (from the run's start) and SIGCONTed `length`
    /// later: it answers nothing, heartbeats included, as the lab's pause.
    Pause {
        /// Its index.
        member: usize,
        /// When, from the run's start.
        at: Duration,
        /// How long.
        length: Duration,
    },
    /// Member `member` fails `fraction` of its calls from `at` on (the `work_fault` function).
    Fail {
        /// Its index.
        member: usize,
        /// When, from the run's start.
        at: Duration,
        /// The failing fraction.
        fraction: f64,
    },
    /// Member `member` is started at `at` and is slower by `factor` for its first `length`
    /// (`--work-slow-factor`, `--work-slow-for-ms`); it is stopped at the run's end.
    Join {
        /// Its index.
        member: usize,
        /// When, from the run's start.
        at: Duration,
        /// The service-time multiplier.
        factor: f64,
        /// How long it lasts.
        length: Duration,
    },
    /// Every member, from its start, makes `fraction` of its calls stragglers that take
    /// `factor` times their service time (`rpclb node --work-straggler-fraction
    /// --work-straggler-factor`; the lab's `[stragglers]`).
    Stragglers {
        /// The straggling fraction of calls (0–1).
        fraction: f64,
        /// A straggler's service-time multiplier.
        factor: f64,
    },
}

impl TwinFault {
    /// The member the fault hits; `None` when it hits every member (stragglers).
    pub fn member(&self) -> Option<usize> {
        match *self {
            Self::Slow { member, .. }
            | Self::Pause { member, .. }
            | Self::Fail { member, .. }
            | Self::Join { member, .. } => Some(member),
            Self::Stragglers { .. } => None,
        }
    }
}

/// One twin configuration (`rpclb demo --scenario` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The lab scenario as the twin runs it (timeline, service, capacity, callers and load
    /// set from the flags); run it in the lab for the comparison.
    pub scenario: Scenario,
    /// The fault as played on the processes.
    pub fault: TwinFault,
    /// Members at the start.
    pub members: usize,
    /// Unmeasured time before the window.
    pub warmup: Duration,
    /// The measured window.
    pub measure: Duration,
    /// The open-loop rate of all callers together, calls/s.
    pub rate_per_s: f64,
    /// How a failing member fails its calls (`--fail-kind`; set by
    /// [`with_failures`](Self::with_failures)).
    pub fail_kind: FailKind,
}

/// The twin's knobs (see `rpclb demo --help`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knobs {
    /// Warm-up, s (≥ 0).
    pub warmup_s: f64,
    /// Measured window, s (> 0).
    pub measure_s: f64,
    /// The members' median service time, ms.
    pub service_ms: f64,
    /// Calls a member serves at once.
    pub capacity: u32,
    /// Caller processes.
    pub callers: usize,
    /// The open-loop load, a fraction of the uniform cluster's capacity.
    pub load: f64,
    /// The callers' hedging (`--hedge`; the calls are then idempotent), or `None`.
    pub hedge: Option<Hedging>,
}

impl Plan {
    /// The plan of the built-in lab scenario `name` (one of [`TWIN_SCENARIOS`]) with `knobs`.
    ///
    /// Errors: a scenario without a twin, or knobs the lab refuses (naming the field).
    pub fn new(name: &str, knobs: Knobs) -> Result<Plan, String> {
        if !TWIN_SCENARIOS.contains(&name) {
            return Err(format!(
                "scenario {name:?} has no real-process twin: {}",
                TWIN_SCENARIOS.join(", ")
            ));
        }
        if parse_duration_s(&knobs.measure_s.to_string()).is_err() {
            return Err(format!(
                "--duration-s {} is not in [{MIN_DURATION_S}, {MAX_DURATION_S}]",
                knobs.measure_s
            ));
        }
        if parse_warmup_s(&knobs.warmup_s.to_string()).is_err() {
            return Err(format!(
                "--warmup-s {} is not in [0, {MAX_WARMUP_S}]",
                knobs.warmup_s
            ));
        }
        if !(1..=crate::work::MAX_CAPACITY).contains(&knobs.capacity) {
            return Err(format!(
                "--capacity {} is not in 1..={}",
                knobs.capacity,
                crate::work::MAX_CAPACITY
            ));
        }
        let mut scenario = Scenario::load(name).map_err(|e| e.to_string())?;
        let scale = knobs.measure_s / LAB_WINDOW_S;
        let fault_at_s = knobs.warmup_s + knobs.measure_s / 6.0;
        let run_s = knobs.warmup_s + knobs.measure_s;
        let mut fault = None;
        for event in &mut scenario.event {
            event.at_s = fault_at_s;
            let at = Duration::from_secs_f64(fault_at_s);
            match event.action {
                Action::Pause => {
                    let length = event.for_s.unwrap_or(5.0).min(run_s - fault_at_s);
                    event.for_s = Some(length);
                    fault = Some(TwinFault::Pause {
                        member: event.member,
                        at,
                        length: Duration::from_secs_f64(length),
                    });
                }
                Action::Fail => {
                    fault = Some(TwinFault::Fail {
                        member: event.member,
                        at,
                        fraction: event.fraction.unwrap_or(0.5),
                    });
                }
                Action::Join => {
                    let length = (event.for_s.unwrap_or(30.0) * scale).min(run_s - fault_at_s);
                    event.for_s = Some(length);
                    fault = Some(TwinFault::Join {
                        member: event.member,
                        at,
                        factor: event.factor.unwrap_or(1.0),
                        length: Duration::from_secs_f64(length),
                    });
                }
                Action::Slow | Action::Leave => {
                    return Err(format!(
                        "scenario {name}: event {:?} has no twin",
                        event.action
                    ))
                }
            }
        }
        if fault.is_none() {
            fault = scenario.member.iter().find_map(|m| {
                m.slow_factor.map(|factor| TwinFault::Slow {
                    member: m.index,
                    factor,
                })
            });
        }
        if fault.is_none() {
            fault = scenario.stragglers.map(|s| TwinFault::Stragglers {
                fraction: s.fraction,
                factor: s.factor,
            });
        }
        let fault = fault.ok_or_else(|| format!("scenario {name} has no fault to play"))?;
        scenario.warmup_s = knobs.warmup_s;
        scenario.measure_s = knobs.measure_s;
        scenario.service = Service::Lognormal {
            median_ms: knobs.service_ms,
            sigma: match scenario.service {
                Service::Lognormal { sigma, .. } => sigma,
                Service::Exponential { .. } => 1.0,
            },
        };
        scenario.capacity = knobs.capacity;
        // The members' nodes sample their utilization as the twin's do.
        scenario.cpu_sample_interval_ms = crate::demo_cmd::DEMO_SAMPLE_INTERVAL.as_secs_f64() * 1e3;
        scenario.callers = knobs.callers;
        scenario.load.open_loop = vec![knobs.load];
        scenario.load.closed_loop_tasks = None;
        scenario.hedging = knobs.hedge;
        scenario.validate().map_err(|e| {
            if knobs.hedge.is_some() && e.to_string().contains("hedging") {
                format!("--hedge: {e}")
            } else {
                e.to_string()
            }
        })?;
        let members = scenario.members - usize::from(matches!(fault, TwinFault::Join { .. }));
        let rate_per_s = knobs.load * scenario.uniform_capacity_per_s();
        Ok(Plan {
            scenario,
            fault,
            members,
            warmup: Duration::from_secs_f64(knobs.warmup_s),
            measure: Duration::from_secs_f64(knobs.measure_s),
            rate_per_s,
            fail_kind: FailKind::Application,
        })
    }

    /// The plan with its failing member's failures of `fail_kind` (`--fail-kind`) and, with
    /// `retries` (`--retries`), the callers' calls idempotent under the library's default
    /// retry budget; the lab side then has `[retries]` at its defaults, its `fail` failures of
    /// the retryable kind exactly when `fail_kind` is (as `rpclb lab --retries`).
    ///
    /// Errors: [`FailKind::Retryable`] for a scenario without a failing member (naming
    /// `--fail-kind`).
    pub fn with_failures(mut self, fail_kind: FailKind, retries: bool) -> Result<Plan, String> {
        if fail_kind == FailKind::Retryable && !matches!(self.fault, TwinFault::Fail { .. }) {
            return Err(format!(
                "--fail-kind retryable: scenario {} has no failing member (only failing-member has)",
                self.scenario.name
            ));
        }
        self.fail_kind = fail_kind;
        if retries {
            self.scenario.retries = Some(Retries {
                fail_retryable: fail_kind == FailKind::Retryable,
                ..Retries::default()
            });
            self.scenario.validate().map_err(|e| e.to_string())?;
        }
        Ok(self)
    }

    /// Whether the callers retry (`--retries`).
    pub fn retries(&self) -> bool {
        self.scenario.retries.is_some()
    }

    /// The lab load the twin runs (its one open-loop fraction).
    pub fn load_point(&self) -> LoadPoint {
        self.scenario.loads()[0]
    }

    /// Every member's index, those joining later included.
    pub fn all_members(&self) -> usize {
        self.scenario.members
    }

    /// The service-time σ.
    pub fn sigma(&self) -> f64 {
        match self.scenario.service {
            Service::Lognormal { sigma, .. } => sigma,
            Service::Exponential { .. } => 1.0,
        }
    }

    /// The median service time, ms.
    pub fn median_ms(&self) -> f64 {
        match self.scenario.service {
            Service::Lognormal { median_ms, .. } => median_ms,
            Service::Exponential { mean_ms } => mean_ms,
        }
    }

    /// The fault's span as the lab measures the shed time: (start, end) from the run's start.
    pub fn fault_span(&self) -> (Duration, Duration) {
        let end = self.warmup + self.measure;
        match self.fault {
            TwinFault::Slow { .. } | TwinFault::Stragglers { .. } => (Duration::ZERO, end),
            TwinFault::Fail { at, .. } => (at, end),
            TwinFault::Pause { at, length, .. } | TwinFault::Join { at, length, .. } => {
                (at, (at + length).min(end))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs() -> Knobs {
        Knobs {
            warmup_s: 2.0,
            measure_s: 12.0,
            service_ms: 10.0,
            capacity: 8,
            callers: 2,
            load: 0.5,
            hedge: None,
        }
    }

    #[test]
    fn each_twin_plays_its_lab_fault_on_the_compressed_timeline() {
        let slow = Plan::new("slow-member", knobs()).unwrap();
        assert_eq!(
            slow.fault,
            TwinFault::Slow {
                member: 0,
                factor: 10.0
            }
        );
        assert_eq!(slow.members, 4);
        // 4 members × 8 ÷ (10 ms · e^(0.125)) at 50 %.
        assert!(
            (slow.rate_per_s - 1412.0).abs() < 1.0,
            "{}",
            slow.rate_per_s
        );
        let at = Duration::from_secs(4);
        let paused = Plan::new("paused-member", knobs()).unwrap();
        assert_eq!(
            paused.fault,
            TwinFault::Pause {
                member: 0,
                at,
                length: Duration::from_secs(5)
            }
        );
        assert_eq!(paused.scenario.event[0].at_s, 4.0);
        let failing = Plan::new("failing-member", knobs()).unwrap();
        assert_eq!(
            failing.fault,
            TwinFault::Fail {
                member: 0,
                at,
                fraction: 0.5
            }
        );
        let new = Plan::new("new-member", knobs()).unwrap();
        assert_eq!(
            new.fault,
            TwinFault::Join {
                member: 4,
                at,
                factor: 5.0,
                length: Duration::from_secs(6)
            }
        );
        assert_eq!((new.members, new.all_members()), (4, 5));
        assert_eq!(new.fault_span(), (at, Duration::from_secs(10)));
        assert_eq!(new.scenario.loads().len(), 1);
    }

    #[test]
    fn stragglers_straggle_on_every_member_from_the_start_and_carry_the_hedging() {
        let plan = Plan::new("stragglers", knobs()).unwrap();
        assert_eq!(
            plan.fault,
            TwinFault::Stragglers {
                fraction: 0.01,
                factor: 20.0
            }
        );
        assert_eq!(plan.fault.member(), None, "no one faulty member");
        assert_eq!((plan.members, plan.all_members()), (4, 4));
        assert_eq!(plan.fault_span(), (Duration::ZERO, Duration::from_secs(14)));
        assert_eq!(plan.scenario.hedging, None);
        let hedge = Hedging::parse("p95,0.05,1").unwrap();
        let hedged = Plan::new(
            "stragglers",
            Knobs {
                hedge: Some(hedge),
                ..knobs()
            },
        )
        .unwrap();
        assert_eq!(hedged.scenario.hedging, Some(hedge));
        // The spec the callers are given reads back as the same hedging.
        for spec in ["p95,0.05,1", "20ms,0.1,0", "p99.5,1,7"] {
            let hedging = Hedging::parse(spec).unwrap();
            assert_eq!(Hedging::parse(&hedge_spec(&hedging)), Ok(hedging), "{spec}");
        }
        // A hedging the lab refuses is a usage error naming --hedge.
        let bad = Knobs {
            hedge: Some(Hedging::parse("p95,2,1").unwrap()),
            ..knobs()
        };
        assert!(Plan::new("stragglers", bad)
            .unwrap_err()
            .starts_with("--hedge"));
    }

    #[test]
    fn scenarios_without_a_twin_and_bad_knobs_are_refused() {
        assert!(Plan::new("uniform", knobs())
            .unwrap_err()
            .contains("no real-process twin"));
        let bad = Knobs {
            measure_s: 0.0,
            ..knobs()
        };
        assert!(Plan::new("slow-member", bad)
            .unwrap_err()
            .contains("--duration-s"));
        let bad = Knobs {
            capacity: 0,
            ..knobs()
        };
        assert!(Plan::new("slow-member", bad).is_err());
        let bad = Knobs {
            capacity: 10_001,
            ..knobs()
        };
        assert!(Plan::new("slow-member", bad)
            .unwrap_err()
            .contains("--capacity"));
    }

    #[test]
    fn a_capacity_or_duration_the_processes_refuse_is_a_usage_error_naming_the_flag() {
        use clap::Parser as _;
        let parse = |extra: &[&str]| {
            crate::cli::Cli::try_parse_from(
                ["rpclb", "demo", "--scenario", "slow-member"]
                    .iter()
                    .chain(extra),
            )
        };
        for (flags, flag) in [
            (&["--capacity", "10001"][..], "--capacity"),
            (&["--capacity", "0"][..], "--capacity"),
            (&["--duration-s", "0.0005"][..], "--duration-s"),
            (&["--duration-s", "0.5"][..], "--duration-s"),
            (&["--duration-s", "3601"][..], "--duration-s"),
            (&["--warmup-s", "601"][..], "--warmup-s"),
        ] {
            let error = parse(flags).expect_err(flag);
            assert_eq!(error.exit_code(), 2, "{flags:?}");
            assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
            assert!(error.to_string().contains(flag), "{error}");
        }
        assert!(parse(&["--capacity", "10000", "--duration-s", "1"]).is_ok());
    }

    #[test]
    fn retryable_failures_are_failing_members_and_retries_reach_the_lab_side() {
        let plain = Plan::new("failing-member", knobs()).unwrap();
        assert_eq!(plain.fail_kind, FailKind::Application);
        assert!(!plain.retries());
        let same = plain
            .clone()
            .with_failures(FailKind::Application, false)
            .unwrap();
        assert_eq!(same, plain, "the defaults change nothing");
        let retrying = plain
            .clone()
            .with_failures(FailKind::Retryable, true)
            .unwrap();
        assert_eq!(retrying.fail_kind, FailKind::Retryable);
        assert!(retrying.retries());
        assert_eq!(
            retrying.scenario.retries,
            Some(Retries::default()),
            "the library's default budget, failures of the retryable kind"
        );
        // Application errors under retries: the lab's `fail` is not retryable either.
        let errors = plain.with_failures(FailKind::Application, true).unwrap();
        assert_eq!(
            errors.scenario.retries.map(|r| r.fail_retryable),
            Some(false)
        );
        assert_eq!(errors.fail_kind, FailKind::Application);
        for name in ["slow-member", "paused-member", "new-member"] {
            let error = Plan::new(name, knobs())
                .unwrap()
                .with_failures(FailKind::Retryable, false)
                .unwrap_err();
            assert!(error.contains("--fail-kind"), "{name}: {error}");
            // Retries alone apply to any scenario (a pause's timeouts are never retried).
            assert!(Plan::new(name, knobs())
                .unwrap()
                .with_failures(FailKind::Application, true)
                .unwrap()
                .retries());
        }
    }
}
