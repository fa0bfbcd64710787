//! The cases `rpclb bench` measures, and the ratios it reports between them.

/// A measured case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// (a) A raw ractor_cluster RPC to the target's raw floor actor.
    Raw,
    /// (b) `Node::call` to the target.
    Direct,
    /// (c) A RoundRobin balancer call over the two targets.
    Balanced,
    /// (d) A balancer call served by this node, its only member.
    Local,
}

impl Case {
    /// Every case, in the order each round runs them.
    pub const ALL: [Case; 4] = [Case::Raw, Case::Direct, Case::Balanced, Case::Local];

    /// The case's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Case::Raw => "raw",
            Case::Direct => "direct",
            Case::Balanced => "balanced",
            Case::Local => "local",
        }
    }

    /// The case's letter in issue 9.
    pub fn letter(self) -> char {
        match self {
            Case::Raw => 'a',
            Case::Direct => 'b',
            Case::Balanced => 'c',
            Case::Local => 'd',
        }
    }
}

/// The ratios reported, per round: `(name, numerator case)` over [`Case::Raw`].
pub(super) const RATIOS: [(&str, Case); 2] = [
    ("direct_over_raw", Case::Direct),
    ("balanced_over_raw", Case::Balanced),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_cmd::plan::round_order;

    #[test]
    fn each_round_runs_every_case_once_in_a_rotated_order() {
        let names = |round| {
            round_order(round)
                .map(|(i, case)| {
                    assert_eq!(Case::ALL[i], case);
                    case.name()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(names(1), ["raw", "direct", "balanced", "local"]);
        assert_eq!(names(2), ["direct", "balanced", "local", "raw"]);
        assert_eq!(names(4), ["local", "raw", "direct", "balanced"]);
        assert_eq!(names(5), names(1));
        // Over as many rounds as cases, each case runs once in every position.
        for position in 0..Case::ALL.len() {
            let firsts: std::collections::BTreeSet<_> =
                (1..=4).map(|round| names(round)[position]).collect();
            assert_eq!(firsts.len(), Case::ALL.len());
        }
    }
}
