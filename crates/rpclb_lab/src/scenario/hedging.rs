//! The `[hedging]` option of a scenario (issue 22): callers' calls are idempotent, and a call
//! still unanswered after a delay is sent a second time to another member, as the library's
//! [`HedgePolicy`] decides.

use std::time::Duration;

use rpc_load_balancer::testkit::HedgeKit;
use rpc_load_balancer::HedgePolicy;
use serde::{Deserialize, Serialize};

/// Hedging: every call is of an idempotent function, and each caller (a node with its own
/// balancer) hedges as the library's [`HedgePolicy`] says: a call with no reply `delay_ms`
/// after it was sent — or after the `percentile` of its caller's recent call latencies (no
/// earlier than `min_delay_ms`; none before 100 calls replied) — is sent once more to a
/// member it has not tried, while the caller's hedge budget (`ratio` of the calls plus
/// `min_per_second`, over `window_s`) allows. The first reply wins; the other copy is
/// cancelled (it leaves its member's queue or service when the cancel arrives, a network
/// delay later). Exactly one of `delay_ms` and `percentile` is given; `ratio` and
/// `min_per_second` have no default (the library has none).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hedging {
    /// A set delay, ms (> 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    /// A percentile of the caller's recent latencies, percent (above 0, below 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentile: Option<f64>,
    /// The shortest delay with `percentile`, ms (default 0).
    #[serde(default)]
    pub min_delay_ms: f64,
    /// Extra copies per call, 0–1.
    pub ratio: f64,
    /// Extra copies per second whatever the calls.
    pub min_per_second: u32,
    /// The budget's window, whole seconds from 1 to 60 (default 10).
    #[serde(default = "window_s")]
    pub window_s: u64,
}

fn window_s() -> u64 {
    10
}

/// A delay in ms as a `Duration` (negative or not finite: zero, refused by the policy).
fn ms(value: f64) -> Duration {
    Duration::try_from_secs_f64(value / 1e3).unwrap_or(Duration::ZERO)
}

