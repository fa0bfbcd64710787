//! The callers' reports of one run, merged into the lab's [`RunReport`], so that the lab's
//! table and summaries show the twin as they show a simulated run.
//!
//! The fault-window fields are the lab's, from the callers' [`FaultCounts`] (what each
//! counted on its own clock from the run's agreed start; [`super::fault_window`] says how
//! that differs from the lab's one virtual clock):
//! - `fault_goodput_ratio`: successful replies per second while the fault lasted ÷ per second
//!   in as long a span just before it (or since the run's start, when shorter), by when each
//!   reply came, warm-up included, summed over the callers; absent for a fault from the run's
//!   start (`slow-member`) or with no reply before it.
//! - `faulty_picks_per_caller`: the most calls one caller issued to the faulty member while
//!   the fault lasted (0 when none did).
//! - `last_faulty_pick_ms`: how long after the fault's start the last of those calls was
//!   issued, by any caller (µs resolution); absent when none was.
//!
//! "While the fault lasted" is [`Plan::fault_span`]: the pause, the failing member's time
//! from its fault on, the new member's slow time, a slow member's whole run. All three are
//! absent when no caller reported its counts, and for `stragglers`, which has no faulty
//! member.
//!
//! `hedges` (with `--hedge`): the callers' [`super::hedges::HedgeTally`]s summed, the extra
//! share being the hedges ÷ the window's calls, as the lab's.
//!
//! `retries` (with `--retries`): the callers' retries sent from the window's start
//! ([`super::retries`]), their share of the window's calls, and the failures their budgets let
//! through.

use rpclb_lab::{HedgeCounts, Latency, Little, RetryCounts, RunReport, ShareOverTime};

use super::caller::{CallerReport, BUCKET_MS};
use super::fault_window::{FaultCounts, FaultWindow};
use super::plan::Plan;

/// The run of `algorithm` (its `run`-th, as the seed) from the `callers`' reports; members are
/// `members[i]` (full node names, by lab index).
///
/// Not measured by the twin (zero): Little's law (`little`). `simulated_calls` is every call
/// issued, warm-up included.
pub fn run_report(
    plan: &Plan,
    algorithm: &str,
    run: u64,
    members: &[String],
    callers: &[CallerReport],
) -> RunReport {
    let mut histogram = super::caller::histogram();
    let (mut calls, mut ok, mut errors, mut timeouts) = (0, 0, 0, 0);
    let mut served = vec![0u64; members.len()];
    for caller in callers {
        calls += caller.calls;
        ok += caller.ok;
        errors += caller.errors;
        timeouts += caller.timeouts;
        for &(value, count) in &caller.latency_us {
            histogram.saturating_record_n(value.max(1), count);
        }
        for (i, member) in members.iter().enumerate() {
            served[i] += caller.served.get(member).copied().unwrap_or(0);
        }
    }
    let ms = |q: f64| histogram.value_at_quantile(q) as f64 / 1e3;
    let picked: u64 = served.iter().sum();
    let shares = served
        .iter()
        .map(|&n| {
            if picked == 0 {
                0.0
            } else {
                n as f64 / picked as f64
            }
        })
        .collect();
    let measure_s = plan.measure.as_secs_f64();
    let fault_member = plan.fault.member();
    let fault = fault_figures(FaultWindow::of(plan, members).as_ref(), callers);
    RunReport {
        scenario: plan.scenario.name.clone(),
        load: plan.load_point().label(),
        algorithm: algorithm.to_string(),
        seed: run,
        calls,
        ok,
        errors,
        timeouts,
        error_rate: if calls == 0 {
            0.0
        } else {
            errors as f64 / calls as f64
        },
        goodput_per_s: ok as f64 / measure_s,
        latency_ms: (!histogram.is_empty()).then(|| Latency {
            p50: ms(0.5),
            p99: ms(0.99),
            p999: ms(0.999),
            mean: histogram.mean() / 1e3,
            max: histogram.max() as f64 / 1e3,
        }),
        latency_quantiles_ms: if calls == 0 {
            Vec::new()
        } else {
            rpclb_lab::QUANTILES.iter().map(|&q| [q, ms(q)]).collect()
        },
        shares,
        share_over_time: plan
            .scenario
            .changes()
            .then(|| share_over_time(plan, members, callers)),
        faulty_member: fault_member,
        shed_ms: shed_ms(plan, members, callers),
        fault_goodput_ratio: fault.goodput_ratio,
        faulty_picks_per_caller: fault.picks_per_caller,
        last_faulty_pick_ms: fault.last_pick_ms,
        member_in_flight: Vec::new(),
        calls_moved_from_home: None,
        retries: retry_counts(calls, callers),
        hedges: hedge_counts(calls, callers),
        little: Little::default(),
        simulated_calls: callers.iter().map(|c| c.totals.iter().sum::<u64>()).sum(),
        overloaded_at_s: None,
    }
}

