//! What a load run measured, as JSON and as a text table.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::latency::Latencies;

/// What a load run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// The balancer's algorithm.
    pub algorithm: String,
    /// Calls made.
    pub calls: u64,
    /// Calls that succeeded, per serving node.
    pub per_node: BTreeMap<String, u64>,
    /// Failed calls per error kind.
    pub errors: BTreeMap<String, u64>,
    /// The first error message seen of each kind.
    pub error_samples: BTreeMap<String, String>,
    /// Latencies of all calls, µs (a bounded histogram).
    pub latency: Latencies,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Calls that failed.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Calls that succeeded.
    pub fn ok_count(&self) -> u64 {
        self.per_node.values().sum()
    }

    /// The `p`-th percentile latency in µs (`p` in 0..=100, nearest rank, within the
    /// precision of [`Latencies`]).
    pub fn percentile_us(&self, p: f64) -> u64 {
        self.latency.percentile_us(p)
    }

    /// Calls per second of wall time.
    pub fn calls_per_sec(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Adds `other` (another caller's or batch's report) to this one: counts and latencies
    /// add up, the elapsed times too.
    pub fn absorb(&mut self, other: LoadReport) {
        self.calls += other.calls;
        self.latency.absorb(&other.latency);
        for (node, n) in other.per_node {
            *self.per_node.entry(node).or_default() += n;
        }
        for (kind, n) in other.errors {
            *self.errors.entry(kind).or_default() += n;
        }
        for (kind, message) in other.error_samples {
            self.error_samples.entry(kind).or_insert(message);
        }
        self.elapsed += other.elapsed;
    }

    /// Lists each of `nodes` in [`LoadReport::per_node`], with 0 calls if it served none.
    pub fn list_nodes<'a>(&mut self, nodes: impl IntoIterator<Item = &'a String>) {
        for node in nodes {
            self.per_node.entry(node.clone()).or_insert(0);
        }
    }

    /// The report as JSON without `algorithm`: `calls`, `ok`, `errors` {kind: n},
    /// `error_samples` {kind: first message}, `per_node` {node: n},
    /// `share` {node: fraction of successful calls}, `latency_us` {p50, p90, p99, max},
    /// `elapsed_ms`, `calls_per_sec`.
    pub fn summary_json(&self) -> Value {
        let ok = self.ok_count();
        let share: BTreeMap<&String, f64> = self
            .per_node
            .iter()
            .map(|(n, c)| (n, if ok == 0 { 0.0 } else { *c as f64 / ok as f64 }))
            .collect();
        json!({
            "calls": self.calls,
            "ok": ok,
            "errors": self.errors,
            "error_samples": self.error_samples,
            "per_node": self.per_node,
            "share": share,
            "latency_us": self.latency.to_json(),
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "calls_per_sec": self.calls_per_sec().round(),
        })
    }

    /// The report as JSON: `algorithm` and the fields of [`LoadReport::summary_json`].
    pub fn to_json(&self) -> Value {
        let mut value = self.summary_json();
        value["algorithm"] = json!(self.algorithm);
        value
    }

    /// The report as a text table.
    pub fn to_table(&self) -> String {
        let ok = self.ok_count();
        let mut out = format!(
            "{}: {} calls in {:.2} s ({:.0} calls/s), {} errors\n",
            self.algorithm,
            self.calls,
            self.elapsed.as_secs_f64(),
            self.calls_per_sec(),
            self.error_count()
        );
        out.push_str(&format!("  {:<32} {:>8} {:>7}\n", "node", "calls", "share"));
        for (node, count) in &self.per_node {
            let share = if ok == 0 {
                0.0
            } else {
                100.0 * *count as f64 / ok as f64
            };
            out.push_str(&format!("  {node:<32} {count:>8} {share:>6.1}%\n"));
        }
        for (kind, count) in &self.errors {
            out.push_str(&format!("  error {kind:<26} {count:>8}\n"));
            if let Some(sample) = self.error_samples.get(kind) {
                out.push_str(&format!("    e.g. {sample}\n"));
            }
        }
        out.push_str(&format!(
            "  latency p50 {} µs, p99 {} µs, max {} µs\n",
            self.percentile_us(50.0),
            self.percentile_us(99.0),
            self.latency.max_us()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::LoadReport;

    #[test]
    fn nodes_without_calls_are_listed_with_zero() {
        let mut report = LoadReport::default();
        report.per_node.insert("a".into(), 3);
        report.list_nodes(&["a".to_string(), "b".to_string()]);
        assert_eq!(report.per_node["a"], 3);
        assert_eq!(report.per_node["b"], 0);
        let json = report.summary_json();
        assert_eq!(json["per_node"]["b"], 0);
        assert_eq!(json["share"]["b"], 0.0);
        assert!(report.to_table().contains("  b "), "{}", report.to_table());
    }
}