impl Hedging {
    /// The `--hedge` spec `DELAY,RATIO,MIN_PER_SECOND`, `DELAY` being `pNN` (a percentile,
    /// e.g. `p95`) or `NNms` (a set delay, e.g. `20ms`).
    ///
    /// Errors: what is wrong with the spec.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let [delay, ratio, floor] = parts[..] else {
            return Err(format!(
                "{spec:?}: expected DELAY,RATIO,MIN_PER_SECOND (e.g. p95,0.05,1 or 20ms,0.05,1)"
            ));
        };
        let ratio: f64 = ratio
            .parse()
            .map_err(|_| format!("{spec:?}: the ratio {ratio:?} is not a number"))?;
        let min_per_second: u32 = floor.parse().map_err(|_| {
            format!(
                "{spec:?}: the floor {floor:?} is not a whole number from 0 to {}",
                u32::MAX
            )
        })?;
        let number = |text: &str| {
            text.parse::<f64>()
                .map_err(|_| format!("{spec:?}: the delay {delay:?} is not pNN or NNms"))
        };
        let (delay_ms, percentile) = if let Some(p) = delay.strip_prefix('p') {
            (None, Some(number(p)?))
        } else if let Some(value) = delay.strip_suffix("ms") {
            (Some(number(value)?), None)
        } else {
            return Err(format!("{spec:?}: the delay {delay:?} is not pNN or NNms"));
        };
        Ok(Self {
            delay_ms,
            percentile,
            min_delay_ms: 0.0,
            ratio,
            min_per_second,
            window_s: window_s(),
        })
    }

    /// The library's policy of these values (a `percentile` wins over a `delay_ms`; both
    /// or neither are refused when the scenario is checked).
    pub fn policy(&self) -> HedgePolicy {
        let policy = match (self.percentile, self.delay_ms) {
            (Some(p), _) => HedgePolicy::at_percentile(p, self.ratio, self.min_per_second)
                .min_delay(ms(self.min_delay_ms)),
            (None, delay) => {
                HedgePolicy::after(ms(delay.unwrap_or(0.0)), self.ratio, self.min_per_second)
            }
        };
        policy.window(Duration::from_secs(self.window_s))
    }

    /// Checks the values as a scenario's check does (for a command line to refuse a bad
    /// `--hedge` where it is read).
    ///
    /// Errors: as a scenario's: the field that is wrong (`hedging.delay_ms`,
    /// `hedging.percentile`, `hedging.ratio`, `hedging.window_s`) and why.
    pub fn check(&self) -> Result<(), (String, String)> {
        self.kit().map(drop)
    }

    /// A caller's hedging decisions.
    ///
    /// Errors: the field that is wrong (`hedging.delay_ms`, `hedging.percentile`,
    /// `hedging.ratio`, `hedging.window_s`) and why.
    pub(crate) fn kit(&self) -> Result<HedgeKit, (String, String)> {
        if self.delay_ms.is_some() == self.percentile.is_some() {
            return Err((
                "hedging".to_string(),
                "give exactly one of delay_ms and percentile".to_string(),
            ));
        }
        if let Some(delay) = self.delay_ms {
            // (`ms` would read a delay it cannot hold as 0: say what is wrong instead.)
            if !(delay > 0.0 && Duration::try_from_secs_f64(delay / 1e3).is_ok()) {
                return Err((
                    "hedging.delay_ms".to_string(),
                    format!("{delay} is not a delay above 0 ms that a duration can hold"),
                ));
            }
        }
        if !(self.min_delay_ms.is_finite() && self.min_delay_ms >= 0.0) {
            return Err((
                "hedging.min_delay_ms".to_string(),
                format!("{} is not a delay ≥ 0", self.min_delay_ms),
            ));
        }
        HedgeKit::new(self.policy()).map_err(|error| match error {
            rpc_load_balancer::Error::InvalidConfig { option, reason } => {
                let field = match option {
                    "hedge.delay" => "hedging.delay_ms".to_string(),
                    "hedge.window" => "hedging.window_s".to_string(),
                    other => other.replace("hedge.", "hedging."),
                };
                (field, reason)
            }
            other => ("hedging".to_string(), other.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_spec_reads_either_delay() {
        let p95 = Hedging::parse("p95,0.05,1").unwrap();
        assert_eq!((p95.percentile, p95.delay_ms), (Some(95.0), None));
        assert_eq!((p95.ratio, p95.min_per_second), (0.05, 1));
        assert!(p95.kit().is_ok());
        let fixed = Hedging::parse("20ms, 0.1, 0").unwrap();
        assert_eq!((fixed.percentile, fixed.delay_ms), (None, Some(20.0)));
        for bad in [
            "p95",
            "p95,0.05",
            "95,0.05,1",
            "p95,x,1",
            "p95,0.05,-1",
            "pxx,0.05,1",
        ] {
            assert!(Hedging::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn invalid_values_name_the_field() {
        let field = |h: Hedging| h.kit().err().map(|(field, _)| field);
        let p95 = Hedging::parse("p95,0.05,1").unwrap();
        assert_eq!(
            field(Hedging { ratio: 2.0, ..p95 }),
            Some("hedging.ratio".into())
        );
        assert_eq!(
            field(Hedging {
                percentile: Some(100.0),
                ..p95
            }),
            Some("hedging.percentile".into())
        );
        assert_eq!(
            field(Hedging { window_s: 0, ..p95 }),
            Some("hedging.window_s".into())
        );
        assert_eq!(
            field(Hedging {
                delay_ms: Some(1.0),
                ..p95
            }),
            Some("hedging".into())
        );
        let fixed = Hedging::parse("0ms,0.05,1").unwrap();
        assert_eq!(field(fixed), Some("hedging.delay_ms".into()));
        // A delay no duration holds is named as such, not as 0.
        for huge in ["1e300ms,0.05,1", "infms,0.05,1", "NaNms,0.05,1"] {
            let hedging = Hedging::parse(huge).unwrap();
            let (field, reason) = hedging.kit().map(|_| ()).unwrap_err();
            assert_eq!(field, "hedging.delay_ms", "{huge}");
            assert!(reason.contains("a duration can hold"), "{huge}: {reason}");
        }
    }
}
