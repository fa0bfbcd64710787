//! `rpclb bench`: end-to-end call performance, side by side with the raw ractor_cluster floor
//! (issue 9).
//!
//! Starts 3 `rpclb node` children on 127.0.0.1 — `n0` (the node the others dial; not a
//! target) and the two **targets** `n1` and `n2`, each running balancer [`BENCH_BALANCER`]
//! with RoundRobin, of which only the targets are members — and joins them as a 4th node that
//! measures four [cases](Case):
//!
//! * `raw` (a): a plain ractor_cluster RPC to the target's [raw floor
//!   actor](crate::raw_floor), which runs each call on a task like our endpoint does — the
//!   floor our layer adds to;
//! * `direct` (b): `Node::call::<BytesEcho>(target, payload)`;
//! * `balanced` (c): a call through a RoundRobin balancer on this node whose members are the
//!   two targets;
//! * `local` (d): a call through a balancer whose only member is this node (served in-process).
//!
//! For each payload size it runs a **sequential** phase (one caller; `--warmup` untimed calls
//! per case, then `--rounds` rounds in each of which every case makes `calls / rounds` timed
//! calls, the case order rotated by one each round so that no case always runs first) and a
//! **throughput** phase
//! (`--concurrency` callers, caller *i* on target *i* mod 2 for raw and direct; `--warmup-secs`
//! untimed, then the same rounds of `secs / rounds` seconds per case). The report gives each
//! case's figures over all its rounds and, per round, the ratios direct/raw and balanced/raw
//! (p50, p99, calls/s) with their min, median and max. Every call checks its reply's length
//! (warm-up calls: every byte); a wrong reply counts as an error of kind `wrong_reply`.
//!
//! Latencies go through [`load::drive`](crate::load::drive), so they are kept as `rpclb load` keeps them: in a
//! fixed-size histogram ([`crate::latency::Latencies`], 3 significant digits), not one by one.
//! A bench run is bounded, so a list would not have grown without end here, but one recorder
//! for both keeps memory flat for long `--secs` runs too; a percentile within 0.1 % moves a
//! ratio by at most about 0.002, the size of its 3-decimal rounding.
//!
//! The modules: `case` (what is measured), `targets` (the calls each case makes and the
//! setup that finds them), `plan` (rounds, order and payloads), `phase` (a phase's results
//! and ratios), `measure` (one run on the joined node), and its output as `json` or `table`.

use std::time::Duration;

use crate::cli::{BenchArgs, RuntimeSettings};
use crate::harness::Cluster;
use crate::interrupt::Interrupt;
use crate::CmdResult;

mod case;
mod json;
mod measure;
mod phase;
mod plan;
mod table;
mod targets;

pub use case::Case;

/// The balancer every child runs and the two targets are members of (`balanced`).
pub const BENCH_BALANCER: &str = "bench";

/// The balancer only the bench node runs and is a member of (`local`).
pub const LOCAL_BALANCER: &str = "bench_local";

/// The `--node-match-regex` of the children's [`BENCH_BALANCER`]: only `n1` and `n2`, the
/// targets, are its members.
const TARGETS_REGEX: &str = "^n[12]@";

/// Bound for the mesh, the balancers' members and the raw floor actors to show up.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// The `rpclb node` arguments of every child; `runtime` is this process's (the children's
/// default).
fn child_args(args: &BenchArgs, runtime: RuntimeSettings) -> Vec<String> {
    let mut child: Vec<String> = [
        "--balancer",
        BENCH_BALANCER,
        "--algorithm",
        "round_robin",
        "--node-match-regex",
        TARGETS_REGEX,
        "--worker-threads",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    child.push(args.node_worker_threads.to_string());
    child.push("--runtime".to_string());
    child.push(
        args.node_runtime
            .unwrap_or(runtime.flavor)
            .as_str()
            .to_string(),
    );
    child.extend(args.node_args.iter().cloned());
    child
}

/// Runs the bench; this process runs `worker_threads` tokio workers (the global flag, for the
/// report). Exit status 0 when every call succeeded, 1 when some failed, 130 when interrupted
/// (Ctrl-C or SIGTERM). The children are killed and reaped before it returns, whatever the
/// outcome.
pub async fn run(args: BenchArgs, runtime: RuntimeSettings) -> CmdResult<i32> {
    let bin = std::env::current_exe()?;
    let child = child_args(&args, runtime);
    let child: Vec<&str> = child.iter().map(String::as_str).collect();
    let nodes = [child.as_slice(); 3];
    let interrupt = Interrupt::listen()?;
    if !args.shape.json {
        eprintln!("starting 3 nodes on 127.0.0.1 ...");
    }
    // A partly started cluster is dropped on interruption, which kills its children.
    let cluster = tokio::select! {
        cluster = Cluster::start_each(&bin, &nodes) => cluster?,
        () = interrupt.wait() => {
            eprintln!("interrupted");
            return Ok(130);
        }
    };
    let outcome = tokio::select! {
        outcome = measure::measure(&cluster, &args, runtime) => Some(outcome),
        () = interrupt.wait() => None,
    };
    cluster.shutdown().await;
    match outcome {
        None => {
            eprintln!("interrupted");
            Ok(130)
        }
        Some(Ok(true)) => Ok(0),
        Some(Ok(false)) => Ok(1),
        Some(Err(error)) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::RuntimeFlavor;
    use plan::Plan;

    fn cli_runtime() -> crate::cli::Cli {
        use clap::Parser;
        crate::cli::Cli::try_parse_from(["rpclb", "bench"]).unwrap()
    }

    #[test]
    fn children_get_the_node_runtime_flag() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "rpclb",
            "--runtime",
            "current-thread",
            "bench",
            "--node-runtime",
            "multi-thread",
            "--node-arg=--delay-ms=0",
        ])
        .unwrap();
        let runtime = crate::cli::RuntimeSettings::of(&cli);
        assert_eq!(runtime.flavor, RuntimeFlavor::CurrentThread);
        assert_eq!(runtime.worker_threads, 1);
        let crate::cli::Command::Bench(args) = cli.command else {
            panic!("not bench")
        };
        let child = child_args(&args, runtime);
        assert_eq!(
            child[child.len() - 3..],
            ["--runtime", "multi-thread", "--delay-ms=0"]
        );
    }

    #[test]
    fn the_plan_covers_at_least_the_calls_asked_for() {
        use clap::Parser;
        let cli =
            crate::cli::Cli::try_parse_from(["rpclb", "bench", "--calls", "1001", "--rounds", "4"])
                .unwrap();
        let crate::cli::Command::Bench(args) = cli.command else {
            panic!("not bench")
        };
        let plan = Plan::of(&args);
        assert_eq!(plan.calls_per_round, 251);
        assert_eq!(plan.window, Duration::from_millis(1250));
        // 3 sizes × 4 cases × (2 phases × 4 rounds + 2 warm-ups)
        assert_eq!(plan.steps(), 3 * 4 * 10);
        let runtime = crate::cli::RuntimeSettings::of(&cli_runtime());
        let child = child_args(&args, runtime);
        // The children run this process's runtime flavor unless --node-runtime says otherwise.
        assert_eq!(child[child.len() - 2..], ["--runtime", "current-thread"]);
        assert_eq!(
            child[..6],
            [
                "--balancer",
                "bench",
                "--algorithm",
                "round_robin",
                "--node-match-regex",
                "^n[12]@"
            ]
        );
    }
}
