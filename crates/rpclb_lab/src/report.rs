//! What one run measured ([`RunReport`]), and [`holds`]: the lab's rule for a result over
//! seeds.

use serde::{Deserialize, Serialize};

/// The results of one run: one (scenario, load, algorithm, seed). Every figure is over the
/// measured window (after the warm-up): calls *issued* in it, followed to their end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The scenario's name.
    pub scenario: String,
    /// The load's label (`open 50%`, `closed 16`).
    pub load: String,
    /// The algorithm's name (`round_robin`, ...).
    pub algorithm: String,
    /// The run's seed.
    pub seed: u64,
    /// Calls issued in the measured window.
    pub calls: u64,
    /// Of those, calls that got a reply.
    pub ok: u64,
    /// Of those, calls that ended in an error: a failure reply, a timeout, or no member to
    /// pick.
    pub errors: u64,
    /// Of the errors, timeouts.
    pub timeouts: u64,
    /// `errors ÷ calls` (0 when there were no calls).
    pub error_rate: f64,
    /// Replies per simulated second of the window (of the part measured before the stop, for
    /// an overloaded run; 0 for an empty window).
    pub goodput_per_s: f64,
    /// The latency of every call (errors included: a timeout counts as the timeout); `None`
    /// (null in JSON) when no call of the window ended: the run measured nothing.
    pub latency_ms: Option<Latency>,
    /// The latency distribution: `[quantile, ms]` at each of [`QUANTILES`] (empty without
    /// calls).
    pub latency_quantiles_ms: Vec<[f64; 2]>,
    /// Each member's share of the window's calls (by member index; sums to 1 when any call
    /// picked a member).
    pub shares: Vec<f64>,
    /// For scenarios that change, and cold starts: each member's share per 1 s bucket of the
    /// window.
    pub share_over_time: Option<ShareOverTime>,
    /// The member a fault hits (the first `pause`, `slow`, `fail` or slow `join` event, else
    /// the first member with a `slow_factor`), if any.
    pub faulty_member: Option<usize>,
    /// Time from the fault's start until that member stops being picked: the end of the last
    /// 100 ms window (while the fault lasts) in which it got at least half an even share of
    /// the calls. `None`: it never stopped (still picked in the fault's last window), there
    /// is no fault, no call was picked while it lasted, or the run was overloaded.
    pub shed_ms: Option<f64>,
    /// Replies per second while the fault lasted ÷ replies per second in as long a span just
    /// before it (by when each reply came, warm-up included). `None` (absent from JSON): no
    /// fault, a fault from the run's start, no reply before it, or the run was overloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_goodput_ratio: Option<f64>,
    /// The most calls one caller sent to the faulty member while the fault lasted. `None`
    /// (absent from JSON): no fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faulty_picks_per_caller: Option<u64>,
    /// How long after the fault began any caller last sent a call to the faulty member while
    /// the fault lasted, ms (e.g. how soon a paused member stopped getting calls). `None`
    /// (absent from JSON): no fault, or no call went to it while the fault lasted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_faulty_pick_ms: Option<f64>,
    /// Each member's calls in flight as the member holds them (queued or being served, from
    /// when a request reaches it until it is served, fails, or is dropped on a cancel),
    /// averaged over the window, by member index. Empty (absent from JSON) where not
    /// measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_in_flight: Vec<f64>,
    /// Of the window's keyed calls that picked a member, the share that did not go to the
    /// key's home: its owner on a plain [`HashRing`](rpc_load_balancer::HashRing) (128
    /// points per member) over the members present. 0 for a plain ring, about `1 − 1/members`
    /// for a key-blind algorithm. `None` (absent from JSON): calls without keys, or not
    /// measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_moved_from_home: Option<f64>,
    /// Retries (scenarios with `[retries]`, issue 22); `None` (absent from JSON) without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<RetryCounts>,
    /// Hedged calls (scenarios with `[hedging]`, issue 22); `None` (absent from JSON)
    /// without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedges: Option<HedgeCounts>,
    /// Little's law over the window.
    pub little: Little,
    /// Calls simulated in the whole run (warm-up and drain included).
    pub simulated_calls: u64,
    /// When the run stopped as *overloaded*, simulated s from its start: it would have held
    /// more than [`crate::MAX_CALLS_HELD`] calls at once (calls piled up faster than the
    /// members served them). Its figures are then over the calls that ended before the stop,
    /// which leaves out the slowest (those still queued): its latencies understate the
    /// tail. `None` (absent from JSON): the run ran to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overloaded_at_s: Option<f64>,
}

/// What the retries of a run's window did: the extra calls they sent and the failures the
/// budget let through.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RetryCounts {
    /// Extra calls: retries of the window's calls (each sent to another member).
    pub retries: u64,
    /// `retries ÷ calls` (0 when there were no calls): the extra load, as a share of the
    /// calls (the budget's `ratio` bounds it, plus `min_per_second`).
    pub extra_share: f64,
    /// Failures of the retryable kind of the window's calls not retried because the caller's
    /// budget was spent.
    pub refused_by_budget: u64,
}

