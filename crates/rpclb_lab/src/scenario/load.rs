//! Reading a scenario: from TOML text, a built-in name or a file, checked.

use super::{Scenario, ScenarioError, BUILT_IN};

impl Scenario {
    /// Reads a scenario from TOML `text`; `origin` names it in errors.
    ///
    /// Errors: [`ScenarioError::Parse`] for bad TOML, an unknown field or a wrong type;
    /// [`ScenarioError::Invalid`] naming the field for a value out of range.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        Self::parse_with(text, origin, |_| {})
    }

    /// [`Scenario::parse`], with `adjust` applied (e.g. command-line overrides) before the
    /// values are checked.
    ///
    /// Errors: as [`Scenario::parse`], for the adjusted values.
    fn parse_with(
        text: &str,
        origin: &str,
        adjust: impl FnOnce(&mut Scenario),
    ) -> Result<Scenario, ScenarioError> {
        let mut scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        adjust(&mut scenario);
        scenario.validate()?;
        Ok(scenario)
    }

    /// The built-in scenario `name`, or else the file at path `name`.
    ///
    /// Errors: [`ScenarioError::Unknown`] when it is no built-in name and no file of that
    /// name exists, unless it looks like a path (it has a `/` or ends in `.toml`): then
    /// [`ScenarioError::Read`] with the path and the OS error, as for a file that cannot be
    /// read; else as [`Scenario::parse`].
    pub fn load(name: &str) -> Result<Scenario, ScenarioError> {
        Self::load_with(name, |_| {})
    }

    /// [`Scenario::load`], with `adjust` applied (e.g. `rpclb lab`'s `--measure-s`) before
    /// the values are checked, so a file is judged with the values it will run with.
    ///
    /// Errors: as [`Scenario::load`], for the adjusted values.
    pub fn load_with(
        name: &str,
        adjust: impl FnOnce(&mut Scenario),
    ) -> Result<Scenario, ScenarioError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) {
            return Scenario::parse_with(text, name, adjust);
        }
        let text = match std::fs::read_to_string(name) {
            Ok(text) => text,
            Err(source)
                if source.kind() == std::io::ErrorKind::NotFound
                    && !name.contains('/')
                    && !name.ends_with(".toml") =>
            {
                return Err(ScenarioError::Unknown {
                    name: name.to_string(),
                    known: BUILT_IN
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            Err(source) => {
                return Err(ScenarioError::Read {
                    path: name.to_string(),
                    source,
                })
            }
        };
        Scenario::parse_with(&text, name, adjust)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_field_is_named() {
        let error = Scenario::parse("name = \"x\"\ncapacity = 0\n", "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "capacity"),
            "{error}"
        );
        let error = Scenario::parse("name = \"x\"\ncapasity = 3\n", "t").unwrap_err();
        assert!(error.to_string().contains("capasity"), "{error}");
        for bad in ["0", "5", "-1", "1e12"] {
            let text = format!("name = \"x\"\ncpu_sample_interval_ms = {bad}\n");
            let error = Scenario::parse(&text, "t").unwrap_err();
            assert!(
                matches!(&error, ScenarioError::Invalid { field, .. } if field == "cpu_sample_interval_ms"),
                "{bad}: {error}"
            );
        }
        let text = "name = \"x\"\n[[event]]\nat_s = 1\nmember = 9\naction = \"pause\"\n";
        let error = Scenario::parse(text, "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "event[0].member"),
            "{error}"
        );
        let text = "name = \"x\"\n[[event]]\nat_s = 1\nmember = 0\naction = \"slow\"\n";
        let error = Scenario::parse(text, "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "event[0].factor"),
            "{error}"
        );
        let error =
            Scenario::parse("name = \"x\"\nmembers = 100000\ncallers = 100\n", "t").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Invalid { field, .. } if field == "callers"),
            "{error}"
        );
        assert!(matches!(
            Scenario::load("no-such-scenario"),
            Err(ScenarioError::Unknown { .. })
        ));
        // A path that does not exist is a file not found, not an unknown scenario.
        let error = Scenario::load("./nope.toml").unwrap_err();
        assert!(
            matches!(&error, ScenarioError::Read { path, source }
                if path == "./nope.toml" && source.kind() == std::io::ErrorKind::NotFound),
            "{error}"
        );
        assert!(error.to_string().contains("./nope.toml"), "{error}");
    }
}
