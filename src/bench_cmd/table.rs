//! `rpclb bench`'s text report: a table per payload size and phase.

use std::fmt::Write as _;

use super::case::{Case, RATIOS};
use super::json::ratio_stats;
use super::measure::Report;
use super::phase::Phase;
use crate::cli::RuntimeFlavor;

/// `100 B`, `1 KiB`, `64 KiB`, `1.5 KiB`.
pub(super) fn size_label(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b if b >= 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// How a report names a runtime: "current-thread" or "multi-thread, N worker(s)".
fn describe(flavor: RuntimeFlavor, worker_threads: u16) -> String {
    match flavor {
        RuntimeFlavor::CurrentThread => flavor.as_str().to_string(),
        RuntimeFlavor::MultiThread => format!("{}, {worker_threads} worker(s)", flavor.as_str()),
    }
}

impl Phase {
    /// The phase as a text table: one line per case, then the ratios.
    pub(super) fn to_table(&self, title: &str) -> String {
        let mut out = format!("{title}\n");
        let _ = writeln!(
            out,
            "  {:<12} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10} {:>7}",
            "case", "calls", "p50 µs", "p90 µs", "p99 µs", "max µs", "calls/s", "errors"
        );
        for (i, case) in Case::ALL.iter().enumerate() {
            let r = &self.totals[i];
            let label = format!("{} {}", case.letter(), case.name());
            let _ = writeln!(
                out,
                "  {label:<12} {:>9} {:>8} {:>8} {:>8} {:>8} {:>10.0} {:>7}",
                r.calls,
                r.percentile_us(50.0),
                r.percentile_us(90.0),
                r.percentile_us(99.0),
                r.latency.max_us(),
                r.calls_per_sec(),
                r.error_count()
            );
            for (kind, message) in &r.error_samples {
                let _ = writeln!(out, "    {kind}: e.g. {message}");
            }
        }
        let show = |ratios: Vec<Option<f64>>| {
            let known: Vec<f64> = ratios.iter().flatten().copied().collect();
            let min = known.iter().copied().fold(f64::INFINITY, f64::min);
            let max = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let stats = ratio_stats(&ratios);
            match stats["median"].as_f64() {
                Some(median) => format!("{median:.2} ({min:.2}–{max:.2})"),
                None => "—".to_string(),
            }
        };
        for (name, case) in RATIOS {
            let _ = writeln!(
                out,
                "  {:<18} p50 {}, p99 {}, calls/s {}",
                name.replace("_over_", "/"),
                show(self.ratios(case, |f| f.p50)),
                show(self.ratios(case, |f| f.p99)),
                show(self.ratios(case, |f| f.calls_per_sec)),
            );
        }
        out.push_str("  (ratios: median of the per-round ratios, min–max in brackets)\n");
        out
    }
}

impl Report<'_> {
    /// Prints the report as text on stdout: a header, then two tables (sequential,
    /// throughput) per payload size.
    pub(super) fn print_tables(&self) {
        let Report {
            node,
            names,
            args,
            runtime,
            plan,
            results,
            errors,
            ..
        } = *self;
        println!(
            "rpclb bench: {} → {}, {} (children: {}, this node: {})",
            node.name(),
            names[0],
            names[1],
            describe(
                args.node_runtime.unwrap_or(runtime.flavor),
                args.node_worker_threads
            ),
            describe(runtime.flavor, runtime.worker_threads),
        );
        println!("cases: a raw = ractor_cluster RPC, one task per call (the floor); b direct = Node::call; c balanced = RoundRobin over the 2 targets; d local = balancer served by this node\n");
        for r in results {
            let label = size_label(r.bytes);
            let sequential = format!(
                "{label}, sequential: {} timed calls per case in {} rounds (after {} warm-up)",
                plan.calls_per_round * u64::from(plan.rounds),
                plan.rounds,
                plan.warmup
            );
            println!("{}", r.sequential.to_table(&sequential));
            let throughput = format!(
                    "{label}, throughput: {} callers, {:.1} s per case in {} rounds (after {:.1} s warm-up)",
                    plan.concurrency, args.secs, plan.rounds, args.warmup_secs
                );
            println!("{}", r.throughput.to_table(&throughput));
        }
        if errors > 0 {
            println!("{errors} calls failed (warm-up included)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::size_label;

    #[test]
    fn sizes_are_labelled() {
        assert_eq!(size_label(100), "100 B");
        assert_eq!(size_label(1024), "1 KiB");
        assert_eq!(size_label(65536), "64 KiB");
        assert_eq!(size_label(1536), "1.5 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
    }
}
