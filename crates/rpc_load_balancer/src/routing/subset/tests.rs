use std::collections::BTreeSet;

use super::*;
use crate::routing::{BuildContext, Selector};

fn names(m: usize) -> Vec<String> {
    (0..m).map(|i| format!("m{i:05}@lab")).collect()
}

/// Every caller's subset, as member ids.
fn subsets(s: &Subsetting, members: &[String], callers: usize) -> Vec<BTreeSet<String>> {
    (0..callers)
        .map(|c| {
            s.subset(members, c, callers)
                .into_iter()
                .map(|j| members[j].clone())
                .collect()
        })
        .collect()
}

/// How many subsets hold each member.
fn coverage(s: &Subsetting, m: usize, callers: usize) -> Vec<usize> {
    let members = names(m);
    let mut counts = vec![0; m];
    for c in 0..callers {
        for j in s.subset(&members, c, callers) {
            counts[j] += 1;
        }
    }
    counts
}

/// Subset entries that change between two member lists, summed over the callers: members
/// that left a caller's subset (as many as came in, the size staying the same), and the
/// most any one caller's subset changed by.
fn churn(s: &Subsetting, before: &[String], after: &[String], callers: usize) -> (usize, usize) {
    let old = subsets(s, before, callers);
    let new = subsets(s, after, callers);
    let per: Vec<usize> = old
        .iter()
        .zip(&new)
        .map(|(o, n)| o.difference(n).count())
        .collect();
    (per.iter().sum(), per.iter().copied().max().unwrap_or(0))
}

#[test]
fn every_caller_gets_k_distinct_members_in_ascending_order_the_same_each_time() {
    for scheme in SubsetScheme::ALL {
        for (m, callers, k) in [
            (10, 3, 4),
            (1000, 200, 20),
            (997, 213, 17),
            (5, 40, 2),
            (64, 1, 7),
        ] {
            let members = names(m);
            let s = Subsetting::with(scheme, k);
            for c in 0..callers {
                let subset = s.subset(&members, c, callers);
                assert_eq!(
                    subset.len(),
                    k,
                    "{scheme:?} m {m} n {callers} k {k} caller {c}"
                );
                assert!(subset.windows(2).all(|w| w[0] < w[1]), "{subset:?}");
                assert!(subset.iter().all(|&j| j < m));
                assert_eq!(subset, s.subset(&members, c, callers), "not deterministic");
            }
        }
    }
}

#[test]
fn a_size_at_or_above_the_member_count_is_every_member_and_no_members_is_none() {
    let members = names(6);
    for scheme in SubsetScheme::ALL {
        for k in [6, 7, 100] {
            let s = Subsetting::with(scheme, k);
            assert_eq!(s.subset(&members, 2, 3), (0..6).collect::<Vec<_>>());
        }
        let none: &[String] = &[];
        assert!(Subsetting::with(scheme, 3).subset(none, 0, 3).is_empty());
    }
}

#[test]
fn a_caller_index_past_the_count_wraps_and_a_count_of_zero_is_one() {
    let members = names(30);
    for scheme in SubsetScheme::ALL {
        let s = Subsetting::with(scheme, 5);
        assert_eq!(s.subset(&members, 7, 4), s.subset(&members, 3, 4));
        assert_eq!(s.subset(&members, 9, 0), s.subset(&members, 0, 1));
    }
}

#[test]
fn aperture_starts_each_caller_at_its_share_of_the_ring() {
    let members = names(10);
    let s = Subsetting::new(3);
    assert_eq!(s.scheme(), SubsetScheme::Aperture);
    // Caller i of 4 starts at ⌊10·i / 4⌋: 0, 2, 5, 7.
    assert_eq!(s.subset(&members, 0, 4), vec![0, 1, 2]);
    assert_eq!(s.subset(&members, 1, 4), vec![2, 3, 4]);
    assert_eq!(s.subset(&members, 2, 4), vec![5, 6, 7]);
    assert_eq!(s.subset(&members, 3, 4), vec![7, 8, 9]);
    // Caller 4 of 5 starts at 8 and wraps around the ring.
    assert_eq!(s.subset(&members, 4, 5), vec![0, 8, 9]);
}

#[test]
fn aperture_puts_every_member_in_the_floor_or_ceiling_of_k_n_over_m_subsets() {
    for (m, callers, k) in [
        (1000, 200, 20),
        (997, 213, 17),
        (10, 3, 4),
        (7, 50, 3),
        (100, 7, 9),
    ] {
        let counts = coverage(&Subsetting::new(k), m, callers);
        let floor = k * callers / m;
        let ceil = (k * callers).div_ceil(m);
        assert!(
            counts.iter().all(|&c| c == floor || c == ceil),
            "m {m} n {callers} k {k}: {:?}",
            (counts.iter().min(), counts.iter().max())
        );
    }
    // The lab's `large`: exactly 4 each.
    assert!(coverage(&Subsetting::new(20), 1000, 200)
        .iter()
        .all(|&c| c == 4));
}

