//! The text form of a [`CpuSampler`] (`rpclb node --cpu-sampler SPEC`): parsing, and the
//! errors that name the bad part.

use std::str::FromStr;
#[cfg(any(test, feature = "test-hooks"))]
use std::time::Duration;

use super::CpuSampler;
use crate::Error;

/// The forms [`CpuSampler`]'s [`FromStr`] accepts, for error messages.
const SPECS: &str = "system, process, runtime (and with the `test-hooks` feature the test \
samplers const:N, panic, const-then-panic:N:AFTER_MS, N in %, AFTER in ms)";

/// Whether this build has the test samplers (feature `test-hooks`).
const TEST_SAMPLERS: bool = cfg!(any(test, feature = "test-hooks"));

/// Parses the flag syntax (see [`CpuSampler`]).
///
/// Errors: [`Error::InvalidConfig`] with option `cpu_sampler`, its reason naming the bad part
/// (an unknown sampler, a missing or extra `:` part, a number that does not parse or is not
/// within 0–100, a test sampler in a build without the `test-hooks` feature).
impl FromStr for CpuSampler {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Self, Error> {
        let invalid = |reason: String| Error::InvalidConfig {
            option: "cpu_sampler",
            reason,
        };
        let mut parts = spec.split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let arity = |wanted: usize, form: &str| {
            if args.len() == wanted {
                Ok(())
            } else {
                Err(invalid(format!(
                    "{spec:?}: `{kind}` takes {wanted} `:` part(s) ({form}), got {}",
                    args.len()
                )))
            }
        };
        #[cfg(any(test, feature = "test-hooks"))]
        let percent = |text: &str| {
            let value = text
                .parse::<f64>()
                .map_err(|e| invalid(format!("{spec:?}: N = {text:?} is not a number: {e}")))?;
            if (0.0..=100.0).contains(&value) {
                Ok(value)
            } else {
                Err(invalid(format!(
                    "{spec:?}: N = {text:?} is not a percentage from 0 to 100"
                )))
            }
        };
        match kind {
            "system" => arity(0, "system").map(|()| Self::System),
            "process" => arity(0, "process").map(|()| Self::Process),
            "runtime" => arity(0, "runtime").map(|()| Self::Runtime),
            "panic" | "const" | "const-then-panic" if !TEST_SAMPLERS => {
                Err(invalid(test_sampler_refused(spec)))
            }
            #[cfg(any(test, feature = "test-hooks"))]
            "panic" => arity(0, "panic").map(|()| Self::Panic),
            #[cfg(any(test, feature = "test-hooks"))]
            "const" => {
                arity(1, "const:N")?;
                Ok(Self::Const(percent(args[0])?))
            }
            #[cfg(any(test, feature = "test-hooks"))]
            "const-then-panic" => {
                arity(2, "const-then-panic:N:AFTER_MS")?;
                let value = percent(args[0])?;
                let after_ms = args[1].parse::<u64>().map_err(|e| {
                    invalid(format!(
                        "{spec:?}: AFTER_MS = {:?} is not a whole number of ms: {e}",
                        args[1]
                    ))
                })?;
                Ok(Self::ConstThenPanic {
                    value,
                    after: Duration::from_millis(after_ms),
                })
            }
            "custom" => Err(invalid(
                "a custom sampler is built in code (CpuSampler::custom), not from text".into(),
            )),
            other => Err(invalid(format!(
                "unknown sampler {other:?} in {spec:?}; known: {SPECS}"
            ))),
        }
    }
}

/// Why a test sampler's text form `spec` does not parse in a build without the `test-hooks`
/// feature.
fn test_sampler_refused(spec: &str) -> String {
    format!(
        "{spec:?} is a test sampler: it needs rpc_load_balancer's `test-hooks` feature, which this \
         build does not have (the rpclb binary's default build has it)"
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_flag_syntax_round_trips() {
        for spec in [
            "system",
            "process",
            "runtime",
            "const:42.5",
            "const:0",
            "const:100",
            "panic",
            "const-then-panic:30:2000",
        ] {
            let sampler: CpuSampler = spec.parse().unwrap();
            assert_eq!(sampler.to_string(), spec);
            let again: CpuSampler = sampler.to_string().parse().unwrap();
            assert_eq!(again.to_string(), spec);
        }
        assert!(matches!("system".parse(), Ok(CpuSampler::System)));
        assert!(matches!(
            "const-then-panic:7.5:250".parse(),
            Ok(CpuSampler::ConstThenPanic { value, after })
                if value == 7.5 && after == Duration::from_millis(250)
        ));
        assert_eq!(CpuSampler::default().to_string(), "system");
        assert_eq!(CpuSampler::custom(|| 1.0).to_string(), "custom");
        assert_eq!(format!("{:?}", CpuSampler::custom(|| 1.0)), "Custom(..)");
        assert_eq!(format!("{:?}", CpuSampler::Const(2.0)), "Const(2.0)");
    }

    #[test]
    fn a_build_without_test_hooks_names_the_feature_when_refusing_a_test_sampler() {
        let reason = test_sampler_refused("const:5");
        assert!(
            reason.starts_with("\"const:5\" is a test sampler"),
            "{reason}"
        );
        assert!(reason.contains("`test-hooks` feature"), "{reason}");
    }

    #[test]
    fn parse_errors_name_the_bad_part() {
        let reason = |spec: &str| match spec.parse::<CpuSampler>() {
            Err(Error::InvalidConfig {
                option: "cpu_sampler",
                reason,
            }) => reason,
            other => panic!("{spec}: expected InvalidConfig(cpu_sampler), got {other:?}"),
        };
        assert!(reason("sytem").contains("unknown sampler \"sytem\""));
        assert!(reason("").contains("unknown sampler \"\""));
        assert!(reason("const").contains("takes 1"));
        assert!(reason("const:").contains("N = \"\""));
        assert!(reason("const:abc").contains("N = \"abc\""));
        for out_of_range in [
            "const:-3",
            "const:NaN",
            "const:100.5",
            "const-then-panic:150:10",
        ] {
            assert!(
                reason(out_of_range).contains("not a percentage from 0 to 100"),
                "{out_of_range}"
            );
        }
        assert!(reason("const:1:2").contains("takes 1"));
        assert!(reason("system:1").contains("takes 0"));
        assert!(reason("const-then-panic:5").contains("takes 2"));
        assert!(reason("const-then-panic:x:5").contains("N = \"x\""));
        assert!(reason("const-then-panic:5:1.5").contains("AFTER_MS = \"1.5\""));
        assert!(reason("const-then-panic:5:-1").contains("AFTER_MS = \"-1\""));
        assert!(reason("custom").contains("CpuSampler::custom"));
    }
}