/// What the hedging of a run's window did: the second copies it sent, how many won, and the
/// hedges the budget refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HedgeCounts {
    /// Extra calls: second copies of the window's calls (each sent to another member).
    pub hedges: u64,
    /// `hedges ÷ calls` (0 when there were no calls): the extra load, as a share of the calls
    /// (the budget's `ratio` bounds it, plus `min_per_second`).
    pub extra_share: f64,
    /// Second copies whose reply came first (the call's reply).
    pub won: u64,
    /// Calls due a second copy that the caller's budget refused.
    pub refused_by_budget: u64,
}

impl RunReport {
    /// Whether the run ran to its end and measured at least one call: the runs the
    /// [`Summary`] medians are over.
    pub fn complete(&self) -> bool {
        self.overloaded_at_s.is_none() && self.latency_ms.is_some()
    }
}

/// The quantiles of [`RunReport::latency_quantiles_ms`]: 0 is the least latency, 1 the most.
pub const QUANTILES: &[f64] = &[
    0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 1.0,
];

/// Latency percentiles, ms (hdrhistogram, 3 significant figures).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Mean (exact).
    pub mean: f64,
    /// Largest.
    pub max: f64,
}

/// Member shares per time bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareOverTime {
    /// Bucket width, s.
    pub bucket_s: f64,
    /// Per bucket (from the window's start), each member's share of that bucket's calls.
    pub shares: Vec<Vec<f64>>,
}

/// Little's law, L = λ·W: over the measured window (a statistical check: calls in flight
/// across the window's edges make it approximate, closely so for a long window on a system
/// in steady state; a run whose queues still grow or drain at an edge deviates more), and
/// over the whole run, which starts and ends empty, where it holds exactly (it checks the
/// simulator's bookkeeping: the in-flight count, integrated over time, against the calls'
/// latencies).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Little {
    /// L: calls in flight (issued, not yet ended for their caller), averaged over the window.
    pub mean_in_flight: f64,
    /// λ: calls issued per second in the window.
    pub arrival_rate_per_s: f64,
    /// W: mean latency of those calls, s.
    pub mean_latency_s: f64,
    /// |L − λW| ÷ L over the window (0 when L is 0).
    pub relative_error: f64,
    /// |∫N dt − Σ latencies| ÷ ∫N dt over the whole run (0 up to rounding).
    pub run_relative_error: f64,
}

/// Whether `claim` holds for at least 9 of 10 runs (the lab's rule for a result over seeds
/// 1–10): for `n` runs, at least ⌈0.9·n⌉. `false` for no runs.
pub fn holds<F>(runs: &[RunReport], claim: F) -> bool
where
    F: Fn(&RunReport) -> bool,
{
    if runs.is_empty() {
        return false;
    }
    let needed = (runs.len() * 9).div_ceil(10);
    runs.iter().filter(|r| claim(r)).count() >= needed
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty
/// or any is NaN.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    Some(if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    })
}

