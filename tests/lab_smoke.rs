//! `rpclb lab` end to end, short: every built-in scenario and algorithm for a few simulated
//! seconds (CI's lab smoke), the table and the `--json` document, and the errors of bad input.

use std::process::Command;

fn lab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rpclb"))
        .arg("lab")
        .args(args)
        .output()
        .expect("rpclb runs")
}

#[test]
fn every_scenario_and_algorithm_runs_and_the_json_holds_littles_law() {
    let mut args = vec![
        "--seeds",
        "1",
        "--warmup-s",
        "0.5",
        "--measure-s",
        "1",
        "--json",
    ];
    for (name, _) in rpclb_lab::scenario::BUILT_IN {
        if *name != "large" {
            args.extend(["--scenario", name]);
        }
    }
    let out = lab(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let scenarios = doc["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), rpclb_lab::scenario::BUILT_IN.len() - 1);
    // 3 loads × every algorithm × 1 seed.
    let expected = 3 * rpc_load_balancer::algorithm::BUILT_IN.len();
    for scenario in scenarios {
        let runs = scenario["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), expected, "{}", scenario["scenario"]["name"]);
        for run in runs {
            assert!(run["calls"].as_u64().unwrap() > 0, "{run}");
            let exact = run["little"]["run_relative_error"].as_f64().unwrap();
            assert!(exact <= 1e-9, "Little's law over the run: {run}");
            let shares: f64 = run["shares"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_f64().unwrap())
                .sum();
            assert!((shares - 1.0).abs() < 1e-9, "{run}");
        }
        assert_eq!(scenario["summaries"].as_array().unwrap().len(), expected);
    }
}

#[test]
fn large_runs_briefly_and_the_table_names_every_algorithm() {
    let out = lab(&[
        "--scenario",
        "large",
        "--seeds",
        "1",
        "--warmup-s",
        "0.01",
        "--measure-s",
        "0.02",
        "--algorithm",
        "power_of_two",
        "--algorithm",
        "least_connections",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("large — 1,000 equal members"), "{table}");
    for row in ["open 50%", "open 85%", "closed 4000"] {
        for algorithm in ["power_of_two", "least_connections"] {
            assert!(
                table
                    .lines()
                    .any(|l| l.starts_with(row) && l.contains(algorithm)),
                "{row} {algorithm}: {table}"
            );
        }
    }
}

#[test]
fn the_same_seed_prints_the_same_document() {
    let args = [
        "--scenario",
        "failing-member",
        "--seeds",
        "2..3",
        "--warmup-s",
        "18",
        "--measure-s",
        "4",
        "--algorithm",
        "least_connections",
        "--algorithm",
        "random",
        "--json",
        "--jobs",
        "2",
    ];
    let (a, b) = (lab(&args), lab(&args));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn bad_input_is_refused_with_the_field_named() {
    let dir = std::env::temp_dir().join(format!("rpclb-lab-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "name = \"bad\"\n[[member]]\nindex = 7\n").unwrap();
    let out = lab(&["--scenario", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("member[0].index"), "{stderr}");
    let out = lab(&["--scenario", "nonesuch"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario"));
    let out = lab(&["--seeds", "5..2"]);
    assert!(!out.status.success());
    let out = lab(&["--scenario", "uniform", "--measure-s=-1"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("measure_s"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn svg_writes_a_picture_per_scenario_and_load() {
    let dir = std::env::temp_dir().join(format!("rpclb-lab-svg-{}", std::process::id()));
    let out = lab(&[
        "--scenario",
        "oscillating",
        "--seeds",
        "1",
        "--warmup-s",
        "1",
        "--measure-s",
        "6",
        "--algorithm",
        "random",
        "--algorithm",
        "power_of_two",
        "--svg",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for load in ["open-50pct", "open-85pct", "closed-16"] {
        let svg = std::fs::read_to_string(dir.join(format!("oscillating-{load}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{load}");
        assert!(svg.contains("power_of_two") && svg.contains("share of the calls"));
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_short_run_warns_that_it_measures_no_fault_and_an_empty_run_is_null() {
    let out = lab(&[
        "--scenario",
        "paused-member",
        "--seeds",
        "1",
        "--warmup-s",
        "0",
        "--measure-s",
        "0.000001",
        "--algorithm",
        "random",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: scenario paused-member: event[0]") && stderr.contains("20 s"),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenario = &doc["scenarios"][0];
    assert!(
        scenario["notes"][0]
            .as_str()
            .unwrap()
            .contains("measures no fault"),
        "{scenario}"
    );
    for run in scenario["runs"].as_array().unwrap() {
        assert_eq!(run["calls"], 0, "{run}");
        assert!(run["latency_ms"].is_null(), "{run}");
        assert!(run["shed_ms"].is_null(), "{run}");
    }
    // A fault over before the measured window starts is not measured either: no fault figures
    // taken from the warm-up.
    let out = lab(&[
        "--scenario",
        "paused-member",
        "--seeds",
        "1",
        "--warmup-s",
        "25",
        "--measure-s",
        "0.5",
        "--algorithm",
        "round_robin",
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let scenario = &doc["scenarios"][0];
    assert!(
        scenario["notes"][0]
            .as_str()
            .unwrap()
            .contains("before the measured window starts"),
        "{scenario}"
    );
    for run in scenario["runs"].as_array().unwrap() {
        for field in [
            "faulty_member",
            "shed_ms",
            "fault_goodput_ratio",
            "faulty_picks_per_caller",
            "last_faulty_pick_ms",
        ] {
            assert!(run.get(field).is_none_or(|v| v.is_null()), "{field}: {run}");
        }
    }
    // The full-length document has no notes field at all (the baseline's shape).
    let out = lab(&[
        "--scenario",
        "uniform",
        "--seeds",
        "1",
        "--warmup-s",
        "0",
        "--measure-s",
        "0.01",
        "--algorithm",
        "random",
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["scenarios"][0].get("notes").is_none(), "{doc}");
    assert!(doc["scenarios"][0]["runs"][0]
        .get("overloaded_at_s")
        .is_none());
}

#[test]
fn a_missing_file_an_enormous_scenario_and_a_negative_length_are_refused_plainly() {
    let out = lab(&["--scenario", "./nope.toml"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot read scenario file ./nope.toml")
            && stderr.contains("No such file")
            && !stderr.contains("unknown scenario"),
        "{stderr}"
    );
    // Refused at once, naming the field, before anything runs.
    let dir = std::env::temp_dir().join(format!("rpclb-lab-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("big.toml");
    std::fs::write(
        &file,
        "name = \"big\"\nmembers = 200\ncallers = 10000\ncapacity = 1000000\n",
    )
    .unwrap();
    let out = lab(&["--scenario", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("capacity"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = lab(&["--scenario", "large", "--measure-s", "60", "--seeds", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("load.open_loop[0]"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
    // A negative length with a space is the documented range error (exit 1), as with `=`.
    for args in [
        &["--scenario", "uniform", "--measure-s", "-1"][..],
        &["--scenario", "uniform", "--measure-s=-1"][..],
        &["--scenario", "uniform", "--warmup-s", "-1"][..],
    ] {
        let out = lab(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("measure_s") || stderr.contains("warmup_s"),
            "{stderr}"
        );
    }
}

#[test]
fn a_file_is_judged_with_the_command_lines_lengths_and_a_bad_svg_dir_stops_before_any_run() {
    let dir = std::env::temp_dir().join(format!("rpclb-lab-override-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // measure_s = 0 in the file is invalid, but --measure-s replaces it.
    let file = dir.join("zero.toml");
    std::fs::write(&file, "name = \"zero\"\nmeasure_s = 0\n").unwrap();
    let path = file.to_str().unwrap();
    let common = ["--seeds", "1", "--algorithm", "random"];
    let out = lab(&[
        &["--scenario", path, "--measure-s", "0.5", "--warmup-s", "0"][..],
        &common[..],
    ]
    .concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the flag the file's own 0 is refused, naming the field.
    let out = lab(&[&["--scenario", path][..], &common[..]].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("measure_s"));
    // A --svg path that cannot be a directory: refused before the runs (no report at all).
    let blocker = dir.join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let svg = blocker.join("svg");
    let out = lab(&[
        &[
            "--scenario",
            "uniform",
            "--measure-s",
            "0.5",
            "--warmup-s",
            "0",
            "--svg",
            svg.to_str().unwrap(),
        ][..],
        &common[..],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing ran");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--svg"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn algorithm_suffixes_combine_and_an_unknown_one_is_a_usage_error() {
    let out = lab(&[
        "--scenario",
        "new-member",
        "--seeds",
        "1",
        "--warmup-s",
        "0",
        "--measure-s",
        "0.2",
        "--algorithm",
        "round_robin+slow_start+ejection",
        "--algorithm",
        "peak_ewma+slow_start",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: std::collections::BTreeSet<&str> = doc["scenarios"][0]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["algorithm"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["peak_ewma+slow_start", "round_robin+slow_start+ejection"]
    );
    let out = lab(&["--algorithm", "round_robin+fast_start"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("+slow_start"));
    // Combinations the library refuses are usage errors too, naming the flag and the option.
    for (name, option) in [
        ("call_direct+slow_start", "slow_start"),
        ("hash_ring+slow_start", "slow_start"),
        ("round_robin+ejection+ejection", "algorithm"),
    ] {
        let out = lab(&["--algorithm", name]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains("--algorithm") && stderr.contains(option),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn subset_flags_run_once_per_scheme_and_subset_churn_runs_nothing() {
    let out = lab(&[
        "--scenario",
        "uniform",
        "--subset",
        "2",
        "--subset-scheme",
        "aperture,rendezvous",
        "--algorithm",
        "round_robin",
        "--seeds",
        "1",
        "--warmup-s",
        "0.2",
        "--measure-s",
        "0.5",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    let schemes: Vec<(&str, u64)> = doc["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["scenario"]["subset_scheme"].as_str().unwrap(),
                s["scenario"]["subset"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(schemes, [("aperture", 2), ("rendezvous", 2)]);
    // The table names the subset; without --subset the scenario has no subset field.
    let out = lab(&[
        "--scenario",
        "uniform",
        "--subset",
        "3",
        "--algorithm",
        "round_robin",
        "--seeds",
        "1",
        "--warmup-s",
        "0.2",
        "--measure-s",
        "0.5",
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("each balancing over a subset of 3 (aperture)"),
        "{table}"
    );
    let out = lab(&[
        "--scenario",
        "uniform",
        "--algorithm",
        "round_robin",
        "--seeds",
        "1",
        "--warmup-s",
        "0.2",
        "--measure-s",
        "0.5",
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        doc["scenarios"][0]["scenario"].get("subset").is_none(),
        "{doc}"
    );
    // --subset-churn: every scheme's figures, no run.
    let out = lab(&[
        "--scenario",
        "large",
        "--subset",
        "20",
        "--subset-churn",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let figures = doc["subsets"].as_array().unwrap();
    assert_eq!(figures.len(), 3);
    assert_eq!(figures[0]["figures"]["scheme"], "aperture");
    assert_eq!(figures[0]["figures"]["coverage_min"], 4);
    assert_eq!(figures[0]["figures"]["coverage_max"], 4);
    // A scheme without a size, a size of 0, an unknown scheme, HashRing over subsets.
    for (args, says) in [
        (
            &[
                "--scenario",
                "uniform",
                "--subset-scheme",
                "rounds",
                "--seeds",
                "1",
            ][..],
            "subset_scheme",
        ),
        (&["--scenario", "uniform", "--subset", "0"][..], "--subset"),
        (
            &[
                "--scenario",
                "uniform",
                "--subset",
                "2",
                "--subset-scheme",
                "ring",
            ][..],
            "unknown subset scheme",
        ),
        (
            &["--scenario", "uniform", "--subset-churn"][..],
            "no subset size",
        ),
        (
            &[
                "--scenario",
                "uniform",
                "--subset",
                "2",
                "--algorithm",
                "hash_ring",
                "--seeds",
                "1",
                "--measure-s",
                "0.2",
            ][..],
            "subsetting",
        ),
    ] {
        let out = lab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
}
