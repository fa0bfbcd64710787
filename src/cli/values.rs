//! Value parsers several commands share.

/// Parses a whole number of at least 1 (a count or a size in ms): its error names the range
/// a user can type ("must be at least 1"), not clap's `1..18446744073709551615`.
pub(super) fn at_least_one(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) if text.starts_with('-') => Err("must be at least 1".into()),
        Err(e) => Err(format!("{text:?} is not a whole number: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    #[test]
    fn at_least_one_takes_1_and_up_and_says_the_range_otherwise() {
        assert_eq!(at_least_one("1"), Ok(1));
        assert_eq!(at_least_one("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(at_least_one("0").unwrap_err(), "must be at least 1");
        assert!(at_least_one("x")
            .unwrap_err()
            .contains("not a whole number"));
    }

    /// `rpclb lab --subset 0` (and the other flags taking a count of at least 1) say the
    /// range a user can type, not a bound of u64::MAX.
    #[test]
    fn a_zero_count_is_refused_saying_at_least_1() {
        for args in [
            &["rpclb", "lab", "--subset", "0"][..],
            &["rpclb", "demo", "--calls", "0"],
            &[
                "rpclb",
                "call",
                "--peer",
                "h:1",
                "--timeout-ms",
                "0",
                "echo",
            ],
            &[
                "rpclb",
                "load",
                "--peer",
                "h:1",
                "--balancer",
                "b",
                "--calls",
                "0",
            ],
        ] {
            let error = Cli::try_parse_from(args).unwrap_err().to_string();
            assert!(error.contains("must be at least 1"), "{args:?}: {error}");
            assert!(!error.contains("18446744073709551615"), "{args:?}: {error}");
        }
        let lab = Cli::try_parse_from(["rpclb", "lab", "--subset", "3"]).unwrap();
        match lab.command {
            crate::cli::Command::Lab(args) => assert_eq!(args.subset, Some(3)),
            other => panic!("{other:?}"),
        }
    }
}
