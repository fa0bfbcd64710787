//! `rpclb lab`: the balancing lab's scenarios in a deterministic simulation.

use std::path::PathBuf;

use clap::Args;
use rpc_load_balancer::algorithm::{BUILT_IN, EXTRA, SUFFIXES};
use rpc_load_balancer::routing::BuildContext;
use rpclb_lab::SubsetScheme;

/// Parses `--seeds`: `A..B` (inclusive, A ≤ B) or one seed `N`.
fn seed_range(text: &str) -> Result<(u64, u64), String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("{s:?} is not a seed: {e}"))
    };
    let (first, last) = match text.split_once("..") {
        Some((a, b)) => (parse(a)?, parse(b.trim_start_matches('='))?),
        None => {
            let n = parse(text)?;
            (n, n)
        }
    };
    if first > last {
        return Err(format!("{first} is above {last}"));
    }
    if last - first >= 10_000 {
        return Err("at most 10,000 seeds".into());
    }
    Ok((first, last))
}

/// `rpclb lab`.
#[derive(Debug, Clone, Args)]
pub struct LabArgs {
    /// A built-in scenario's name (`uniform`, `slow-member`, ...; see docs/explanation/lab.md)
    /// or a scenario file (TOML); repeatable. Default: every built-in scenario.
    #[arg(long, value_name = "NAME|FILE")]
    pub scenario: Vec<String>,
    /// An algorithm's name, optionally with `+ejection` (that algorithm with outlier ejection
    /// at its defaults, e.g. `round_robin+ejection`) and `+slow_start` (with slow start at
    /// its defaults; both: `round_robin+slow_start+ejection`); repeatable. Besides the built-in
    /// algorithms' names: `hash_ring_bounded` (HashRing with `balance_factor` 1.25). Default:
    /// every built-in algorithm, without ejection.
    #[arg(long, value_parser = algorithm_name)]
    pub algorithm: Vec<String>,
    /// The seeds, `A..B` inclusive, or one seed.
    #[arg(long, default_value = "1..10", value_parser = seed_range)]
    pub seeds: (u64, u64),
    /// Simulated seconds measured, instead of each scenario's own (e.g. a short smoke).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub measure_s: Option<f64>,
    /// Simulated seconds of warm-up, instead of each scenario's own.
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true)]
    pub warmup_s: Option<f64>,
    /// Deterministic subsetting: each caller balances over only K members (its subset of the
    /// members present), instead of each scenario's own `subset` (at least 1).
    #[arg(long, value_name = "K", value_parser = super::values::at_least_one)]
    pub subset: Option<u64>,
    /// The subsetting scheme, `aperture` (the library's default), `rounds` or `rendezvous`,
    /// instead of each scenario's own `subset_scheme`; repeatable (or comma-separated): each
    /// scenario then runs once per scheme. Needs a subset size (`--subset` or the
    /// scenario's `subset`).
    #[arg(long, value_name = "SCHEME", value_delimiter = ',', value_parser = subset_scheme)]
    pub subset_scheme: Vec<SubsetScheme>,
    /// Run nothing: print, per scenario (its members, callers and subset size) and scheme
    /// (those of `--subset-scheme`, else all three), how many subsets hold each member
    /// (fewest, most, mean) and how many subset entries change when one member leaves or
    /// joins (mean and most over up to 100 members tried, and the most of one caller). A
    /// pure computation; needs a subset size.
    #[arg(long)]
    pub subset_churn: bool,
    /// Calls are idempotent and retried under each caller's retry budget, the library's
    /// default (`RetryBudget::default()`: 20 % of calls plus 10 per second over 10 s, at most
    /// 3 retries a call), and `fail` events' failures are of the retryable kind (connection
    /// lost, unreachable, pushback): as a scenario with `[retries]` at its defaults. A
    /// scenario's own `[retries]` is kept. Issue 22.
    #[arg(long)]
    pub retries: bool,
    /// Calls are idempotent and hedged as each caller's balancer would with a `HedgePolicy`:
    /// `DELAY,RATIO,MIN_PER_SECOND`, `DELAY` a percentile of the caller's recent latencies
    /// (`p95`) or a set delay (`20ms`), `RATIO` the extra calls the budget allows per call
    /// (0–1) and `MIN_PER_SECOND` its floor, over 10 s — e.g. `p95,0.05,1`. As a scenario with
    /// that `[hedging]`; a scenario's own `[hedging]` is kept. Issue 22.
    /// The delay must be above 0: `--hedge -5ms,0.05,1` is read as the flag's value (not as
    /// another flag) and refused for its delay.
    #[arg(long, value_name = "SPEC", value_parser = parse_hedge, allow_hyphen_values = true)]
    pub hedge: Option<rpclb_lab::scenario::Hedging>,
    /// Runs at once, on this many threads (each run is single-threaded and deterministic:
    /// the report does not depend on it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: u16,
    /// Print one JSON document instead of the tables: `{"scenarios":[{"scenario":{..},
    /// "summaries":[..],"runs":[..]}]}`.
    #[arg(long)]
    pub json: bool,
    /// Also write a picture per scenario and load into this directory (created if missing):
    /// `SCENARIO-LOAD.svg` with each algorithm's latency distribution and, for a scenario
    /// whose faulty member changes over time, its share over time (the first seed's runs).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
}

