//! The lab's table: one row per load and algorithm of a scenario (medians over the seeds),
//! as `rpclb lab` and `rpclb demo --scenario` print it.

use std::fmt::Write as _;

use rpclb_lab::Summary;

use super::ScenarioResults;

/// A figure, or `-` when there is none (NaN: no complete run).
fn figure(value: f64, width: usize, decimals: usize) -> String {
    if value.is_nan() {
        format!("{:>width$}", "-")
    } else {
        format!("{value:>width$.decimals$}")
    }
}

/// A summary's shares: each member's in %, right-aligned in 5 characters, up to 8 members;
/// else the least and the most.
fn shares(x: &Summary) -> String {
    if x.shares.iter().any(|v| v.is_nan()) {
        "-".to_string()
    } else if x.shares.len() <= 8 {
        x.shares
            .iter()
            .map(|v| format!("{:>5.1}", v * 100.0))
            .collect::<Vec<_>>()
            .join(" ")
    } else {
        let (lo, hi) = x
            .shares
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
        format!("{:.3}–{:.3} each", lo * 100.0, hi * 100.0)
    }
}

/// The row's note: how many seeds overloaded, and when the first did.
fn note(x: &Summary) -> String {
    match x.overloaded_at_s {
        Some(at) if x.overloaded == x.runs => format!("overloaded at {at:.1} s"),
        Some(at) => format!(
            "overloaded in {} of {} seeds (at {at:.1} s)",
            x.overloaded, x.runs
        ),
        None => String::new(),
    }
}

