//! The lab's model against what must hold: determinism, even shares, queueing theory and
//! Little's law. No timing assertions: everything here is in virtual time.

use rpc_load_balancer::algorithm::{self, BUILT_IN};
use rpc_load_balancer::{Random, RoundRobin};
use rpclb_lab::{holds, run, LoadPoint, RunReport, RunSpec, Scenario};

fn short(name: &str, warmup_s: f64, measure_s: f64) -> Scenario {
    let mut scenario = Scenario::load(name).unwrap();
    scenario.warmup_s = warmup_s;
    scenario.measure_s = measure_s;
    scenario
}

#[test]
fn the_same_seed_gives_the_same_report() {
    for name in ["paused-member", "hot-keys", "cold-start"] {
        let mut scenario = short(name, 1.0, 8.0);
        // The pause early, so that a short run sees it and the heartbeat's removal.
        for event in &mut scenario.event {
            event.at_s = 2.0;
        }
        for algorithm in ["least_cpu", "power_of_two", "hash_ring"] {
            let algorithm = algorithm::by_name(algorithm).unwrap();
            let spec = RunSpec {
                scenario: &scenario,
                load: scenario.loads()[0],
                algorithm: &*algorithm,
                seed: 3,
            };
            let (a, b) = (run(&spec).unwrap(), run(&spec).unwrap());
            assert_eq!(a, b, "{name} {}", algorithm.name());
            let other = run(&RunSpec { seed: 4, ..spec }).unwrap();
            assert_ne!(a, other, "another seed, other numbers");
        }
    }
}

#[test]
fn uniform_at_half_load_random_and_round_robin_shares_are_within_2_percent_of_even() {
    let scenario = short("uniform", 1.0, 10.0);
    let load = LoadPoint::Open { fraction: 0.5 };
    for algorithm in [
        &Random::new() as &dyn rpc_load_balancer::Algorithm,
        &RoundRobin::new(),
    ] {
        let runs: Vec<RunReport> = (1..=10)
            .map(|seed| {
                run(&RunSpec {
                    scenario: &scenario,
                    load,
                    algorithm,
                    seed,
                })
                .unwrap()
            })
            .collect();
        assert!(
            holds(&runs, |r| r
                .shares
                .iter()
                .all(|s| (s - 0.25).abs() <= 0.02 * 0.25)),
            "{}: {:?}",
            algorithm.name(),
            runs.iter().map(|r| &r.shares).collect::<Vec<_>>()
        );
    }
}

#[test]
fn one_exponential_member_of_capacity_1_at_half_load_has_mean_time_in_system_2_over_mu() {
    // M/M/1 at ρ = 0.5: mean time in system = 1 / (μ − λ) = 2 / μ = 2 ms for μ = 1/ms.
    let text = r#"
        name = "mm1"
        members = 1
        callers = 1
        capacity = 1
        network_delay_us = 0.0
        timeout_ms = 60000.0
        warmup_s = 10.0
        measure_s = 200.0
        service = { kind = "exponential", mean_ms = 1.0 }
        [load]
        open_loop = [0.5]
    "#;
    let scenario = Scenario::parse(text, "mm1").unwrap();
    let runs: Vec<RunReport> = (1..=10)
        .map(|seed| {
            run(&RunSpec {
                scenario: &scenario,
                load: scenario.loads()[0],
                algorithm: &Random::new(),
                seed,
            })
            .unwrap()
        })
        .collect();
    let means: Vec<f64> = runs.iter().map(|r| r.latency_ms.unwrap().mean).collect();
    assert!(
        holds(&runs, |r| (r.latency_ms.unwrap().mean - 2.0).abs()
            <= 0.02 * 2.0),
        "means {means:?} ms"
    );
    assert!(holds(&runs, |r| r.little.relative_error <= 0.02));
}

/// Whether a run is in steady state through its window, where the windowed form of Little's
/// law must hold within 2 %: a scenario without a schedule of faults, not overloaded, with an
/// algorithm that does not herd. Left out, each for a reason the lab shows: LeastCpu (callers
/// herd onto the member read as least loaded until the next poll: queues build and drain over
/// seconds), `stragglers` at 85 % (the stragglers add 19 % of work: 101 % of capacity),
/// HashRing on `hot-keys` (the hottest keys' member is overloaded), and any run with timeouts
/// (a queue grown to the timeout).
fn steady(r: &RunReport) -> bool {
    const STEADY: &[&str] = &[
        "uniform",
        "slow-member",
        "two-slow",
        "uneven-capacity",
        "stragglers",
        "hot-keys",
    ];
    STEADY.contains(&r.scenario.as_str())
        && r.algorithm != "least_cpu"
        && !(r.scenario == "stragglers" && r.load == "open 85%")
        && !(r.scenario == "hot-keys" && r.algorithm == "hash_ring")
        && r.timeouts == 0
}

