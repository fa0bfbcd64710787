//! Deterministic subsetting's figures without a run: how many subsets hold each member (the
//! load's evenness, as far as the subsets decide it), and how many subset entries change
//! when one member leaves or joins (the churn). Pure computation over the library's
//! [`Subsetting`], with the lab's member names; `rpclb lab --subset-churn` prints them.

use rpc_load_balancer::routing::Subsetting;
use serde::Serialize;

/// One scheme's figures for a cluster of `members` members and `callers` callers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SubsetFigures {
    /// The scheme's name.
    pub scheme: String,
    /// The subset size `K`.
    pub size: usize,
    /// Members and callers.
    pub members: usize,
    /// Callers.
    pub callers: usize,
    /// Subsets holding each member: the fewest, the most, and the mean (K·callers ÷
    /// members when K ≤ members).
    pub coverage_min: usize,
    /// See `coverage_min`.
    pub coverage_max: usize,
    /// See `coverage_min`.
    pub coverage_mean: f64,
    /// When one member leaves: subset entries changed, summed over the callers (members that
    /// left a caller's subset; as many came in), the mean over the members tried and the
    /// most; and the most entries one caller's subset changed by.
    pub leave_mean: f64,
    /// See `leave_mean`.
    pub leave_max: usize,
    /// See `leave_mean`.
    pub leave_most_per_caller: usize,
    /// When one member joins (named to sort right after a member tried): as for a leave.
    pub join_mean: f64,
    /// See `join_mean`.
    pub join_max: usize,
    /// See `join_mean`.
    pub join_most_per_caller: usize,
    /// How many members were tried leaving (and joining next to): evenly spread over the
    /// list.
    pub tried: usize,
}

/// Member `i`'s name in the lab (`m{i:05}@lab`).
fn name(i: usize) -> String {
    format!("m{i:05}@lab")
}

/// Every caller's subset of `members` (as names, sorted).
fn subsets<'a>(
    subsetting: &Subsetting,
    members: &'a [String],
    callers: usize,
) -> Vec<Vec<&'a str>> {
    (0..callers)
        .map(|c| {
            let mut subset: Vec<&str> = subsetting
                .subset(members, c, callers)
                .into_iter()
                .map(|j| members[j].as_str())
                .collect();
            subset.sort_unstable();
            subset
        })
        .collect()
}

/// Entries of `before` not in `after`, per caller (both sorted).
fn changed(before: &[Vec<&str>], after: &[Vec<&str>]) -> Vec<usize> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| b.iter().filter(|m| a.binary_search(m).is_err()).count())
        .collect()
}

/// The figures of `subsetting` for `members` members (named as the lab names them) and
/// `callers` callers, trying up to `tries` members (evenly spread; at least 1) leaving and
/// a member joining right after each. O(tries × callers × members).
pub fn figures(
    subsetting: &Subsetting,
    members: usize,
    callers: usize,
    tries: usize,
) -> SubsetFigures {
    let names: Vec<String> = (0..members).map(name).collect();
    let before = subsets(subsetting, &names, callers);
    let mut coverage = vec![0usize; members];
    for subset in &before {
        for member in subset {
            if let Ok(j) = names.binary_search_by(|n| n.as_str().cmp(member)) {
                coverage[j] += 1;
            }
        }
    }
    let tried = tries.clamp(1, members.max(1));
    let (mut leaves, mut joins) = (Vec::new(), Vec::new());
    let (mut leave_most, mut join_most) = (0, 0);
    for t in 0..tried {
        let at = (2 * t + 1) * members / (2 * tried);
        if members > 0 {
            let mut after = names.clone();
            after.remove(at);
            let per = changed(&before, &subsets(subsetting, &after, callers));
            leaves.push(per.iter().sum::<usize>());
            leave_most = leave_most.max(per.iter().copied().max().unwrap_or(0));
        }
        // `m00499a@lab` sorts between `m00499@lab` and `m00500@lab`.
        let mut after = names.clone();
        after.insert((at + 1).min(members), format!("m{at:05}a@lab"));
        let per = changed(&before, &subsets(subsetting, &after, callers));
        joins.push(per.iter().sum::<usize>());
        join_most = join_most.max(per.iter().copied().max().unwrap_or(0));
    }
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
    SubsetFigures {
        scheme: subsetting.scheme().name().to_string(),
        size: subsetting.size(),
        members,
        callers,
        coverage_min: coverage.iter().copied().min().unwrap_or(0),
        coverage_max: coverage.iter().copied().max().unwrap_or(0),
        coverage_mean: mean(&coverage),
        leave_mean: mean(&leaves),
        leave_max: leaves.iter().copied().max().unwrap_or(0),
        leave_most_per_caller: leave_most,
        join_mean: mean(&joins),
        join_max: joins.iter().copied().max().unwrap_or(0),
        join_most_per_caller: join_most,
        tried,
    }
}

#[cfg(test)]
mod tests {
    use rpc_load_balancer::routing::SubsetScheme;

    use super::*;

    #[test]
    fn the_large_scenario_s_figures_per_scheme() {
        let aperture = figures(&Subsetting::new(20), 1000, 200, 10);
        assert_eq!((aperture.coverage_min, aperture.coverage_max), (4, 4));
        assert_eq!(aperture.coverage_mean, 4.0);
        assert!(aperture.leave_most_per_caller <= 2 && aperture.join_most_per_caller <= 2);
        let rounds = figures(&Subsetting::with(SubsetScheme::Rounds, 20), 1000, 200, 10);
        assert_eq!((rounds.coverage_min, rounds.coverage_max), (4, 4));
        assert!(rounds.leave_mean > 3000.0, "{rounds:?}");
        let rendezvous = figures(
            &Subsetting::with(SubsetScheme::Rendezvous, 20),
            1000,
            200,
            10,
        );
        assert!(rendezvous.coverage_min == 0 && rendezvous.coverage_max >= 8);
        // Only the subsets that held the member (4 on average) change, one entry each.
        assert!(rendezvous.leave_mean < 10.0 && rendezvous.leave_most_per_caller == 1);
        assert!(rendezvous.join_most_per_caller <= 1);
        assert!(rendezvous.leave_mean < aperture.leave_mean);
        assert!(aperture.leave_mean < rounds.leave_mean);
    }
}
