//! `rpclb lab`: the balancing lab. Runs scenarios × loads × algorithms × seeds in the
//! simulator of the `rpclb_lab` crate (the library's real selectors in virtual time) and
//! prints a table per scenario, or one JSON document.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rpc_load_balancer::algorithm::{self, BUILT_IN};
use rpc_load_balancer::routing::Subsetting;
use rpc_load_balancer::Algorithm;
use rpclb_lab::{run, subsets, LoadPoint, RunReport, RunSpec, Scenario, SubsetScheme, Summary};
use serde::Serialize;

use crate::cli::LabArgs;
use crate::CmdResult;

mod notes;
mod table;

pub use notes::unmeasured_faults;
pub use table::table;

/// One scenario's results in the `--json` document.
#[derive(Debug, Serialize)]
pub struct ScenarioResults {
    /// The scenario as run (overrides applied).
    pub scenario: Scenario,
    /// Per load and algorithm, the medians over the seeds.
    pub summaries: Vec<Summary>,
    /// Every run.
    pub runs: Vec<RunReport>,
    /// Warnings about the scenario as run (a fault the run ends before:
    /// [`unmeasured_faults`]); absent from JSON when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

struct Job {
    scenario: usize,
    load: LoadPoint,
    algorithm: usize,
    seed: u64,
}

/// Runs `rpclb lab`; the exit code (0).
///
/// Errors: an unknown scenario or an invalid scenario file (naming the field), an
/// override out of range, an algorithm whose selector cannot be built.
pub fn run_lab(args: LabArgs) -> CmdResult<i32> {
    let names: Vec<String> = if args.scenario.is_empty() {
        rpclb_lab::scenario::BUILT_IN
            .iter()
            .map(|(n, _)| n.to_string())
            .collect()
    } else {
        args.scenario.clone()
    };
    let mut scenarios = Vec::with_capacity(names.len());
    for name in &names {
        // The overrides first: a file is judged with the lengths it will run with.
        let scenario = Scenario::load_with(name, |scenario| {
            if let Some(measure) = args.measure_s {
                scenario.measure_s = measure;
            }
            if let Some(warmup) = args.warmup_s {
                scenario.warmup_s = warmup;
            }
            if let Some(subset) = args.subset {
                scenario.subset = Some(usize::try_from(subset).unwrap_or(usize::MAX));
            }
            if args.retries && scenario.retries.is_none() {
                scenario.retries = Some(rpclb_lab::scenario::Retries::default());
            }
            if scenario.hedging.is_none() {
                scenario.hedging = args.hedge;
            }
        })?;
        // One copy per scheme asked for, each checked with its scheme.
        for &scheme in &args.subset_scheme {
            let mut copy = scenario.clone();
            copy.subset_scheme = Some(scheme);
            copy.validate()?;
            scenarios.push(copy);
        }
        if args.subset_scheme.is_empty() {
            scenarios.push(scenario);
        }
    }
    if args.subset_churn {
        return subset_churn(&scenarios, &args);
    }
    // A directory the pictures cannot go to is refused before anything runs.
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create --svg directory {}: {e}", dir.display()))?;
    }
    let notes: Vec<Vec<String>> = scenarios.iter().map(unmeasured_faults).collect();
    for note in notes.iter().flatten() {
        eprintln!("warning: {note}");
    }
    let algorithm_names: Vec<String> = if args.algorithm.is_empty() {
        BUILT_IN.iter().map(|n| n.to_string()).collect()
    } else {
        args.algorithm.clone()
    };
    let algorithms: Vec<Arc<dyn Algorithm>> = algorithm_names
        .iter()
        .map(|n| algorithm::by_name(n))
        .collect::<Result<_, _>>()?;
    let (first_seed, last_seed) = args.seeds;
    let mut jobs = Vec::new();
    for (s, scenario) in scenarios.iter().enumerate() {
        for load in scenario.loads() {
            for a in 0..algorithms.len() {
                for seed in first_seed..=last_seed {
                    jobs.push(Job {
                        scenario: s,
                        load,
                        algorithm: a,
                        seed,
                    });
                }
            }
        }
    }
    let bar = crate::load::progress_bar(jobs.len() as u64, false, "lab");
    bar.set_message("runs");
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunReport, String>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let threads = usize::from(args.jobs).min(jobs.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else {
                    return;
                };
                let outcome = run(&RunSpec {
                    scenario: &scenarios[job.scenario],
                    load: job.load,
                    algorithm: &*algorithms[job.algorithm],
                    seed: job.seed,
                })
                .map_err(|e| e.to_string());
                let failed = outcome.is_err();
                if let Ok(mut results) = results.lock() {
                    results[i] = Some(outcome);
                }
                bar.inc(1);
                if failed {
                    // The others stop at their next job.
                    next.store(jobs.len(), Ordering::Relaxed);
                }
            });
        }
    });
    bar.finish_and_clear();
    let results = results.into_inner().map_err(|_| "a lab thread panicked")?;
    let mut runs: Vec<Vec<RunReport>> = scenarios.iter().map(|_| Vec::new()).collect();
    for (job, result) in jobs.iter().zip(results) {
        match result {
            Some(Ok(report)) => runs[job.scenario].push(report),
            Some(Err(e)) => return Err(e.into()),
            None => return Err("a lab run did not finish".into()),
        }
    }
    let results: Vec<ScenarioResults> = scenarios
        .into_iter()
        .zip(runs)
        .zip(notes)
        .map(|((scenario, runs), notes)| {
            let summaries = runs
                .chunk_by(|a, b| a.load == b.load && a.algorithm == b.algorithm)
                .filter_map(Summary::of)
                .collect();
            ScenarioResults {
                scenario,
                summaries,
                runs,
                notes,
            }
        })
        .collect();
    // The report first: a picture that cannot be written loses no run.
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&serde_json::json!({ "scenarios": results }))?
        );
    } else {
        for result in &results {
            print!("{}", table(result));
        }
    }
    if let Some(dir) = &args.svg {
        let written = write_pictures(dir, &results)?;
        eprintln!("lab: {written} pictures in {}", dir.display());
    }
    Ok(0)
}

