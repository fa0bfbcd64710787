//! Deterministic subsetting in the lab (a scenario's `subset`, `subset_scheme`): runs stay
//! deterministic, callers call only their subsets, a subset of every member is the run
//! without one, and the schemes' evenness. No timing assertions: virtual time only.

use rpc_load_balancer::algorithm;
use rpc_load_balancer::routing::Subsetting;
use rpc_load_balancer::{PowerOfTwo, RoundRobin};
use rpclb_lab::{run, LoadPoint, RunError, RunReport, RunSpec, Scenario, SubsetScheme};

fn short(name: &str, warmup_s: f64, measure_s: f64) -> Scenario {
    let mut scenario = Scenario::load(name).unwrap();
    scenario.warmup_s = warmup_s;
    scenario.measure_s = measure_s;
    scenario
}

/// `uniform` with `members` members and `callers` callers, each caller over a subset of
/// `k` with `scheme`.
fn cluster(members: usize, callers: usize, k: usize, scheme: SubsetScheme) -> Scenario {
    let mut scenario = short("uniform", 0.2, 0.5);
    scenario.members = members;
    scenario.callers = callers;
    scenario.subset = Some(k);
    scenario.subset_scheme = Some(scheme);
    scenario.load.closed_loop_tasks = Some(callers * 10);
    scenario.validate().unwrap();
    scenario
}

fn lab_names(members: usize) -> Vec<String> {
    (0..members).map(|i| format!("m{i:05}@lab")).collect()
}

#[test]
fn the_same_seed_gives_the_same_report_with_subsets() {
    for scheme in SubsetScheme::ALL {
        // new-member: a member joins during the run, so the subsets change.
        let mut scenario = short("new-member", 1.0, 3.0);
        scenario.event[0].at_s = 1.5;
        scenario.subset = Some(2);
        scenario.subset_scheme = Some(scheme);
        for name in ["power_of_two", "least_cpu", "round_robin+slow_start"] {
            let algorithm = algorithm::by_name(name).unwrap();
            let spec = RunSpec {
                scenario: &scenario,
                load: scenario.loads()[0],
                algorithm: &*algorithm,
                seed: 3,
            };
            let (a, b) = (run(&spec).unwrap(), run(&spec).unwrap());
            assert_eq!(a, b, "{scheme:?} {name}");
            assert!(a.calls > 0, "{scheme:?} {name}");
            let other = run(&RunSpec { seed: 4, ..spec }).unwrap();
            assert_ne!(a, other, "another seed, other numbers");
        }
    }
}

#[test]
fn callers_call_only_the_members_of_their_subsets() {
    let members = lab_names(30);
    for scheme in SubsetScheme::ALL {
        for callers in [1, 3] {
            let scenario = cluster(30, callers, 4, scheme);
            let subsetting = Subsetting::with(scheme.library(), 4);
            let mut dialled = [false; 30];
            for c in 0..callers {
                for j in subsetting.subset(&members, c, callers) {
                    dialled[j] = true;
                }
            }
            for load in scenario.loads() {
                let report = run(&RunSpec {
                    scenario: &scenario,
                    load,
                    algorithm: &PowerOfTwo::new(),
                    seed: 1,
                })
                .unwrap();
                for (j, share) in report.shares.iter().enumerate() {
                    assert_eq!(
                        *share > 0.0,
                        dialled[j],
                        "{scheme:?} {callers} callers {}: member {j} share {share}",
                        report.load
                    );
                }
            }
        }
    }
}

#[test]
fn a_subset_of_every_member_is_the_run_without_subsets() {
    for name in ["paused-member", "new-member", "cold-start"] {
        let mut scenario = short(name, 1.0, 4.0);
        for event in &mut scenario.event {
            event.at_s = 2.0;
        }
        let mut all = scenario.clone();
        all.subset = Some(scenario.members);
        all.subset_scheme = Some(SubsetScheme::Rendezvous);
        for algorithm in ["least_cpu", "peak_ewma", "round_robin"] {
            let algorithm = algorithm::by_name(algorithm).unwrap();
            let spec = RunSpec {
                scenario: &scenario,
                load: scenario.loads()[1],
                algorithm: &*algorithm,
                seed: 2,
            };
            let without = run(&spec).unwrap();
            let with = run(&RunSpec {
                scenario: &all,
                ..spec
            })
            .unwrap();
            assert_eq!(without, with, "{name} {}", algorithm.name());
        }
    }
}

#[test]
fn hash_ring_and_call_direct_are_refused_with_subsets() {
    let scenario = cluster(10, 2, 3, SubsetScheme::Aperture);
    for name in ["hash_ring", "hash_ring_bounded", "call_direct"] {
        let algorithm = algorithm::by_name(name).unwrap();
        let result = run(&RunSpec {
            scenario: &scenario,
            load: LoadPoint::Open { fraction: 0.5 },
            algorithm: &*algorithm,
            seed: 1,
        });
        assert!(
            matches!(
                result,
                Err(RunError::Algorithm {
                    source: rpc_load_balancer::Error::InvalidConfig {
                        option: "subsetting",
                        ..
                    },
                    ..
                })
            ),
            "{name}: {result:?}"
        );
    }
}

#[test]
fn a_subset_of_zero_or_a_scheme_without_a_size_is_refused_naming_the_field() {
    let mut scenario = short("uniform", 0.1, 0.1);
    scenario.subset = Some(0);
    let error = scenario.validate().unwrap_err().to_string();
    assert!(error.contains("subset must be at least 1"), "{error}");
    scenario.subset = None;
    scenario.subset_scheme = Some(SubsetScheme::Rounds);
    let error = scenario.validate().unwrap_err().to_string();
    assert!(error.contains("subset_scheme"), "{error}");
    let parsed = Scenario::parse(
        "name = \"x\"\nsubset = 3\nsubset_scheme = \"rendezvous\"\n",
        "test",
    )
    .unwrap();
    assert_eq!(parsed.subset, Some(3));
    assert_eq!(parsed.subset_scheme, Some(SubsetScheme::Rendezvous));
    assert!(Scenario::parse(
        "name = \"x\"\nsubset = 3\nsubset_scheme = \"ring\"\n",
        "test"
    )
    .is_err());
}

/// The least and the most share ÷ the mean share.
fn spread(report: &RunReport) -> (f64, f64) {
    let mean = 1.0 / report.shares.len() as f64;
    let (lo, hi) = report
        .shares
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    (lo / mean, hi / mean)
}

#[test]
fn aperture_and_rounds_spread_evenly_where_rendezvous_does_not() {
    // 100 members, 20 callers, K = 10: every member in exactly 2 subsets (aperture, rounds).
    for scheme in SubsetScheme::ALL {
        let scenario = cluster(100, 20, 10, scheme);
        for load in scenario.loads() {
            let report = run(&RunSpec {
                scenario: &scenario,
                load,
                algorithm: &RoundRobin::new(),
                seed: 1,
            })
            .unwrap();
            let (lo, hi) = spread(&report);
            let even = lo >= 0.9 && hi <= 1.1;
            assert_eq!(
                even,
                scheme != SubsetScheme::Rendezvous,
                "{scheme:?} {}: {lo:.3}–{hi:.3} of even",
                report.load
            );
        }
    }
}
