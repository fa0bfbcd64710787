//! The flags of the node's `work` demo function (the lab's scenarios played on real nodes).

use std::time::Duration;

use clap::Args;

/// How the node's `work` demo function serves (`rpclb demo --scenario` runs its nodes with
/// these): at most `--work-capacity` calls at once, lognormal service times, and the faults
/// of the lab's scenarios. Out-of-range values are refused at start, naming the setting.
#[derive(Debug, Clone, Args)]
pub struct WorkArgs {
    /// work: calls in service at once (1–10000); more wait in a FIFO queue.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub work_capacity: u32,
    /// work: the median service time, ms (> 0; sleep-based: tokio's timer has 1 ms
    /// resolution, so keep it ≥ 5).
    #[arg(long, value_name = "MS", default_value_t = 10.0)]
    pub work_median_ms: f64,
    /// work: the lognormal shape σ of the service time (0–3).
    #[arg(long, value_name = "SIGMA", default_value_t = 0.5)]
    pub work_sigma: f64,
    /// work: the seed of the service-time RNG.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub work_seed: u64,
    /// work: service times are this many times longer (1–1000), from start (lab fault
    /// `slow`).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub work_slow_factor: f64,
    /// work: --work-slow-factor lasts only this long after start, in ms (lab `join` with a
    /// factor); absent: for ever.
    #[arg(long, value_name = "MS")]
    pub work_slow_for_ms: Option<u64>,
    /// work: this fraction of calls (0–1) fails at once, unserved (lab fault `fail`).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub work_fail_fraction: f64,
    /// work: this fraction of calls (0–1) are stragglers, their service time
    /// --work-straggler-factor times longer (the lab's `[stragglers]`; drawn from the
    /// --work-seed RNG).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub work_straggler_fraction: f64,
    /// work: a straggler's service-time multiplier (1–1000).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    pub work_straggler_factor: f64,
    /// The node's CPU reading (for LeastCpu) is the work function's utilization — mean calls
    /// in service ÷ --work-capacity since the previous sample, in % — instead of
    /// --cpu-sampler's (sleeping burns no CPU).
    #[arg(long)]
    pub cpu_from_work: bool,
}

impl WorkArgs {
    /// The `work` settings these flags give.
    pub fn settings(&self) -> crate::work::WorkSettings {
        crate::work::WorkSettings {
            capacity: self.work_capacity,
            median_ms: self.work_median_ms,
            sigma: self.work_sigma,
            seed: self.work_seed,
            slow_factor: self.work_slow_factor,
            slow_for: self.work_slow_for_ms.map(Duration::from_millis),
            fail_fraction: self.work_fail_fraction,
            straggler_fraction: self.work_straggler_fraction,
            straggler_factor: self.work_straggler_factor,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::cli::node::tests::node_args;

    #[test]
    fn node_work_flags_have_their_defaults_and_parse() {
        let defaults = node_args(&[]).unwrap().work;
        assert_eq!(defaults.settings(), crate::work::WorkSettings::default());
        assert!(!defaults.cpu_from_work);
        let args = node_args(&[
            "--work-capacity",
            "2",
            "--work-median-ms",
            "5",
            "--work-sigma",
            "0",
            "--work-seed",
            "9",
            "--work-slow-factor",
            "5",
            "--work-slow-for-ms",
            "3000",
            "--work-fail-fraction",
            "0.5",
            "--work-straggler-fraction",
            "0.01",
            "--work-straggler-factor",
            "20",
            "--cpu-from-work",
        ])
        .unwrap();
        let settings = args.work.settings();
        assert_eq!(
            (settings.capacity, settings.median_ms, settings.sigma),
            (2, 5.0, 0.0)
        );
        assert_eq!((settings.seed, settings.slow_factor), (9, 5.0));
        assert_eq!(settings.slow_for, Some(Duration::from_secs(3)));
        assert_eq!(settings.fail_fraction, 0.5);
        assert_eq!(
            (settings.straggler_fraction, settings.straggler_factor),
            (0.01, 20.0)
        );
        assert!(args.work.cpu_from_work);
    }
}
