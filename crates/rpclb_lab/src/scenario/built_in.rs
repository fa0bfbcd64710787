//! The built-in scenarios: the files of `lab/scenarios/`, compiled in.

use super::{Scenario, ScenarioError};

/// The built-in scenarios, by name, in report order (the files of `lab/scenarios/`).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "uniform",
        include_str!("../../../../lab/scenarios/uniform.toml"),
    ),
    (
        "slow-member",
        include_str!("../../../../lab/scenarios/slow-member.toml"),
    ),
    (
        "two-slow",
        include_str!("../../../../lab/scenarios/two-slow.toml"),
    ),
    (
        "uneven-capacity",
        include_str!("../../../../lab/scenarios/uneven-capacity.toml"),
    ),
    (
        "paused-member",
        include_str!("../../../../lab/scenarios/paused-member.toml"),
    ),
    (
        "failing-member",
        include_str!("../../../../lab/scenarios/failing-member.toml"),
    ),
    (
        "stragglers",
        include_str!("../../../../lab/scenarios/stragglers.toml"),
    ),
    (
        "oscillating",
        include_str!("../../../../lab/scenarios/oscillating.toml"),
    ),
    (
        "cold-start",
        include_str!("../../../../lab/scenarios/cold-start.toml"),
    ),
    (
        "new-member",
        include_str!("../../../../lab/scenarios/new-member.toml"),
    ),
    (
        "hot-keys",
        include_str!("../../../../lab/scenarios/hot-keys.toml"),
    ),
    (
        "large",
        include_str!("../../../../lab/scenarios/large.toml"),
    ),
];

impl Scenario {
    /// Every built-in scenario, parsed.
    ///
    /// Errors: none for the committed files (a test parses them all).
    pub fn built_in() -> Result<Vec<Scenario>, ScenarioError> {
        BUILT_IN
            .iter()
            .map(|(name, text)| Scenario::parse(text, name))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_scenario_parses_with_its_own_name() {
        let all = Scenario::built_in().unwrap();
        assert_eq!(all.len(), BUILT_IN.len());
        for (scenario, (name, _)) in all.iter().zip(BUILT_IN) {
            assert_eq!(scenario.name, *name);
        }
        let uniform = Scenario::load("uniform").unwrap();
        assert_eq!(uniform.members, 4);
        assert!((uniform.service.mean_ms() - 1.133).abs() < 0.001);
    }
}