#[test]
fn littles_law_holds_on_every_run() {
    // Every built-in scenario but `large` (which the smoke covers), each load, each algorithm.
    let mut failures = Vec::new();
    for (name, _) in rpclb_lab::scenario::BUILT_IN
        .iter()
        .filter(|(n, _)| *n != "large")
    {
        let scenario = short(name, 1.0, 8.0);
        for load in scenario.loads() {
            for algorithm in BUILT_IN {
                let algorithm = algorithm::by_name(algorithm).unwrap();
                let r = run(&RunSpec {
                    scenario: &scenario,
                    load,
                    algorithm: &*algorithm,
                    seed: 1,
                })
                .unwrap();
                if r.little.run_relative_error > 1e-9
                    || (steady(&r) && r.little.relative_error > 0.02)
                {
                    failures.push(format!("{name} {} {}: {:?}", r.load, r.algorithm, r.little));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn an_overloaded_run_stops_at_the_bound_and_reports_what_it_measured() {
    // One member 10x slow and Random: it gets ~3,500 calls a second and serves ~700, so it
    // holds about a timeout's worth of them (the older are cancelled): over 2,000.
    let mut scenario = short("slow-member", 0.0, 5.0);
    scenario.load.open_loop = vec![0.5];
    let spec = RunSpec {
        scenario: &scenario,
        load: scenario.loads()[0],
        algorithm: &Random::new(),
        seed: 1,
    };
    let overloaded = rpclb_lab::run_with_call_limit(&spec, 2_000).expect("a report");
    let at_s = overloaded.overloaded_at_s.expect("flagged as overloaded");
    assert!(at_s > 0.0 && at_s < 5.0, "{at_s}");
    assert!(overloaded.calls > 0 && overloaded.ok > 0, "{overloaded:?}");
    assert!(overloaded.latency_ms.is_some());
    assert_eq!(overloaded.shed_ms, None, "no shed time from a stopped run");
    // The goodput is over the part of the window measured before the stop.
    assert!(
        (overloaded.goodput_per_s - overloaded.ok as f64 / at_s).abs()
            < 1e-6 * overloaded.goodput_per_s,
        "{overloaded:?}"
    );
    let whole = rpclb_lab::run_with_call_limit(&spec, 100_000).unwrap();
    assert_eq!(whole.overloaded_at_s, None);
    // Summaries leave the overloaded run out of the medians and count it.
    let summary = rpclb_lab::Summary::of(&[overloaded.clone(), whole.clone()]).unwrap();
    assert_eq!((summary.runs, summary.overloaded), (2, 1));
    assert_eq!(summary.overloaded_at_s, Some(at_s));
    assert_eq!(summary.p99_ms, whole.latency_ms.unwrap().p99);
    let all = rpclb_lab::Summary::of(&[overloaded]).unwrap();
    assert!(all.p99_ms.is_nan() && all.error_rate.is_nan(), "{all:?}");
    let json = serde_json::to_value(&all).unwrap();
    assert!(json["p99_ms"].is_null(), "{json}");
    assert_eq!(json["overloaded"], 1);
}

#[test]
fn a_run_that_measures_no_call_is_empty_not_instant() {
    // The window ends before the first call arrives: nothing measured, and the faulty
    // member (slow from the start) is not "shed in 0 ms".
    let mut scenario = short("slow-member", 0.0, 1e-6);
    scenario.load.open_loop = vec![0.5];
    let spec = RunSpec {
        scenario: &scenario,
        load: scenario.loads()[0],
        algorithm: &Random::new(),
        seed: 1,
    };
    let report = rpclb_lab::run(&spec).unwrap();
    assert_eq!(report.calls, 0);
    assert_eq!(report.latency_ms, None);
    assert_eq!(report.shed_ms, None);
    let json = serde_json::to_value(&report).unwrap();
    assert!(
        json["latency_ms"].is_null() && json["shed_ms"].is_null(),
        "{json}"
    );
    let summary = rpclb_lab::Summary::of(&[report]).unwrap();
    assert!(summary.p99_ms.is_nan());
    assert_eq!((summary.shed_ms, summary.never_shed), (None, 0));
}

#[test]
fn an_enormous_scenario_is_refused_before_it_runs_naming_the_field() {
    let field = |text: &str| match Scenario::parse(text, "t") {
        Err(rpclb_lab::ScenarioError::Invalid { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        field("name = \"x\"\nmembers = 200\ncapacity = 1000000\n"),
        "capacity"
    );
    assert_eq!(
        field("name = \"x\"\nmembers = 1000\ncallers = 200\nmeasure_s = 60\n"),
        "load.open_loop[0]"
    );
    assert_eq!(
        field("name = \"x\"\nmembers = 1000\ncallers = 200\nmeasure_s = 3000\n[load]\nopen_loop = []\nclosed_loop_tasks = 4000\n"),
        "load.closed_loop_tasks"
    );
    assert_eq!(
        field("name = \"x\"\n[load]\nclosed_loop_tasks = 1000000\n"),
        "load.closed_loop_tasks"
    );
    assert_eq!(
        field("name = \"x\"\n[[member]]\nindex = 1\n[[member]]\nindex = 2\n[[member]]\nindex = 1\ncapacity = 2\n"),
        "member[2].index"
    );
    // A closed loop whose calls all end at a tiny timeout makes a call per task per timeout.
    assert_eq!(
        field("name = \"x\"\ntimeout_ms = 0.0002\n"),
        "load.closed_loop_tasks"
    );
    assert_eq!(
        field("name = \"x\"\ntimeout_ms = 0.2\n[load]\nopen_loop = []\nclosed_loop_tasks = 5000\n"),
        "load.closed_loop_tasks"
    );
    // 100,000 members sampling their CPU every 10 ms for 70 s.
    assert_eq!(
        field("name = \"x\"\nmembers = 100000\ncallers = 1\ncapacity = 1\ncpu_sample_interval_ms = 10\n[load]\nopen_loop = [0.001]\n"),
        "cpu_sample_interval_ms"
    );
    // Every built-in scenario, large included, is within the bounds.
    for (name, _) in rpclb_lab::scenario::BUILT_IN {
        let scenario = Scenario::load(name).unwrap();
        for load in scenario.loads() {
            assert!(
                scenario.estimated_calls(load) <= rpclb_lab::scenario::MAX_RUN_CALLS,
                "{name} {load:?}"
            );
        }
    }
}

#[test]
fn faults_happen_as_scheduled() {
    // paused-member: RoundRobin stops picking the paused member when each caller's heartbeat
    // drops it: its first ping after the pause goes unanswered for the 3 s timeout, so 3–4 s
    // after the pause (rounds every 1 s), in 100 ms windows.
    let mut paused = short("paused-member", 1.0, 8.0);
    paused.event[0].at_s = 2.0;
    paused.load.open_loop = vec![0.5];
    // failing-member from the window's start: half of a quarter of the calls fail at once.
    let mut failing = short("failing-member", 0.0, 6.0);
    failing.event[0].at_s = 0.0;
    failing.load.open_loop = vec![0.5];
    // new-member: the 5th member gets no call before it joins, then its share.
    let mut joining = short("new-member", 0.0, 6.0);
    joining.event[0].at_s = 3.0;
    joining.load.open_loop = vec![0.5];
    let round_robin = RoundRobin::new();
    let runs = |scenario: &Scenario| -> Vec<RunReport> {
        (1..=10)
            .map(|seed| {
                run(&RunSpec {
                    scenario,
                    load: scenario.loads()[0],
                    algorithm: &round_robin,
                    seed,
                })
                .unwrap()
            })
            .collect()
    };
    let paused_runs = runs(&paused);
    assert!(
        holds(&paused_runs, |r| r
            .shed_ms
            .is_some_and(|ms| (3_000.0..=4_100.0).contains(&ms))),
        "{:?}",
        paused_runs.iter().map(|r| r.shed_ms).collect::<Vec<_>>()
    );
    let failing_runs = runs(&failing);
    assert!(
        holds(&failing_runs, |r| (r.error_rate - 0.125).abs() < 0.01),
        "{:?}",
        failing_runs
            .iter()
            .map(|r| r.error_rate)
            .collect::<Vec<_>>()
    );
    // Back at once when it resumes (7 s, 6 s into the window): its share of the next second.
    assert!(
        holds(&paused_runs, |r| r.share_over_time.as_ref().unwrap().shares
            [6][0]
            > 0.2),
        "{:?}",
        paused_runs
            .iter()
            .map(|r| r.share_over_time.as_ref().unwrap().shares[6][0])
            .collect::<Vec<_>>()
    );
    // Its calls in flight when a caller's heartbeat drops it fail then, before their timeout:
    // errors that are not timeouts.
    assert!(
        holds(&paused_runs, |r| r.errors > r.timeouts + 10),
        "{:?}",
        paused_runs
            .iter()
            .map(|r| (r.errors, r.timeouts))
            .collect::<Vec<_>>()
    );
    // A pause shorter than the heartbeat timeout: the ping is answered at the resume, so the
    // member is never dropped, and its calls time out or wait (no other error).
    let mut short_pause = paused.clone();
    short_pause.event[0].for_s = Some(2.0);
    let short_runs = runs(&short_pause);
    assert!(
        holds(&short_runs, |r| r.shed_ms.is_none()
            && r.errors == r.timeouts),
        "{:?}",
        short_runs
            .iter()
            .map(|r| (r.shed_ms, r.errors, r.timeouts))
            .collect::<Vec<_>>()
    );
    let joining_runs = runs(&joining);
    assert!(holds(&joining_runs, |r| {
        let buckets = &r.share_over_time.as_ref().unwrap().shares;
        buckets[..3].iter().all(|b| b[4] == 0.0) && buckets[3..].iter().all(|b| b[4] > 0.1)
    }));
}

#[test]
fn a_timed_out_call_is_cancelled_and_leaves_its_member() {
    // One member of capacity 1 (exponential, mean 1 ms) offered twice what it serves, calls
    // timing out after 50 ms: each timed-out call's cancel takes it out of the queue, so the
    // member keeps serving calls young enough to answer in time, near its full rate. (Were
    // timed-out calls served anyway, the queue would grow for good and, past its first
    // 50 ms, every call would time out.)
    let text = "name = \"overload\"\nmembers = 1\ncallers = 1\ncapacity = 1\n\
                timeout_ms = 50\nwarmup_s = 1\nmeasure_s = 5\n\
                [service]\nkind = \"exponential\"\nmean_ms = 1.0\n\
                [load]\nopen_loop = [2.0]\n";
    let scenario = Scenario::parse(text, "t").unwrap();
    let runs: Vec<RunReport> = (1..=10)
        .map(|seed| {
            run(&RunSpec {
                scenario: &scenario,
                load: scenario.loads()[0],
                algorithm: &Random::new(),
                seed,
            })
            .unwrap()
        })
        .collect();
    assert!(
        holds(&runs, |r| r.goodput_per_s > 800.0
            && (0.4..0.6).contains(&r.error_rate)),
        "{:?}",
        runs.iter()
            .map(|r| (r.goodput_per_s, r.error_rate))
            .collect::<Vec<_>>()
    );
}

#[test]
fn pauses_of_one_member_make_one_pause_and_call_direct_has_no_session() {
    let round_robin = RoundRobin::new();
    let run = |scenario: &Scenario, algorithm: &dyn rpc_load_balancer::Algorithm| {
        (1..=10)
            .map(|seed| {
                run(&RunSpec {
                    scenario,
                    load: scenario.loads()[0],
                    algorithm,
                    seed,
                })
                .unwrap()
            })
            .collect::<Vec<_>>()
    };
    let with_events = |events: &str| {
        let text = format!(
            "name = \"pauses\"\nwarmup_s = 1\nmeasure_s = 10\n[load]\nopen_loop = [0.5]\n{events}"
        );
        Scenario::parse(&text, "t").unwrap()
    };
    let pause = |at: f64, length: f64| {
        format!("[[event]]\nat_s = {at}\nmember = 0\naction = \"pause\"\nfor_s = {length}\n")
    };
    // Overlapping pauses, 2–6 s and 4–8 s: paused until 8 s, whichever the file gives first.
    let overlapping = run(
        &with_events(&(pause(2.0, 4.0) + &pause(4.0, 4.0))),
        &round_robin,
    );
    let reversed = run(
        &with_events(&(pause(4.0, 4.0) + &pause(2.0, 4.0))),
        &round_robin,
    );
    // (The shed time is measured over the first pause event's span, so it differs.)
    let outcome = |runs: &[RunReport]| {
        runs.iter()
            .map(|r| {
                (
                    r.calls,
                    r.ok,
                    r.errors,
                    r.timeouts,
                    r.latency_ms,
                    r.share_over_time.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(outcome(&overlapping), outcome(&reversed));
    let share =
        |r: &RunReport, second: usize| r.share_over_time.as_ref().unwrap().shares[second][0];
    // Window second 5 is 6–7 s: still paused (and dropped); second 7 (8–9 s): back.
    assert!(
        holds(&overlapping, |r| share(r, 5) < 0.01 && share(r, 7) > 0.2),
        "{:?}",
        overlapping
            .iter()
            .map(|r| (share(r, 5), share(r, 7)))
            .collect::<Vec<_>>()
    );
    // Back to back, 2–4 s and 4–6 s: one 4 s pause, so the heartbeat drops the member (calls
    // in flight to it fail at the drop), as a single 4 s pause does.
    let back_to_back = run(
        &with_events(&(pause(2.0, 2.0) + &pause(4.0, 2.0))),
        &round_robin,
    );
    let single = run(&with_events(&pause(2.0, 4.0)), &round_robin);
    assert_eq!(outcome(&back_to_back), outcome(&single));
    assert!(holds(&single, |r| r.errors > r.timeouts + 10));
    // CallDirect's calls run on the caller's own member: no session for a heartbeat to stop,
    // so its calls to the paused member time out (no other error).
    let call_direct = rpc_load_balancer::algorithm::by_name("call_direct").unwrap();
    let direct = run(&with_events(&pause(2.0, 5.0)), &*call_direct);
    assert!(
        holds(&direct, |r| r.timeouts > 0 && r.errors == r.timeouts),
        "{:?}",
        direct
            .iter()
            .map(|r| (r.errors, r.timeouts))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_pause_costs_random_goodput_and_calls_but_not_a_balancer_that_sheds_it() {
    // paused-member: member 0 answers nothing for 5 s from 20 s; here from 6 s, 12 s measured.
    let mut scenario = short("paused-member", 4.0, 12.0);
    for event in &mut scenario.event {
        event.at_s = 6.0;
    }
    let load = LoadPoint::Open { fraction: 0.5 };
    let report = |name: &str| {
        let algorithm = algorithm::by_name(name).unwrap();
        run(&RunSpec {
            scenario: &scenario,
            load,
            algorithm: &*algorithm,
            seed: 1,
        })
        .unwrap()
    };
    let (random, peak) = (report("random"), report("peak_ewma"));
    let ratio = |r: &RunReport| r.fault_goodput_ratio.expect("a fault after the start");
    let picks = |r: &RunReport| r.faulty_picks_per_caller.expect("a fault");
    // Random keeps sending a quarter of the calls into the pause until the heartbeat drops
    // the member (3–4 s of the 5 s): those replies are missing.
    assert!(ratio(&random) < 0.9, "random {}", ratio(&random));
    assert!(ratio(&peak) > 0.97, "peak_ewma {}", ratio(&peak));
    assert!(
        picks(&peak) * 20 < picks(&random),
        "picks of the paused member by one caller: peak_ewma {} random {}",
        picks(&peak),
        picks(&random)
    );
    // Without a fault there is nothing to report.
    let uniform = short("uniform", 1.0, 2.0);
    let plain = run(&RunSpec {
        scenario: &uniform,
        load,
        algorithm: &Random::new(),
        seed: 1,
    })
    .unwrap();
    assert_eq!(
        (plain.fault_goodput_ratio, plain.faulty_picks_per_caller),
        (None, None)
    );
}

#[test]
fn retries_under_a_budget_turn_a_failing_members_failures_into_extra_calls_within_it() {
    // failing-member from its fault on (1 of 4 fails half its calls), short, at 50 %.
    let mut scenario = short("failing-member", 1.0, 5.0);
    for event in &mut scenario.event {
        event.at_s = 1.0;
    }
    let algorithm = Random::new();
    let spec = RunSpec {
        scenario: &scenario,
        load: scenario.loads()[0],
        algorithm: &algorithm,
        seed: 1,
    };
    let without = run(&spec).unwrap();
    assert!(without.retries.is_none(), "no [retries]: nothing counted");
    assert!(without.errors > 1_000, "{}", without.errors);

    let mut retrying = scenario.clone();
    retrying.retries = Some(rpclb_lab::scenario::Retries::default());
    let with = run(&RunSpec {
        scenario: &retrying,
        ..spec
    })
    .unwrap();
    let counts = with.retries.expect("counted");
    assert_eq!(with.calls, without.calls, "the same traffic");
    assert!(
        with.errors * 10 <= without.errors,
        "{} vs {}",
        with.errors,
        without.errors
    );
    // A quarter of the calls meet the failing member, half of those fail: about 1/8 retried.
    assert!(
        counts.retries > 0 && counts.extra_share <= 0.2,
        "{counts:?}"
    );
    assert!((counts.extra_share - 0.125).abs() < 0.03, "{counts:?}");
    assert_eq!(with.ok + with.errors, with.calls);

    // A budget without share or reserve retries nothing, and counts every refusal.
    let mut spent = scenario.clone();
    spent.retries = Some(rpclb_lab::scenario::Retries {
        ratio: 0.0,
        min_per_second: 0,
        ..Default::default()
    });
    let none = run(&RunSpec {
        scenario: &spent,
        ..spec
    })
    .unwrap();
    let counts = none.retries.expect("counted");
    assert_eq!(counts.retries, 0);
    // (The refused retries' picks draw from the selector's random numbers: other picks.)
    assert!(none.errors.abs_diff(without.errors) * 20 < without.errors);
    assert_eq!(
        counts.refused_by_budget, none.errors,
        "every failure, refused"
    );

    // Failures that are error replies of the function are not retried.
    let mut replies = scenario.clone();
    replies.retries = Some(rpclb_lab::scenario::Retries {
        fail_retryable: false,
        ..Default::default()
    });
    let replied = run(&RunSpec {
        scenario: &replies,
        ..spec
    })
    .unwrap();
    assert_eq!(replied.errors, without.errors);
    assert_eq!(replied.retries.map(|r| r.retries), Some(0));

    // Out-of-range budgets are refused naming the field.
    let mut bad = scenario;
    bad.retries = Some(rpclb_lab::scenario::Retries {
        window_s: 0,
        ..Default::default()
    });
    match bad.validate() {
        Err(rpclb_lab::ScenarioError::Invalid { field, .. }) => {
            assert_eq!(field, "retries.window_s")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn hedging_cuts_the_stragglers_tail_within_its_budget() {
    // stragglers (1 % of calls take 20x), short, at 50 %.
    let scenario = short("stragglers", 2.0, 8.0);
    let algorithm = Random::new();
    let spec = RunSpec {
        scenario: &scenario,
        load: scenario.loads()[0],
        algorithm: &algorithm,
        seed: 1,
    };
    let without = run(&spec).unwrap();
    assert!(without.hedges.is_none(), "no [hedging]: nothing counted");

    let mut hedged = scenario.clone();
    hedged.hedging = Some(rpclb_lab::scenario::Hedging::parse("p95,0.05,1").unwrap());
    let with = run(&RunSpec {
        scenario: &hedged,
        ..spec
    })
    .unwrap();
    let counts = with.hedges.expect("counted");
    assert_eq!(with.calls, without.calls, "the same traffic");
    assert_eq!(with.ok, with.calls, "every call answered once");
    assert!(counts.hedges > 0 && counts.won > 0, "{counts:?}");
    assert!(counts.won <= counts.hedges, "{counts:?}");
    // Within the budget: 5 % of the calls plus 1/s per caller.
    let floor = 4.0 * 10.0 / with.calls as f64;
    assert!(counts.extra_share <= 0.05 + floor, "{counts:?}");
    let p999 = |r: &RunReport| r.latency_ms.as_ref().expect("measured").p999;
    assert!(
        p999(&with) * 3.0 <= p999(&without),
        "{} vs {}",
        p999(&with),
        p999(&without)
    );

    // A budget without share or floor sends no second copy, and counts the refusals; the
    // run is then the run without hedging.
    let mut spent = hedged.clone();
    spent.hedging = Some(rpclb_lab::scenario::Hedging::parse("p95,0,0").unwrap());
    let none = run(&RunSpec {
        scenario: &spent,
        ..spec
    })
    .unwrap();
    let counts = none.hedges.expect("counted");
    assert_eq!((counts.hedges, counts.won), (0, 0));
    assert!(counts.refused_by_budget > 0, "{counts:?}");

    // Invalid options are refused naming the field.
    let mut bad = scenario;
    bad.hedging = Some(rpclb_lab::scenario::Hedging::parse("p95,1.5,1").unwrap());
    match bad.validate() {
        Err(rpclb_lab::ScenarioError::Invalid { field, .. }) => assert_eq!(field, "hedging.ratio"),
        other => panic!("{other:?}"),
    }
}