/// `rpclb lab --subset-churn`: each scenario's subsets' figures (coverage and churn), as a
/// table or, with `--json`, one document `{"subsets":[..]}`; the exit code (0).
///
/// Errors: a scenario without a subset size.
fn subset_churn(scenarios: &[Scenario], args: &LabArgs) -> CmdResult<i32> {
    let mut all = Vec::new();
    let mut seen = Vec::new();
    for scenario in scenarios {
        let Some(subsetting) = scenario.subsetting() else {
            return Err(format!(
                "--subset-churn: scenario {} has no subset size (give --subset K)",
                scenario.name
            )
            .into());
        };
        let schemes: Vec<SubsetScheme> = if args.subset_scheme.is_empty() {
            SubsetScheme::ALL.to_vec()
        } else {
            vec![scenario.subset_scheme.unwrap_or_default()]
        };
        for scheme in schemes {
            let key = (scenario.name.clone(), scheme);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let subsetting = Subsetting::with(scheme.library(), subsetting.size());
            let tries = scenario.members.min(100);
            let figures = subsets::figures(&subsetting, scenario.members, scenario.callers, tries);
            all.push((scenario.name.clone(), figures));
        }
    }
    if args.json {
        let list: Vec<serde_json::Value> = all
            .iter()
            .map(|(name, f)| serde_json::json!({ "scenario": name, "figures": f }))
            .collect();
        println!(
            "{}",
            serde_json::to_string(&serde_json::json!({ "subsets": list }))?
        );
        return Ok(0);
    }
    println!(
        "| scenario | members | callers | K | scheme | subsets per member (min–max, mean) | entries changed, one leaves (mean, max; most per caller) | one joins (mean, max; most per caller) |"
    );
    println!("|---|---:|---:|---:|---|---|---|---|");
    for (name, f) in &all {
        println!(
            "| {name} | {} | {} | {} | {} | {}–{}, {:.2} | {:.1}, {}; {} | {:.1}, {}; {} |",
            f.members,
            f.callers,
            f.size,
            f.scheme,
            f.coverage_min,
            f.coverage_max,
            f.coverage_mean,
            f.leave_mean,
            f.leave_max,
            f.leave_most_per_caller,
            f.join_mean,
            f.join_max,
            f.join_most_per_caller
        );
    }
    if let Some((_, f)) = all.first() {
        println!(
            "\n(entries summed over the callers; {} members tried leaving, and joining next to)",
            f.tried
        );
    }
    Ok(0)
}

/// Writes one SVG per scenario and load into `dir` (created if missing):
/// `SCENARIO-LOAD.svg` (e.g. `slow-member-open-50pct.svg`), drawn from each algorithm's run
/// with the first seed; the number written.
///
/// Errors: the directory or a file cannot be written; a drawing error.
pub fn write_pictures(dir: &std::path::Path, results: &[ScenarioResults]) -> CmdResult<usize> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create --svg directory {}: {e}", dir.display()))?;
    let mut written = 0;
    for result in results {
        let Some(first_seed) = result.runs.first().map(|r| r.seed) else {
            continue;
        };
        let mut loads: Vec<&str> = Vec::new();
        for run in &result.runs {
            if !loads.contains(&run.load.as_str()) {
                loads.push(&run.load);
            }
        }
        for load in loads {
            let runs: Vec<&RunReport> = result
                .runs
                .iter()
                .filter(|r| r.load == load && r.seed == first_seed)
                .collect();
            let faulty = runs.first().and_then(|r| r.faulty_member);
            let title = format!("{} {load} (seed {first_seed})", result.scenario.name);
            let svg = rpclb_lab::svg::picture(&title, &runs, faulty)?;
            let slug = load.replace('%', "pct").replace(' ', "-");
            let path = dir.join(format!("{}-{slug}.svg", result.scenario.name));
            std::fs::write(&path, svg)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            written += 1;
        }
    }
    Ok(written)
}