/// The lab's retry figures from the callers' that reported theirs (`--retries`): the retries
/// sent in the window, their share of the window's `calls`, and the failures the budget let
/// through; `None` when no caller reported them.
fn retry_counts(calls: u64, callers: &[CallerReport]) -> Option<RetryCounts> {
    let tallies: Vec<_> = callers.iter().filter_map(|c| c.retries).collect();
    if tallies.is_empty() {
        return None;
    }
    let retries: u64 = tallies.iter().map(|t| t.sent).sum();
    Some(RetryCounts {
        retries,
        extra_share: if calls == 0 {
            0.0
        } else {
            retries as f64 / calls as f64
        },
        refused_by_budget: tallies.iter().map(|t| t.refused_by_budget).sum(),
    })
}

/// The run's fault-window fields (the module's doc).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct FaultFigures {
    goodput_ratio: Option<f64>,
    picks_per_caller: Option<u64>,
    last_pick_ms: Option<f64>,
}

/// The fault-window fields from the counts of the `callers` that reported them; all `None`
/// without a window or without any caller's counts.
fn fault_figures(window: Option<&FaultWindow>, callers: &[CallerReport]) -> FaultFigures {
    let counts: Vec<&FaultCounts> = callers.iter().filter_map(|c| c.fault.as_ref()).collect();
    let Some(window) = window.filter(|_| !counts.is_empty()) else {
        return FaultFigures::default();
    };
    let ok_during: u64 = counts.iter().map(|c| c.ok_during).sum();
    let ok_before: u64 = counts.iter().map(|c| c.ok_before).sum();
    let before_us = window.before_us();
    let goodput_ratio = (before_us > 0 && ok_before > 0).then(|| {
        let during = ok_during as f64 / window.length_us() as f64;
        during / (ok_before as f64 / before_us as f64)
    });
    FaultFigures {
        goodput_ratio,
        picks_per_caller: counts.iter().map(|c| c.picks).max(),
        last_pick_ms: counts
            .iter()
            .filter_map(|c| c.last_pick_us)
            .max()
            .map(|us| us as f64 / 1e3),
    }
}

/// The callers' hedging figures summed, as the lab's (`None` when no caller counted any:
/// no `--hedge`).
fn hedge_counts(calls: u64, callers: &[CallerReport]) -> Option<HedgeCounts> {
    let tallies: Vec<_> = callers.iter().filter_map(|c| c.hedges).collect();
    if tallies.is_empty() {
        return None;
    }
    let hedges: u64 = tallies.iter().map(|t| t.sent).sum();
    Some(HedgeCounts {
        hedges,
        extra_share: if calls == 0 {
            0.0
        } else {
            hedges as f64 / calls as f64
        },
        won: tallies.iter().map(|t| t.won).sum(),
        refused_by_budget: tallies.iter().map(|t| t.refused_by_budget).sum(),
    })
}

