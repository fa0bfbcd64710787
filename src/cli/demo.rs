//! `rpclb demo`: a cluster of `rpclb node` children and a table per algorithm, or the
//! real-process twin of a lab scenario.

use clap::builder::PossibleValuesParser;
use clap::Args;
use rpc_load_balancer::algorithm::BUILT_IN;
use rpc_load_balancer::cpu::CpuSampler;

use super::LoadShape;

/// Names `--algorithm` accepts where `all` is allowed too.
fn algorithms_or_all() -> Vec<&'static str> {
    BUILT_IN.iter().copied().chain(["all"]).collect()
}

/// Reads `--hedge`: `rpclb lab --hedge`'s spec, its values checked as the library checks a
/// `HedgePolicy` (a usage error naming the field, e.g. `hedge.ratio`).
pub(super) fn parse_hedge(spec: &str) -> Result<rpclb_lab::scenario::Hedging, String> {
    let hedging = super::lab::parse_hedge(spec)?;
    rpc_load_balancer::testkit::HedgeKit::new(hedging.policy())
        .map(|_| hedging)
        .map_err(|error| format!("{spec:?}: {error}"))
}

/// `rpclb demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Number of `rpclb node` children.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub nodes: u32,
    /// Calls per algorithm (≥ 1).
    #[arg(long, default_value_t = 20_000, value_parser = super::values::at_least_one)]
    pub calls: u64,
    /// An algorithm's name, or `all`.
    #[arg(long, default_value = "all", value_parser = PossibleValuesParser::new(algorithms_or_all()))]
    pub algorithm: String,
    /// Record the library's metrics and print them (Prometheus text) at the end; with
    /// --json they are the `metrics` field.
    #[arg(long)]
    pub metrics: bool,
    /// Node N (1 = the first node, n0) runs `--burn-threads <cores>` to load its CPU. LeastCpu
    /// (`--algorithm least_cpu`, or `all`) then sends it few calls; other algorithms ignore
    /// CPU load and keep sending it its share. With --json the burning node is the `burning`
    /// field.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=32))]
    pub burn: Option<u32>,
    /// How the burning node samples its CPU instead of `process` (`rpclb node
    /// --cpu-sampler`), e.g. `const:100` to pin its reading: a test flag that makes
    /// LeastCpu's choice independent of how busy the machine is. Needs --burn.
    #[arg(long, value_name = "SPEC", requires = "burn")]
    pub burn_sampler: Option<CpuSampler>,
    /// Run the real-process twin of a lab scenario instead: `slow-member`, `paused-member`,
    /// `failing-member`, `new-member` or `stragglers`. Its members are `rpclb node`s serving the
    /// capacity-limited `work` function (--service-ms, --capacity; their utilization is their
    /// CPU reading), --callers caller processes call it open loop at --load of the cluster's
    /// capacity, the scenario's fault is played on the processes, and the lab's table is
    /// printed (`rpclb lab`'s columns). --nodes, --calls, --concurrency, --timeout-ms, --burn
    /// and --metrics do not apply (the call timeout is the lab's, 1 s): given with it, they
    /// are a usage error.
    #[arg(
        long,
        value_name = "NAME",
        value_parser = PossibleValuesParser::new(crate::twin::plan::TWIN_SCENARIOS),
        conflicts_with_all = ["nodes", "calls", "concurrency", "timeout_ms", "burn", "metrics"]
    )]
    pub scenario: Option<String>,
    /// --scenario: the algorithms to run, comma-separated (default: --algorithm's).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = super::lab::algorithm_name, requires = "scenario")]
    pub algorithms: Vec<String>,
    /// --scenario: measured seconds per algorithm (after --warmup-s); the fault's timeline
    /// is the lab's scaled to it.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        requires = "scenario",
        allow_negative_numbers = true,
        value_parser = crate::twin::plan::parse_duration_s
    )]
    pub duration_s: f64,
    /// --scenario: unmeasured seconds per algorithm before the measured ones.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 2.0,
        requires = "scenario",
        allow_negative_numbers = true,
        value_parser = crate::twin::plan::parse_warmup_s
    )]
    pub warmup_s: f64,
    /// --scenario: the members' median service time, ms (lognormal, σ 0.5; sleep-based, so
    /// ≥ 5 keeps tokio's 1 ms timer resolution small against it).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 10.0,
        allow_negative_numbers = true,
        value_parser = crate::twin::plan::parse_service_ms,
        requires = "scenario"
    )]
    pub service_ms: f64,
    /// --scenario: calls a member serves at once (more wait).
    #[arg(long, value_name = "N", default_value_t = 8, requires = "scenario", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub capacity: u32,
    /// --scenario: caller processes (each with its own balancer, as the lab's callers).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16), requires = "scenario")]
    pub callers: u32,
    /// --scenario: the open-loop load, a fraction of the uniform cluster's capacity
    /// (members × capacity ÷ mean service time), split evenly over the callers.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.5,
        allow_negative_numbers = true,
        value_parser = crate::twin::plan::parse_load,
        requires = "scenario"
    )]
    pub load: f64,
    /// --scenario: run everything --runs times and the lab on the same plan (seeds 1–10),
    /// and print for each algorithm p99 ÷ Random's p99 on both sides (`agreement` in
    /// --json). Needs random among the algorithms.
    #[arg(long, requires = "scenario")]
    pub compare: bool,
    /// --compare: how many real runs (the twin's figures are their medians).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20), requires = "compare")]
    pub runs: u32,
    /// --scenario: the callers hedge their calls, as `rpclb lab --hedge` (same spec):
    /// `DELAY,RATIO,MIN_PER_SECOND`, `DELAY` a percentile of the caller's recent latencies
    /// (`p95`) or a set delay (`20ms`), `RATIO` the extra calls the budget allows per call
    /// (0–1) and `MIN_PER_SECOND` its floor, over 10 s — e.g. `p95,0.05,1`. Each caller's
    /// balancer gets that `HedgePolicy` (and no retry budget, as the lab's `--hedge`), and
    /// declares the twin's `work` calls idempotent: hedging sends a call twice, which only
    /// an idempotent function may take (`work` just sleeps). The report adds the hedges sent,
    /// won and refused by the budget, and the extra calls (`hedges` per run in --json); with
    /// --compare the lab hedges the same way.
    #[arg(long, value_name = "SPEC", value_parser = parse_hedge, requires = "scenario", allow_hyphen_values = true)]
    pub hedge: Option<rpclb_lab::scenario::Hedging>,
    #[command(flatten)]
    pub shape: LoadShape,
    /// --scenario failing-member: how the failing member fails its calls: `application` (an
    /// error reply of `work`, which no caller sends again) or `retryable` (a failure of the
    /// retryable kind, as the lab's `fail` with `--retries`: the callers read it as a
    /// connection lost after the send — the library's `test-hooks` hook
    /// `read_failures_as_lost_connections` — which their balancers retry for an idempotent
    /// call as the retry budget allows). Other scenarios refuse `retryable` (a usage error).
    #[arg(long, value_name = "KIND", value_enum, default_value_t = crate::work::FailKind::Application, requires = "scenario")]
    pub fail_kind: crate::work::FailKind,
    /// --scenario: the callers declare their `work` calls idempotent and keep the library's
    /// default retry budget (`RetryBudget::default()`: 20 % of calls plus 10 per second over
    /// 10 s, at most 3 retries a call), as `rpclb lab --retries`: a call failed with the
    /// retryable kind (`--fail-kind retryable`) goes to another member within its deadline
    /// while the budget allows. The report adds the retries sent, their share of the calls
    /// and those the budget refused (`retries` per run in --json); with --compare the lab
    /// retries the same way.
    #[arg(long, requires = "scenario", conflicts_with = "hedge")]
    pub retries: bool,
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    #[test]
    fn demo_scenario_flags_parse_and_need_a_scenario() {
        let demo = |extra: &[&str]| match Cli::try_parse_from(["rpclb", "demo"].iter().chain(extra))
            .map(|cli| cli.command)
        {
            Ok(Command::Demo(args)) => Ok(args),
            Ok(other) => panic!("{other:?}"),
            Err(error) => Err(error),
        };
        let args = demo(&[]).unwrap();
        assert_eq!(args.scenario, None);
        assert_eq!(
            (args.duration_s, args.warmup_s, args.service_ms),
            (10.0, 2.0, 10.0)
        );
        assert_eq!(
            (args.capacity, args.callers, args.load, args.runs),
            (8, 2, 0.5, 3)
        );
        let args = demo(&[
            "--scenario",
            "paused-member",
            "--algorithms",
            "random,least_connections",
            "--compare",
            "--runs",
            "1",
        ])
        .unwrap();
        assert_eq!(args.scenario.as_deref(), Some("paused-member"));
        assert_eq!(args.algorithms, ["random", "least_connections"]);
        assert!(args.compare);
        assert!(demo(&["--scenario", "uniform"]).is_err(), "no twin");
        for flag in [
            &["--nodes", "5"][..],
            &["--calls", "100"],
            &["--concurrency", "4"],
            &["--timeout-ms", "100"],
            &["--burn", "1"],
            &["--metrics"],
        ] {
            let args: Vec<&str> = ["--scenario", "paused-member"]
                .into_iter()
                .chain(flag.iter().copied())
                .collect();
            assert!(
                demo(&args).is_err(),
                "{flag:?} does not apply to a scenario"
            );
        }
        for flag in ["--warmup-s", "--duration-s"] {
            let error = demo(&["--scenario", "paused-member", flag, "-1"]).unwrap_err();
            assert!(error.to_string().contains(flag), "{flag}: {error}");
        }
        for ms in ["0", "-5", "1e9", "NaN"] {
            let error = demo(&["--scenario", "paused-member", "--service-ms", ms]).unwrap_err();
            assert!(error.to_string().contains("--service-ms"), "{ms}: {error}");
        }
        for load in ["50", "0", "-1", "2.5", "NaN"] {
            let error = demo(&["--scenario", "paused-member", "--load", load]).unwrap_err();
            assert!(error.to_string().contains("--load"), "{load}: {error}");
        }
        assert_eq!(
            demo(&["--scenario", "paused-member", "--load", "2"])
                .unwrap()
                .load,
            2.0
        );
        assert!(demo(&["--duration-s", "3"]).is_err(), "needs --scenario");
        assert!(demo(&["--scenario", "slow-member", "--algorithms", "nope"]).is_err());
        // The lab's names: options as suffixes, refused combinations refused here.
        let args = demo(&[
            "--scenario",
            "new-member",
            "--algorithms",
            "random,round_robin+slow_start,round_robin+ejection",
        ])
        .unwrap();
        assert_eq!(
            args.algorithms,
            ["random", "round_robin+slow_start", "round_robin+ejection"]
        );
        assert!(demo(&[
            "--scenario",
            "new-member",
            "--algorithms",
            "hash_ring+slow_start"
        ])
        .is_err());
        assert!(demo(&["--scenario", "slow-member", "--callers", "0"]).is_err());
    }

    #[test]
    fn hedge_reads_the_labs_spec_checks_its_values_and_needs_a_scenario() {
        let demo = |extra: &[&str]| match Cli::try_parse_from(["rpclb", "demo"].iter().chain(extra))
            .map(|cli| cli.command)
        {
            Ok(Command::Demo(args)) => Ok(args),
            Ok(other) => panic!("{other:?}"),
            Err(error) => Err(error),
        };
        let args = demo(&["--scenario", "stragglers", "--hedge", "p95,0.05,1"]).unwrap();
        let hedge = args.hedge.unwrap();
        assert_eq!(
            (hedge.percentile, hedge.ratio, hedge.min_per_second),
            (Some(95.0), 0.05, 1)
        );
        assert_eq!(demo(&["--scenario", "stragglers"]).unwrap().hedge, None);
        let fixed = demo(&["--scenario", "slow-member", "--hedge", "20ms,0.1,0"]).unwrap();
        assert_eq!(fixed.hedge.unwrap().delay_ms, Some(20.0));
        for (spec, says) in [
            ("p95,0.05", "DELAY,RATIO,MIN_PER_SECOND"),
            ("95,0.05,1", "pNN or NNms"),
            ("p95,2,1", "RATIO"),
            ("p100,0.05,1", "DELAY"),
            ("p0,0.05,1", "DELAY"),
            ("0ms,0.05,1", "DELAY"),
            ("NaNms,0.05,1", "DELAY"),
            ("-5ms,0.05,1", "DELAY"),
            ("p95,0.05,-1", "floor"),
        ] {
            let error = demo(&["--scenario", "stragglers", "--hedge", spec]).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{spec}"
            );
            let text = error.to_string();
            assert!(
                text.contains("--hedge") && text.contains(says),
                "{spec}: {text}"
            );
        }
        let error = demo(&["--hedge", "p95,0.05,1"]).unwrap_err();
        assert_eq!(
            error.kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        assert!(error.to_string().contains("--scenario"), "{error}");
    }

    #[test]
    fn fail_kind_and_retries_parse_default_off_and_need_a_scenario() {
        use crate::work::FailKind;
        let demo = |extra: &[&str]| match Cli::try_parse_from(["rpclb", "demo"].iter().chain(extra))
            .map(|cli| cli.command)
        {
            Ok(Command::Demo(args)) => Ok(args),
            Ok(other) => panic!("{other:?}"),
            Err(error) => Err(error),
        };
        let args = demo(&["--scenario", "failing-member"]).unwrap();
        assert_eq!(
            (args.fail_kind, args.retries),
            (FailKind::Application, false)
        );
        let args = demo(&[
            "--scenario",
            "failing-member",
            "--fail-kind",
            "retryable",
            "--retries",
        ])
        .unwrap();
        assert_eq!((args.fail_kind, args.retries), (FailKind::Retryable, true));
        assert_eq!(
            demo(&["--scenario", "failing-member", "--fail-kind", "application"])
                .unwrap()
                .fail_kind,
            FailKind::Application
        );
        let error = demo(&["--scenario", "failing-member", "--fail-kind", "pushback"]).unwrap_err();
        assert!(error.to_string().contains("--fail-kind"), "{error}");
        assert!(demo(&["--retries"]).is_err(), "needs --scenario");
        assert!(
            demo(&["--fail-kind", "retryable"]).is_err(),
            "needs --scenario"
        );
        // The caller process takes the same two.
        let caller = |extra: &[&str]| {
            let base = [
                "rpclb",
                "demo-caller",
                "--peer",
                "127.0.0.1:1",
                "--cookie",
                "c",
                "--name",
                "caller0",
                "--algorithm",
                "random",
                "--members",
                "4",
                "--rate",
                "10",
                "--start-at-unix-ms",
                "0",
                "--warmup-ms",
                "0",
                "--measure-ms",
                "1000",
            ];
            match Cli::try_parse_from(base.iter().chain(extra)).map(|cli| cli.command) {
                Ok(Command::DemoCaller(args)) => Ok(args),
                Ok(other) => panic!("{other:?}"),
                Err(error) => Err(error),
            }
        };
        let args = caller(&[]).unwrap();
        assert_eq!(
            (args.fail_kind, args.retries),
            (FailKind::Application, false)
        );
        let args = caller(&["--fail-kind", "retryable", "--retries"]).unwrap();
        assert_eq!((args.fail_kind, args.retries), (FailKind::Retryable, true));
        assert!(caller(&["--fail-kind", "nope"]).is_err());
    }
}