/// The table of one scenario: a row per load and algorithm (medians over the seeds whose
/// runs ran to the end and measured calls; `-` where none did), a `note` column saying how
/// many seeds overloaded, and for a scenario that changes the faulty member's share per 5 s.
pub fn table(result: &ScenarioResults) -> String {
    let s = &result.scenario;
    let seeds = result.summaries.first().map_or(0, |x| x.runs);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{} — {} ({} members, {} callers{}; {} s measured after {} s; medians over {} seed{})",
        s.name,
        s.description,
        s.members,
        s.callers,
        s.subsetting().map_or(String::new(), |x| format!(
            ", each balancing over a subset of {} ({})",
            x.size(),
            x.scheme().name()
        )),
        s.measure_s,
        s.warmup_s,
        seeds,
        if seeds == 1 { "" } else { "s" }
    );
    let rows: Vec<(String, String)> = result
        .summaries
        .iter()
        .map(|x| (shares(x), note(x)))
        .collect();
    // Width in characters (the range's dash is one character, three bytes).
    let shares_width = rows
        .iter()
        .map(|(s, _)| s.chars().count())
        .chain(["shares %".len()])
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "{:<11} {:<21} {:>9} {:>9} {:>9} {:>8} {:>10}  {:<shares_width$} {:>8}  note",
        "load",
        "algorithm",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "errors",
        "goodput/s",
        "shares %",
        "shed"
    );
    for (x, (shares, note)) in result.summaries.iter().zip(rows) {
        let shed = match (x.faulty_member, x.shed_ms) {
            (None, _) => "-".to_string(),
            (Some(_), Some(ms)) => format!("{:.1} s", ms / 1e3),
            (Some(_), None) if x.never_shed == 0 => "-".to_string(),
            (Some(_), None) => "never".to_string(),
        };
        let errors = if x.error_rate.is_nan() {
            "-".to_string()
        } else {
            format!("{:.2}%", x.error_rate * 100.0)
        };
        let line = format!(
            "{:<11} {:<21} {} {} {} {:>8} {}  {}{} {:>8}  {}",
            x.load,
            x.algorithm,
            figure(x.p50_ms, 9, 3),
            figure(x.p99_ms, 9, 3),
            figure(x.p999_ms, 9, 3),
            errors,
            figure(x.goodput_per_s, 10, 0),
            shares,
            " ".repeat(shares_width - shares.chars().count()),
            shed,
            note
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    if let Some(faulty) = result.summaries.first().and_then(|x| x.faulty_member) {
        if s.changes() {
            let _ = writeln!(
                out,
                "share of member {faulty} per 5 s of the window, % (first seed's run):"
            );
            for r in result
                .runs
                .iter()
                .filter(|r| r.seed == result.runs.first().map_or(0, |f| f.seed))
            {
                if let Some(over_time) = &r.share_over_time {
                    let per = (5.0 / over_time.bucket_s).max(1.0) as usize;
                    let line: Vec<String> = over_time
                        .shares
                        .chunks(per)
                        .map(|chunk| {
                            let sum: f64 = chunk.iter().filter_map(|b| b.get(faulty)).sum();
                            format!("{:>4.0}", sum / chunk.len() as f64 * 100.0)
                        })
                        .collect();
                    let _ = writeln!(
                        out,
                        "  {:<11} {:<21} {}",
                        r.load,
                        r.algorithm,
                        line.join("")
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use rpclb_lab::{Latency, Little, RunReport, Scenario, Summary};

    use super::*;

    fn run(members: usize, seed: u64, overloaded_at_s: Option<f64>) -> RunReport {
        RunReport {
            scenario: "s".into(),
            load: "open 50%".into(),
            algorithm: "least_cpu".into(),
            seed,
            calls: 10,
            ok: 10,
            errors: 0,
            timeouts: 0,
            error_rate: 0.0,
            goodput_per_s: 5.0,
            latency_ms: Some(Latency {
                p50: 1.0,
                p99: 2.0,
                p999: 3.0,
                mean: 1.0,
                max: 3.0,
            }),
            latency_quantiles_ms: vec![],
            shares: (0..members)
                .map(|m| if m == 0 { 1.0 } else { 0.0 })
                .collect(),
            share_over_time: None,
            faulty_member: None,
            shed_ms: None,
            fault_goodput_ratio: None,
            faulty_picks_per_caller: None,
            last_faulty_pick_ms: None,
            member_in_flight: Vec::new(),
            calls_moved_from_home: None,
            retries: None,
            hedges: None,
            little: Little::default(),
            simulated_calls: 10,
            overloaded_at_s,
        }
    }

    fn results(members: usize, rows: &[Vec<RunReport>]) -> ScenarioResults {
        let mut scenario = Scenario::load("uniform").unwrap();
        scenario.members = members;
        ScenarioResults {
            scenario,
            summaries: rows.iter().filter_map(|r| Summary::of(r)).collect(),
            runs: rows.concat(),
            notes: vec![],
        }
    }

    #[test]
    fn overloaded_seeds_are_marked_and_a_figure_without_a_complete_run_is_a_dash() {
        let table = table(&results(
            4,
            &[
                vec![run(4, 1, Some(2.25)), run(4, 2, None)],
                vec![run(4, 1, Some(2.25)), run(4, 2, Some(3.0))],
            ],
        ));
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("open")).collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(
            rows[0].ends_with("overloaded in 1 of 2 seeds (at 2.2 s)"),
            "{table}"
        );
        assert!(
            rows[0].contains("2.000"),
            "the complete seed's p99: {table}"
        );
        assert!(rows[1].ends_with("overloaded at 2.2 s"), "{table}");
        assert!(
            !rows[1].contains("2.000"),
            "no p99 from stopped runs: {table}"
        );
        assert!(rows[1].contains(" - "), "{table}");
    }

    #[test]
    fn share_columns_line_up_for_any_number_of_members() {
        for members in [1, 3, 4, 5, 8, 9] {
            let table = table(&results(
                members,
                &[vec![run(members, 1, None)], vec![run(members, 2, None)]],
            ));
            let lines: Vec<&str> = table
                .lines()
                .filter(|l| l.starts_with("open") || l.starts_with("load"))
                .collect();
            // The shed column ends at the same character in the header and every row.
            let shed_end = |line: &str| {
                let at = line.find(if line.starts_with("load") {
                    "shed"
                } else {
                    "  -"
                });
                at.map(|i| line[..i].chars().count())
            };
            let header = shed_end(lines[0]).map(|c| c + "shed".len());
            for line in &lines[1..] {
                let row = shed_end(line).map(|c| c + "  -".len());
                assert_eq!(row, header, "{members} members:\n{table}");
            }
        }
    }
}
