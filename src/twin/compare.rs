//! `rpclb demo --scenario NAME --compare`: for each algorithm, p99 ÷ Random's p99 in the lab
//! (the same plan, seeds 1–10, medians) and in the twin (medians of the runs), side by side —
//! the agreement check (within 30 %), as a measurement.

use rpclb_lab::{RunSpec, Summary};

use super::plan::Plan;
use crate::CmdResult;

/// The seeds of the lab side of `--compare`.
pub const LAB_SEEDS: std::ops::RangeInclusive<u64> = 1..=10;

/// One algorithm's line of `--compare`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Agreement {
    /// The algorithm.
    pub algorithm: String,
    /// Its p99 in the lab (median over seeds 1–10), ms.
    pub lab_p99_ms: f64,
    /// That ÷ Random's.
    pub lab_ratio: f64,
    /// Its p99 in the twin (median over the runs), ms.
    pub twin_p99_ms: f64,
    /// That ÷ Random's.
    pub twin_ratio: f64,
    /// `twin_ratio ÷ lab_ratio − 1` (the issue asks for |…| ≤ 0.3).
    pub difference: f64,
}

/// The lab's summaries of `plan` for `algorithms` over [`LAB_SEEDS`] (on a blocking thread).
pub async fn lab_summaries(plan: &Plan, algorithms: &[String]) -> CmdResult<Vec<Summary>> {
    let (scenario, algorithms) = (plan.scenario.clone(), algorithms.to_vec());
    let load = plan.load_point();
    tokio::task::spawn_blocking(move || -> CmdResult<Vec<Summary>> {
        let mut summaries = Vec::new();
        for name in &algorithms {
            // The algorithm as the twin's callers run it (LeastCpu with the demo's polling).
            let algorithm = crate::demo_cmd::demo_algorithm(name)?;
            let runs = LAB_SEEDS
                .map(|seed| {
                    rpclb_lab::run(&RunSpec {
                        scenario: &scenario,
                        load,
                        algorithm: &*algorithm,
                        seed,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            summaries.extend(Summary::of(&runs));
        }
        Ok(summaries)
    })
    .await?
}

/// For each algorithm, p99 ÷ Random's p99 in the lab and in the twin.
pub fn agreement(lab: &[Summary], twin: &[Summary]) -> Vec<Agreement> {
    let random = |s: &[Summary]| s.iter().find(|x| x.algorithm == "random").map(|x| x.p99_ms);
    let (Some(lab_random), Some(twin_random)) = (random(lab), random(twin)) else {
        return Vec::new();
    };
    lab.iter()
        .filter_map(|l| {
            let t = twin.iter().find(|t| t.algorithm == l.algorithm)?;
            let (lab_ratio, twin_ratio) = (l.p99_ms / lab_random, t.p99_ms / twin_random);
            Some(Agreement {
                algorithm: l.algorithm.clone(),
                lab_p99_ms: l.p99_ms,
                lab_ratio,
                twin_p99_ms: t.p99_ms,
                twin_ratio,
                difference: twin_ratio / lab_ratio - 1.0,
            })
        })
        .collect()
}

/// The `--compare` table of `rows`, the twin's figures being medians of `runs` runs.
pub fn agreement_table(rows: &[Agreement], runs: u32) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "\nagreement: p99 ÷ Random's p99, lab (median of seeds 1–10) vs twin (median of {runs} run{})\n",
        if runs == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "{:<21} {:>11} {:>9} {:>12} {:>10} {:>11}",
        "algorithm", "lab p99 ms", "lab ×", "twin p99 ms", "twin ×", "difference"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<21} {:>11.2} {:>9.2} {:>12.2} {:>10.2} {:>+10.0}%",
            r.algorithm,
            r.lab_p99_ms,
            r.lab_ratio,
            r.twin_p99_ms,
            r.twin_ratio,
            r.difference * 100.0
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(algorithm: &str, p99_ms: f64) -> Summary {
        Summary {
            scenario: "s".into(),
            load: "open 50%".into(),
            algorithm: algorithm.into(),
            runs: 1,
            p50_ms: 1.0,
            p99_ms,
            p999_ms: p99_ms,
            error_rate: 0.0,
            goodput_per_s: 1.0,
            shares: vec![],
            faulty_member: None,
            shed_ms: None,
            never_shed: 0,
            fault_goodput_ratio: None,
            faulty_picks_per_caller: None,
            last_faulty_pick_ms: None,
            busiest_member_in_flight: None,
            mean_member_in_flight: None,
            calls_moved_from_home: None,
            little_max_error: 0.0,
            overloaded: 0,
            overloaded_at_s: None,
        }
    }

    #[test]
    fn ratios_are_to_randoms_p99_on_each_side() {
        let lab = [summary("random", 100.0), summary("least_connections", 20.0)];
        let twin = [summary("least_connections", 50.0), summary("random", 200.0)];
        let rows = agreement(&lab, &twin);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].lab_ratio, rows[0].twin_ratio), (1.0, 1.0));
        let lc = &rows[1];
        assert_eq!((lc.lab_ratio, lc.twin_ratio), (0.2, 0.25));
        assert!((lc.difference - 0.25).abs() < 1e-12);
        assert!(agreement_table(&rows, 3).contains("+25%"));
        // Without Random on a side there is nothing to compare to.
        assert!(agreement(&lab[1..], &twin).is_empty());
    }
}
