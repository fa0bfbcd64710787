//! `rpclb bench`: latency and throughput against the raw ractor_cluster floor, and its value
//! parsers (payload sizes, seconds).

use clap::Args;

use super::{LoadShape, RuntimeFlavor};

/// Parses a payload size: bytes, or a number with a `KiB` or `MiB` suffix (`1KiB` = 1024);
/// 1 B to 4 MiB.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let multiplier = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        other => return Err(format!("unknown unit {other:?} (B, KiB or MiB)")),
    };
    let number: usize = digits
        .parse()
        .map_err(|e| format!("{text:?} is not a size: {e}"))?;
    match number.checked_mul(multiplier) {
        Some(size) if (1..=MAX_BENCH_PAYLOAD).contains(&size) => Ok(size),
        _ => Err(format!("{text:?} is outside 1 B..=4 MiB")),
    }
}

/// The largest `rpclb bench` payload: well under the nodes' default payload cap (8 MiB).
pub const MAX_BENCH_PAYLOAD: usize = 4 * 1024 * 1024;

/// Parses a number of seconds ≥ 0 (finite).
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if (0.0..=86_400.0).contains(&secs) => Ok(secs),
        Ok(_) => Err(format!("{text:?} is outside 0..=86400 seconds")),
        Err(e) => Err(format!("{text:?} is not a number of seconds: {e}")),
    }
}

/// Parses a number of seconds > 0 (finite).
fn positive_seconds(text: &str) -> Result<f64, String> {
    let secs = seconds(text)?;
    if secs > 0.0 {
        Ok(secs)
    } else {
        Err("must be more than 0 seconds".to_string())
    }
}

/// `rpclb bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Payload sizes, comma-separated: bytes, or with a `KiB`/`MiB` suffix (1 B..=4 MiB).
    #[arg(long, value_delimiter = ',', default_value = "100,1KiB,64KiB", value_parser = parse_size)]
    pub sizes: Vec<usize>,
    /// Timed sequential calls per case and payload size, split evenly over the rounds (each
    /// round's batch is rounded up, so at least this many are timed).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub calls: u64,
    /// Untimed sequential calls per case and payload size before its first round (the
    /// throughput phase has --warmup-secs).
    #[arg(long, default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    pub warmup: u64,
    /// Rounds per payload size and phase; a round runs every case once, the order rotated by
    /// one each round (raw, direct, balanced, local; then direct, balanced, local, raw; ...).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub rounds: u32,
    /// Measured seconds of the throughput phase per case and payload size, split evenly over
    /// the rounds (> 0).
    #[arg(long, default_value_t = 5.0, value_parser = positive_seconds)]
    pub secs: f64,
    /// Unmeasured seconds of throughput per case and payload size before its first round.
    #[arg(long, default_value_t = 0.5, value_parser = seconds)]
    pub warmup_secs: f64,
    /// Tokio worker threads of each `rpclb node` child (their `--worker-threads`; this
    /// process's own are the global `--worker-threads`).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub node_worker_threads: u16,
    /// Tokio runtime flavor of each `rpclb node` child (their `--runtime`; default: this
    /// process's `--runtime`).
    #[arg(long, value_name = "FLAVOR", value_enum)]
    pub node_runtime: Option<RuntimeFlavor>,
    /// One more argument for every `rpclb node` child, passed as is (repeat for several), e.g.
    /// `--node-arg=--cpu-sample-interval-ms=5000`.
    #[arg(long = "node-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub node_args: Vec<String>,
    #[command(flatten)]
    pub shape: LoadShape,
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    #[test]
    fn bench_flags_have_their_defaults_and_parse() {
        let bench = |extra: &[&str]| {
            let args = ["rpclb", "bench"].iter().chain(extra);
            match Cli::try_parse_from(args).map(|cli| cli.command) {
                Ok(Command::Bench(args)) => Ok(args),
                Ok(other) => panic!("not a bench command: {other:?}"),
                Err(error) => Err(error),
            }
        };
        let args = bench(&[]).unwrap();
        assert_eq!(args.sizes, [100, 1024, 65536]);
        assert_eq!((args.calls, args.warmup, args.rounds), (20_000, 2_000, 5));
        assert_eq!((args.secs, args.warmup_secs), (5.0, 0.5));
        assert_eq!(args.shape.concurrency, 32);
        assert_eq!(args.node_worker_threads, 1);
        let args = bench(&[
            "--sizes",
            "7,2KiB,1MiB",
            "--secs",
            "0.5",
            "--node-arg",
            "--cpu-sample-interval-ms=5000",
            "--node-worker-threads",
            "2",
            "--worker-threads",
            "2",
        ])
        .unwrap();
        assert_eq!(args.sizes, [7, 2048, 1 << 20]);
        assert_eq!(args.node_args, ["--cpu-sample-interval-ms=5000"]);
        assert_eq!(args.node_worker_threads, 2);
        for bad in ["0", "5MiB", "3kb", "x"] {
            assert!(bench(&["--sizes", bad]).is_err(), "{bad}");
        }
        assert!(bench(&["--secs", "-1"]).is_err());
        assert!(bench(&["--secs", "inf"]).is_err());
        assert!(bench(&["--secs", "0"]).is_err());
        assert!(bench(&["--warmup-secs", "0"]).is_ok());
        assert!(bench(&["--rounds", "0"]).is_err());
    }
}