/// Per member, its picks per bucket summed over the callers; and every call's per bucket.
fn picks(members: &[String], callers: &[CallerReport]) -> (Vec<Vec<u64>>, Vec<u64>) {
    let buckets = callers.iter().map(|c| c.totals.len()).max().unwrap_or(0);
    let mut per_member = vec![vec![0u64; buckets]; members.len()];
    let mut totals = vec![0u64; buckets];
    for caller in callers {
        for (b, n) in caller.totals.iter().enumerate() {
            totals[b] += n;
        }
        for (i, member) in members.iter().enumerate() {
            if let Some(counts) = caller.per_bucket.get(member) {
                for (b, n) in counts.iter().enumerate().take(buckets) {
                    per_member[i][b] += n;
                }
            }
        }
    }
    (per_member, totals)
}

/// Each member's share per second of the measured window.
fn share_over_time(plan: &Plan, members: &[String], callers: &[CallerReport]) -> ShareOverTime {
    let (per_member, totals) = picks(members, callers);
    let per_second = (1_000 / BUCKET_MS) as usize;
    let first = (plan.warmup.as_millis() as u64 / BUCKET_MS) as usize;
    let shares = (first..totals.len())
        .step_by(per_second)
        .map(|b| {
            let range = b..(b + per_second).min(totals.len());
            let total: u64 = totals[range.clone()].iter().sum();
            per_member
                .iter()
                .map(|counts| {
                    let n: u64 = counts[range.clone()].iter().sum();
                    if total == 0 {
                        0.0
                    } else {
                        n as f64 / total as f64
                    }
                })
                .collect()
        })
        .collect();
    ShareOverTime {
        bucket_s: 1.0,
        shares,
    }
}