/// A subsetting scheme's name.
fn subset_scheme(name: &str) -> Result<SubsetScheme, String> {
    SubsetScheme::from_name(name).ok_or_else(|| {
        let known: Vec<&str> = SubsetScheme::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown subset scheme {name:?}; known: {}",
            known.join(", ")
        )
    })
}

/// A built-in algorithm's name (or an extra one, `hash_ring_bounded`), optionally with
/// suffixes (`+ejection`, `+slow_start`, in any order: each wraps what is before it). Also
/// `rpclb demo --algorithms`' and its callers' parser.
pub(super) fn algorithm_name(name: &str) -> Result<String, String> {
    let mut base = name;
    while let Some(rest) = SUFFIXES.iter().find_map(|s| base.strip_suffix(s)) {
        base = rest;
    }
    if BUILT_IN.contains(&base) || EXTRA.contains(&base) {
        // A combination the library refuses (a suffix twice, slow start on HashRing or
        // CallDirect) is a usage error here too, not a failure after the scenarios load.
        rpc_load_balancer::algorithm::by_name(name)
            .and_then(|algorithm| algorithm.build(&BuildContext::new("lab")).map(drop))
            .map_err(|error| format!("{name:?}: {error}"))?;
        Ok(name.to_string())
    } else {
        Err(format!(
            "unknown algorithm {name:?}; known: {}, {} (each optionally with {})",
            BUILT_IN.join(", "),
            EXTRA.join(", "),
            SUFFIXES.join(", ")
        ))
    }
}

/// Reads `--hedge`'s spec (also `rpclb demo --hedge`'s) and checks its values (a delay above
/// 0, a ratio of 0–1, ...),
/// naming the part of the spec that is wrong.
pub(super) fn parse_hedge(spec: &str) -> Result<rpclb_lab::scenario::Hedging, String> {
    let hedging = rpclb_lab::scenario::Hedging::parse(spec)?;
    hedging.check().map_err(|(field, reason)| {
        let part = match field.as_str() {
            "hedging.delay_ms" | "hedging.percentile" => "DELAY",
            "hedging.ratio" => "RATIO",
            _ => field.as_str(),
        };
        format!("{spec:?}: {part}: {reason}")
    })?;
    Ok(hedging)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn hedge(args: &[&str]) -> Result<Option<rpclb_lab::scenario::Hedging>, String> {
        match Cli::try_parse_from(["rpclb", "lab"].iter().chain(args)) {
            Ok(Cli {
                command: Command::Lab(lab),
                ..
            }) => Ok(lab.hedge),
            Ok(other) => panic!("{other:?}"),
            Err(error) => Err(error.to_string()),
        }
    }

    /// `--hedge -5ms...` reaches the spec's parser (not clap's "unexpected argument"), and a
    /// negative delay is refused there, as with `--hedge=-5ms...`.
    #[test]
    fn a_negative_hedge_delay_is_refused_by_the_spec_check_however_written() {
        for args in [&["--hedge", "-5ms,0.05,1"][..], &["--hedge=-5ms,0.05,1"]] {
            let error = hedge(args).unwrap_err();
            assert!(!error.contains("unexpected argument"), "{args:?}: {error}");
            assert!(
                error.contains("DELAY: -5 is not a delay above 0 ms"),
                "{args:?}: {error}"
            );
        }
        let error = hedge(&["--hedge", "-5ms"]).unwrap_err();
        assert!(
            error.contains("expected DELAY,RATIO,MIN_PER_SECOND"),
            "{error}"
        );
        let error = hedge(&["--hedge", "p95,1.5,1"]).unwrap_err();
        assert!(error.contains("RATIO: "), "{error}");
        let p95 = hedge(&["--hedge", "p95,0.05,1"]).unwrap().unwrap();
        assert_eq!(p95.percentile, Some(95.0));
    }
}
