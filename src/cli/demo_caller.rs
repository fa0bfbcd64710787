//! `rpclb demo-caller` (hidden): one caller process of `rpclb demo --scenario`.

use clap::Args;

use super::ClusterArgs;

/// `rpclb demo-caller` (hidden): one caller process of `rpclb demo --scenario`.
#[derive(Debug, Clone, Args)]
pub struct DemoCallerArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// This caller's node name.
    #[arg(long)]
    pub name: String,
    /// The algorithm of its balancer.
    #[arg(long, value_parser = super::lab::algorithm_name)]
    pub algorithm: String,
    /// Members to wait for (≤ 15 s) before the start.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub members: u32,
    /// Calls per second (Poisson arrivals; > 0).
    #[arg(long, value_parser = positive_rate)]
    pub rate: f64,
    /// The run's start, ms since the Unix epoch (every caller and the demo agree on it).
    #[arg(long)]
    pub start_at_unix_ms: u64,
    /// Unmeasured ms from the start.
    #[arg(long)]
    pub warmup_ms: u64,
    /// Measured ms after the warm-up.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub measure_ms: u64,
    /// Timeout of each call, ms.
    #[arg(long, default_value_t = 1_000, value_parser = super::values::at_least_one)]
    pub timeout_ms: u64,
    /// Seed of the arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How the failing member fails (`rpclb demo --fail-kind`): with `retryable` this caller
    /// reads `work`'s failures of the retryable kind as lost connections (the library's
    /// `test-hooks` hook `read_failures_as_lost_connections`).
    #[arg(long, value_name = "KIND", value_enum, default_value_t = crate::work::FailKind::Application)]
    pub fail_kind: crate::work::FailKind,
    /// Declare the calls of `work` idempotent, under the balancer's default retry budget
    /// (`rpclb demo --retries`); the report's `retries` counts what it did.
    #[arg(long)]
    pub retries: bool,
    /// The faulty member's full node name: the caller counts the calls around its fault
    /// (the report's `fault`), which spans `--fault-from-us`..`--fault-to-us`.
    #[arg(long, requires_all = ["fault_from_us", "fault_to_us"])]
    pub fault_member: Option<String>,
    /// The fault's start, µs from the run's start.
    #[arg(long, requires = "fault_member")]
    pub fault_from_us: Option<u64>,
    /// The fault's end (exclusive), µs from the run's start.
    #[arg(long, requires = "fault_member")]
    pub fault_to_us: Option<u64>,
    /// Hedge the calls (`rpclb demo --hedge`'s spec, `DELAY,RATIO,MIN_PER_SECOND`): the
    /// calls of `work` are idempotent and the balancer has that `HedgePolicy` (and no retry
    /// budget); the report's `hedges` counts what it did.
    #[arg(long, value_name = "SPEC", value_parser = super::demo::parse_hedge)]
    pub hedge: Option<rpclb_lab::scenario::Hedging>,
    /// Exit when stdin reaches end of file: the demo holds the pipe, so the caller ends with
    /// the demo that started it, even a SIGKILLed one (as `rpclb node --exit-with-stdin`).
    #[arg(long)]
    pub exit_with_stdin: bool,
}

/// Parses a rate in calls/s: finite, above 0, at most 1,000,000.
fn positive_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|e| format!("{text:?} is not a number: {e}"))?;
    if rate.is_finite() && rate > 0.0 && rate <= 1_000_000.0 {
        Ok(rate)
    } else {
        Err(format!("{rate} is not in (0, 1000000]"))
    }
}