/// The lab's shed time: from the fault's start to the end of the last 100 ms in which the
/// faulty member got at least half an even share; `None` when it still did in the fault's
/// last 100 ms. The callers count picks in 100 ms buckets of the run; only buckets wholly
/// inside the fault count (one that straddles its start or end mixes picks from before or
/// after it: a paused member picked again right after it resumed is not "never shed").
fn shed_ms(plan: &Plan, members: &[String], callers: &[CallerReport]) -> Option<f64> {
    let (per_member, totals) = picks(members, callers);
    let faulty = per_member.get(plan.fault.member()?)?;
    let (start, end) = plan.fault_span();
    let start_ms = start.as_millis() as u64;
    let first = start_ms.div_ceil(BUCKET_MS) as usize;
    let last = ((end.as_millis() as u64 / BUCKET_MS) as usize).min(totals.len());
    let present = plan.all_members() as f64;
    let fair = 1.0 / present;
    let windows: Vec<(u64, u64)> = (first..last.max(first))
        .map(|b| (totals[b], faulty[b]))
        .collect();
    if windows.iter().all(|&(total, _)| total == 0) {
        // Nothing picked while the fault lasted: nothing to shed.
        return None;
    }
    let picked = windows
        .iter()
        .rposition(|&(total, f)| total > 0 && f as f64 >= fair / 2.0 * total as f64);
    // The end of window `w`, from the fault's start.
    let end_of = |w: usize| ((first + w + 1) as u64 * BUCKET_MS - start_ms) as f64;
    match picked {
        None => Some(0.0),
        Some(w) if w + 1 == windows.len() => None,
        Some(w) => Some(end_of(w)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::Knobs;
    use super::*;

    #[test]
    fn callers_merge_into_one_run_with_shares_and_a_shed_time() {
        let plan = Plan::new(
            "failing-member",
            Knobs {
                warmup_s: 1.0,
                measure_s: 6.0,
                service_ms: 10.0,
                capacity: 8,
                callers: 2,
                load: 0.5,
                hedge: None,
            },
        )
        .unwrap();
        let members: Vec<String> = (0..4).map(|i| format!("m{i}@h")).collect();
        // 70 buckets; the fault starts at 2 s (bucket 20); m0 picked until 3 s.
        let caller = |calls: u64| {
            let mut report = CallerReport {
                calls,
                ok: calls - 1,
                errors: 1,
                timeouts: 1,
                latency_us: vec![(10_000, calls - 1), (1_000_000, 1)],
                totals: vec![4; 70],
                ..CallerReport::default()
            };
            for (i, m) in members.iter().enumerate() {
                report
                    .served
                    .insert(m.clone(), if i == 0 { 0 } else { calls / 3 });
                let counts = (0..70)
                    .map(|b| if i == 0 { u64::from(b < 30) } else { 1 })
                    .collect();
                report.per_bucket.insert(m.clone(), counts);
            }
            report
        };
        let run = run_report(&plan, "random", 1, &members, &[caller(300), caller(600)]);
        assert_eq!(
            (run.calls, run.ok, run.errors, run.timeouts),
            (900, 898, 2, 2)
        );
        assert_eq!(run.shares, vec![0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]);
        assert!(
            (run.latency_ms.unwrap().p50 - 10.0).abs() < 0.1,
            "{:?}",
            run.latency_ms
        );
        assert!((run.goodput_per_s - 898.0 / 6.0).abs() < 1e-9);
        assert_eq!(run.faulty_member, Some(0));
        assert_eq!(run.shed_ms, Some(1_000.0));
        let over_time = run.share_over_time.unwrap();
        assert_eq!(over_time.shares.len(), 6);
    }

    /// paused-member over 10 s after 2 s (the pause from 3.667 s to 8.667 s), 2 callers.
    fn paused_plan() -> Plan {
        Plan::new(
            "paused-member",
            Knobs {
                warmup_s: 2.0,
                measure_s: 10.0,
                service_ms: 10.0,
                capacity: 8,
                callers: 2,
                load: 0.5,
                hedge: None,
            },
        )
        .unwrap()
    }

    fn counted(picks: u64, last_pick_us: Option<u64>, during: u64, before: u64) -> CallerReport {
        CallerReport {
            fault: Some(FaultCounts {
                picks,
                last_pick_us,
                ok_during: during,
                ok_before: before,
            }),
            ..CallerReport::default()
        }
    }

    #[test]
    fn the_fault_window_fields_sum_the_callers_replies_and_take_the_busiest_caller() {
        let plan = paused_plan();
        let members: Vec<String> = (0..4).map(|i| format!("m{i}@h")).collect();
        // The pause lasts 5 s; the span before it is 3.667 s (since the run's start).
        // Caller 0 sent the paused member 3 calls, the last 42.5 ms after the pause began;
        // caller 1 sent it none. Replies: 900 + 1,000 during, 600 + 700 before.
        let callers = [
            counted(3, Some(42_500), 900, 600),
            counted(0, None, 1_000, 700),
        ];
        let run = run_report(&plan, "peak_ewma", 1, &members, &callers);
        let (during, before) = (1_900.0 / 5.0, 1_300.0 / 3.666_666);
        let ratio = run.fault_goodput_ratio.unwrap();
        assert!((ratio - during / before).abs() < 1e-6, "{ratio}");
        assert_eq!(run.faulty_picks_per_caller, Some(3));
        assert_eq!(run.last_faulty_pick_ms, Some(42.5));
        // And in JSON, the lab's field names.
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["faulty_picks_per_caller"], 3);
        assert_eq!(json["last_faulty_pick_ms"], 42.5);
    }

    #[test]
    fn a_fault_with_no_call_to_the_faulty_member_has_no_last_pick() {
        let window = FaultWindow::of(&paused_plan(), &["m0@h".to_string()]).unwrap();
        let figures = fault_figures(
            Some(&window),
            &[counted(0, None, 10, 10), counted(0, None, 10, 10)],
        );
        assert_eq!(figures.picks_per_caller, Some(0));
        assert_eq!(figures.last_pick_ms, None);
        assert!(figures.goodput_ratio.unwrap() > 0.0);
        // No reply before the fault: no ratio (the lab's rule).
        let figures = fault_figures(Some(&window), &[counted(0, None, 10, 0)]);
        assert_eq!(figures.goodput_ratio, None);
        assert_eq!(figures.picks_per_caller, Some(0));
    }

    #[test]
    fn without_a_fault_or_the_callers_counts_the_fields_are_absent() {
        let window = FaultWindow::of(&paused_plan(), &["m0@h".to_string()]).unwrap();
        // No fault: nothing to count against.
        let figures = fault_figures(None, &[counted(2, Some(5), 10, 10)]);
        assert_eq!(figures, FaultFigures::default());
        // Callers that were not told the fault (or counted nothing): absent, not 0.
        let figures = fault_figures(Some(&window), &[CallerReport::default()]);
        assert_eq!(figures, FaultFigures::default());
        let run = run_report(
            &paused_plan(),
            "random",
            1,
            &["m0@h".to_string()],
            &[CallerReport::default()],
        );
        let json = serde_json::to_value(&run).unwrap();
        for field in [
            "fault_goodput_ratio",
            "faulty_picks_per_caller",
            "last_faulty_pick_ms",
        ] {
            assert!(json.get(field).is_none(), "{field}: {json}");
        }
    }

    #[test]
    fn a_fault_from_the_runs_start_has_no_goodput_ratio() {
        let plan = Plan::new(
            "slow-member",
            Knobs {
                warmup_s: 1.0,
                measure_s: 6.0,
                service_ms: 10.0,
                capacity: 8,
                callers: 1,
                load: 0.5,
                hedge: None,
            },
        )
        .unwrap();
        let window = FaultWindow::of(&plan, &["m0@h".to_string()]).unwrap();
        assert_eq!((window.from_us, window.before_us()), (0, 0));
        let figures = fault_figures(Some(&window), &[counted(40, Some(6_900_000), 500, 0)]);
        assert_eq!(figures.goodput_ratio, None);
        assert_eq!(figures.picks_per_caller, Some(40));
        assert_eq!(figures.last_pick_ms, Some(6_900.0));
    }

    #[test]
    fn a_shed_time_counts_only_buckets_wholly_inside_the_fault() {
        // paused-member over 10 s after 2 s: the pause from 3.667 s to 8.667 s. m0 is picked
        // until 4 s, not while dropped, and again from the resume (bucket 86, 8.6–8.7 s,
        // straddles it): shed at 4 s (the end of bucket 39), 334 ms after the pause began —
        // not "never".
        let plan = Plan::new(
            "paused-member",
            Knobs {
                warmup_s: 2.0,
                measure_s: 10.0,
                service_ms: 10.0,
                capacity: 8,
                callers: 1,
                load: 0.5,
                hedge: None,
            },
        )
        .unwrap();
        let (start, end) = plan.fault_span();
        assert_eq!((start.as_millis(), end.as_millis()), (3_666, 8_666));
        let members: Vec<String> = (0..4).map(|i| format!("m{i}@h")).collect();
        let mut report = CallerReport {
            totals: vec![4; 120],
            ..CallerReport::default()
        };
        for (i, m) in members.iter().enumerate() {
            let counts = (0..120)
                .map(|b| {
                    if i > 0 || !(40..86).contains(&b) {
                        1
                    } else {
                        0
                    }
                })
                .collect();
            report.per_bucket.insert(m.clone(), counts);
        }
        let run = run_report(&plan, "random", 1, &members, &[report]);
        assert_eq!(run.shed_ms, Some(334.0));
    }

    #[test]
    fn the_callers_retries_sum_into_the_labs_retry_counts_and_are_absent_without() {
        use super::super::retries::RetryTally;
        let with = |sent, refused_by_budget| CallerReport {
            retries: Some(RetryTally {
                sent,
                refused_by_budget,
            }),
            ..CallerReport::default()
        };
        let counts = retry_counts(1_000, &[with(60, 1), with(40, 2)]).unwrap();
        assert_eq!((counts.retries, counts.refused_by_budget), (100, 3));
        assert!((counts.extra_share - 0.1).abs() < 1e-12);
        assert_eq!(retry_counts(0, &[with(5, 0)]).unwrap().extra_share, 0.0);
        assert_eq!(retry_counts(1_000, &[CallerReport::default()]), None);
        assert_eq!(retry_counts(1_000, &[]), None);
    }
}
