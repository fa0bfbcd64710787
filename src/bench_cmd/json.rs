//! `rpclb bench --json`: the report as one JSON document, each phase's cases and ratios.

use serde_json::{json, Map, Value};

use super::case::{Case, RATIOS};
use super::measure::Report;
use super::phase::Phase;

/// `{"per_round":[..],"min","median","max"}` of per-round ratios (3 decimals; a round whose
/// raw figure was 0 is `null` and left out of min, median and max).
pub(super) fn ratio_stats(per_round: &[Option<f64>]) -> Value {
    let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
    let mut known: Vec<f64> = per_round.iter().flatten().copied().collect();
    known.sort_by(f64::total_cmp);
    let median = match known.len() {
        0 => None,
        n if n % 2 == 1 => Some(known[n / 2]),
        n => Some((known[n / 2 - 1] + known[n / 2]) / 2.0),
    };
    json!({
        "per_round": per_round.iter().map(|r| r.map(round3)).collect::<Vec<_>>(),
        "min": known.first().copied().map(round3),
        "median": median.map(round3),
        "max": known.last().copied().map(round3),
    })
}

impl Phase {
    /// `{"cases":{case: report},"ratios":{name:{"p50","p99","calls_per_sec"}},"warmup":{case:
    /// {"calls","errors"}}}`.
    pub(super) fn to_json(&self) -> Value {
        let mut cases = Map::new();
        let mut warmup = Map::new();
        for (i, case) in Case::ALL.iter().enumerate() {
            cases.insert(case.name().to_string(), self.totals[i].summary_json());
            if let Some(report) = &self.warmup[i] {
                warmup.insert(
                    case.name().to_string(),
                    json!({"calls": report.calls, "errors": report.errors}),
                );
            }
        }
        let mut ratios = Map::new();
        for (name, case) in RATIOS {
            ratios.insert(
                name.to_string(),
                json!({
                    "p50": ratio_stats(&self.ratios(case, |f| f.p50)),
                    "p99": ratio_stats(&self.ratios(case, |f| f.p99)),
                    "calls_per_sec": ratio_stats(&self.ratios(case, |f| f.calls_per_sec)),
                }),
            );
        }
        json!({"cases": cases, "ratios": ratios, "warmup": warmup})
    }
}

impl Report<'_> {
    /// The report: `{"nodes","node_pids","bench_node","targets","settings":{..},"sizes":[{"bytes",
    /// "sequential","throughput"}],"errors","ok"}` (docs/reference/rpclb.md).
    pub(super) fn to_json(&self) -> Value {
        let Report {
            cluster,
            node,
            names,
            args,
            runtime,
            plan,
            results,
            errors,
        } = *self;
        let sizes: Vec<Value> = results
            .iter()
            .map(|r| {
                json!({
                    "bytes": r.bytes,
                    "sequential": r.sequential.to_json(),
                    "throughput": r.throughput.to_json(),
                })
            })
            .collect();
        json!({
            "nodes": cluster.names(),
            "node_pids": cluster.nodes.iter().map(|n| n.pid()).collect::<Vec<_>>(),
            "bench_node": node.name(),
            "targets": names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            "settings": {
                "sizes": plan.sizes,
                "calls": plan.calls_per_round * u64::from(plan.rounds),
                "calls_per_round": plan.calls_per_round,
                "warmup": plan.warmup,
                "rounds": plan.rounds,
                "secs": args.secs,
                "warmup_secs": args.warmup_secs,
                "concurrency": plan.concurrency,
                "timeout_ms": args.shape.timeout_ms,
                "worker_threads": runtime.worker_threads,
                "node_worker_threads": args.node_worker_threads,
                "runtime": runtime.flavor.as_str(),
                "node_runtime": args.node_runtime.unwrap_or(runtime.flavor).as_str(),
                "node_args": args.node_args,
            },
            "sizes": sizes,
            "errors": errors,
            "ok": errors == 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::ratio_stats;
    use crate::bench_cmd::phase::ratio;

    #[test]
    fn ratio_stats_skip_unknown_rounds() {
        let stats = ratio_stats(&[Some(1.2), None, Some(1.0), Some(1.5)]);
        assert_eq!(stats["per_round"], json!([1.2, null, 1.0, 1.5]));
        assert_eq!(stats["min"], json!(1.0));
        assert_eq!(stats["median"], json!(1.2));
        assert_eq!(stats["max"], json!(1.5));
        let none = ratio_stats(&[None]);
        assert_eq!(none["median"], Value::Null);
        assert_eq!(ratio(1.0, 0.0), None);
    }
}