#[test]
fn rounds_cover_every_member_equally_when_the_sizes_divide() {
    // 1,000 members in 50 slices of 20: 4 rounds of 50 callers.
    let counts = coverage(&Subsetting::with(SubsetScheme::Rounds, 20), 1000, 200);
    assert!(counts.iter().all(|&c| c == 4), "{counts:?}");
    let counts = coverage(&Subsetting::with(SubsetScheme::Rounds, 4), 12, 6);
    assert!(counts.iter().all(|&c| c == 2), "{counts:?}");
    // Each round is a shuffle: round 1's first caller does not take round 0's first slice.
    let members = names(12);
    let s = Subsetting::with(SubsetScheme::Rounds, 4);
    assert_ne!(s.subset(&members, 0, 6), s.subset(&members, 3, 6));
}

#[test]
fn rendezvous_coverage_is_uneven_at_the_large_scenario_s_sizes() {
    let counts = coverage(&Subsetting::with(SubsetScheme::Rendezvous, 20), 1000, 200);
    assert_eq!(counts.iter().sum::<usize>(), 4000);
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    // A binomial(200, 0.02) draw per member: some in none, some in twice the mean.
    assert!(*min == 0 && *max >= 8, "min {min} max {max}");
}

#[test]
fn churn_when_one_member_leaves_or_joins_the_large_scenario() {
    let (m, callers, k) = (1000, 200, 20);
    let before = names(m);
    for leaving in [0, 1, 499, 500, 998, 999] {
        let mut after = before.clone();
        after.remove(leaving);
        // Aperture: every start moves by less than a member: at most 2 entries per caller.
        let (total, most) = churn(&Subsetting::new(k), &before, &after, callers);
        assert!(
            most <= 2 && total <= callers * 2,
            "aperture leave {leaving}: {total} {most}"
        );
        // Rendezvous: exactly the subsets that held the member, one entry each.
        let rendezvous = Subsetting::with(SubsetScheme::Rendezvous, k);
        let held = subsets(&rendezvous, &before, callers)
            .iter()
            .filter(|s| s.contains(&before[leaving]))
            .count();
        assert_eq!(
            churn(&rendezvous, &before, &after, callers),
            (held, held.min(1))
        );
        // Rounds: a reshuffle (and 49 callers a round instead of 50); most entries change.
        let (total, _) = churn(
            &Subsetting::with(SubsetScheme::Rounds, k),
            &before,
            &after,
            callers,
        );
        assert!(
            total > callers * k * 3 / 4,
            "rounds leave {leaving}: {total}"
        );
    }
    // A member joins (its name sorts in the middle).
    let mut after = before.clone();
    after.insert(500, "m00499x@lab".to_string());
    let (total, most) = churn(&Subsetting::new(k), &before, &after, callers);
    assert!(
        most <= 2 && total <= callers * 2,
        "aperture join: {total} {most}"
    );
    let rendezvous = Subsetting::with(SubsetScheme::Rendezvous, k);
    let ranked_in = subsets(&rendezvous, &after, callers)
        .iter()
        .filter(|s| s.contains("m00499x@lab"))
        .count();
    assert_eq!(churn(&rendezvous, &before, &after, callers).0, ranked_in);
}

#[test]
fn names_round_trip() {
    for scheme in SubsetScheme::ALL {
        assert_eq!(SubsetScheme::from_name(scheme.name()), Some(scheme));
    }
    assert_eq!(SubsetScheme::from_name("ring"), None);
}

/// An algorithm that is only a name (check reads nothing else).
struct Named(&'static str, bool);

impl Algorithm for Named {
    fn name(&self) -> &'static str {
        self.0
    }

    fn build(&self, _: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Err(Error::InvalidConfig {
            option: "named",
            reason: "a name only".into(),
        })
    }

    fn is_local(&self) -> bool {
        self.1
    }
}

#[test]
fn a_size_of_zero_and_hash_ring_or_call_direct_are_refused_naming_the_option() {
    let option = |r: Result<(), Error>| match r {
        Err(Error::InvalidConfig { option, .. }) => option,
        other => panic!("{other:?}"),
    };
    assert_eq!(option(Subsetting::new(0).validate()), "subset_size");
    assert_eq!(
        option(Subsetting::new(0).check(&Named("round_robin", false))),
        "subset_size"
    );
    for (name, local) in [
        ("hash_ring", false),
        ("hash_ring_bounded", false),
        ("hash_ring+ejection", false),
        ("call_direct", true),
    ] {
        assert_eq!(
            option(Subsetting::new(3).check(&Named(name, local))),
            "subsetting",
            "{name}"
        );
    }
    for name in [
        "round_robin",
        "power_of_two+slow_start",
        "least_connections+ejection",
    ] {
        Subsetting::new(3).check(&Named(name, false)).unwrap();
    }
}