/// The runs of one (scenario, load, algorithm) over its seeds, summarized: medians over the
/// seeds (see [`median`]) whose runs are [complete](RunReport::complete): an overloaded run
/// (counted in `overloaded`) or one that measured no call is left out of the latency, error,
/// goodput and shed medians. A figure with no complete run is NaN (null in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The scenario's name.
    pub scenario: String,
    /// The load's label.
    pub load: String,
    /// The algorithm's name.
    pub algorithm: String,
    /// How many runs (seeds).
    pub runs: usize,
    /// Median p50 latency, ms.
    pub p50_ms: f64,
    /// Median p99 latency, ms.
    pub p99_ms: f64,
    /// Median p99.9 latency, ms.
    pub p999_ms: f64,
    /// Median error rate (0–1).
    pub error_rate: f64,
    /// Median goodput, replies/s.
    pub goodput_per_s: f64,
    /// Each member's median share.
    pub shares: Vec<f64>,
    /// The faulty member, if the scenario has one.
    pub faulty_member: Option<usize>,
    /// Median time until the faulty member stopped being picked, ms, over the runs where it
    /// did; `None` when it did in fewer than half the runs.
    pub shed_ms: Option<f64>,
    /// Runs in which the faulty member was never shed.
    pub never_shed: usize,
    /// Median [`RunReport::fault_goodput_ratio`] of the complete runs that have one; absent
    /// from JSON when none has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_goodput_ratio: Option<f64>,
    /// Median [`RunReport::faulty_picks_per_caller`] of the complete runs; absent from JSON
    /// without a fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faulty_picks_per_caller: Option<f64>,
    /// Median [`RunReport::last_faulty_pick_ms`] of the complete runs that have one; absent
    /// from JSON when none has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_faulty_pick_ms: Option<f64>,
    /// Median over the complete runs of the busiest member's
    /// [`RunReport::member_in_flight`]; absent from JSON when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest_member_in_flight: Option<f64>,
    /// Median over the complete runs of the members' mean [`RunReport::member_in_flight`];
    /// absent from JSON when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_member_in_flight: Option<f64>,
    /// Median [`RunReport::calls_moved_from_home`] of the complete runs that have one; absent
    /// from JSON when none has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_moved_from_home: Option<f64>,
    /// The largest windowed Little's-law error of the complete runs.
    pub little_max_error: f64,
    /// Runs stopped as overloaded ([`RunReport::overloaded_at_s`]); absent from JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overloaded: usize,
    /// The earliest stop of those runs, simulated s; absent from JSON when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overloaded_at_s: Option<f64>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    /// Summarizes `runs` (of one scenario, load and algorithm); `None` for no runs.
    pub fn of(runs: &[RunReport]) -> Option<Summary> {
        let first = runs.first()?;
        let complete: Vec<&RunReport> = runs.iter().filter(|r| r.complete()).collect();
        let med = |f: &dyn Fn(&RunReport) -> f64| {
            median(&complete.iter().map(|r| f(r)).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let latency = |f: fn(&Latency) -> f64| {
            med(&|r: &RunReport| r.latency_ms.as_ref().map_or(f64::NAN, f))
        };
        // Shares: every run that picked (an overloaded run's picks before its stop count).
        let picked: Vec<&RunReport> = runs.iter().filter(|r| r.calls > 0).collect();
        let members = first.shares.len();
        let shares = (0..members)
            .map(|m| {
                let values: Vec<f64> = picked
                    .iter()
                    .map(|r| r.shares.get(m).copied().unwrap_or(0.0))
                    .collect();
                median(&values).unwrap_or(f64::NAN)
            })
            .collect();
        let shed: Vec<f64> = complete.iter().filter_map(|r| r.shed_ms).collect();
        let shed_ms = if first.faulty_member.is_some() && shed.len() * 2 >= complete.len() {
            median(&shed)
        } else {
            None
        };
        let overloaded: Vec<f64> = runs.iter().filter_map(|r| r.overloaded_at_s).collect();
        let ratios: Vec<f64> = complete
            .iter()
            .filter_map(|r| r.fault_goodput_ratio)
            .collect();
        let picks: Vec<f64> = complete
            .iter()
            .filter_map(|r| r.faulty_picks_per_caller.map(|p| p as f64))
            .collect();
        let last_picks: Vec<f64> = complete
            .iter()
            .filter_map(|r| r.last_faulty_pick_ms)
            .collect();
        let busiest: Vec<f64> = complete
            .iter()
            .filter(|r| !r.member_in_flight.is_empty())
            .map(|r| r.member_in_flight.iter().copied().fold(0.0, f64::max))
            .collect();
        let mean: Vec<f64> = complete
            .iter()
            .filter(|r| !r.member_in_flight.is_empty())
            .map(|r| r.member_in_flight.iter().sum::<f64>() / r.member_in_flight.len() as f64)
            .collect();
        let moved: Vec<f64> = complete
            .iter()
            .filter_map(|r| r.calls_moved_from_home)
            .collect();
        Some(Summary {
            scenario: first.scenario.clone(),
            load: first.load.clone(),
            algorithm: first.algorithm.clone(),
            runs: runs.len(),
            p50_ms: latency(|l| l.p50),
            p99_ms: latency(|l| l.p99),
            p999_ms: latency(|l| l.p999),
            error_rate: med(&|r| r.error_rate),
            goodput_per_s: med(&|r| r.goodput_per_s),
            shares,
            faulty_member: first.faulty_member,
            shed_ms,
            never_shed: if first.faulty_member.is_some() {
                complete.len() - shed.len()
            } else {
                0
            },
            fault_goodput_ratio: median(&ratios),
            faulty_picks_per_caller: median(&picks),
            last_faulty_pick_ms: median(&last_picks),
            busiest_member_in_flight: median(&busiest),
            mean_member_in_flight: median(&mean),
            calls_moved_from_home: median(&moved),
            little_max_error: complete
                .iter()
                .map(|r| r.little.relative_error)
                .fold(0.0, f64::max),
            overloaded: overloaded.len(),
            overloaded_at_s: overloaded.into_iter().reduce(f64::min),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_of_ten_hold() {
        let run = |seed| RunReport {
            scenario: "s".into(),
            load: "l".into(),
            algorithm: "a".into(),
            seed,
            calls: 0,
            ok: 0,
            errors: 0,
            timeouts: 0,
            error_rate: 0.0,
            goodput_per_s: 0.0,
            latency_ms: Some(Latency::default()),
            latency_quantiles_ms: vec![],
            shares: vec![],
            share_over_time: None,
            faulty_member: None,
            shed_ms: None,
            fault_goodput_ratio: None,
            faulty_picks_per_caller: None,
            last_faulty_pick_ms: None,
            member_in_flight: vec![],
            calls_moved_from_home: None,
            retries: None,
            hedges: None,
            little: Little::default(),
            simulated_calls: 0,
            overloaded_at_s: None,
        };
        let runs: Vec<RunReport> = (1..=10).map(run).collect();
        assert!(holds(&runs, |r| r.seed != 3));
        assert!(!holds(&runs, |r| r.seed > 2));
        assert!(!holds(&[], |_| true));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }
}
