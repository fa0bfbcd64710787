//! Pictures of a scenario's runs as SVG (plotters' SVG backend; text as `<text>` elements, so
//! no font file is needed): each algorithm's latency distribution, and for a scenario with a
//! faulty member that changes over time, that member's share of the calls over time.

use plotters::prelude::*;

use crate::report::RunReport;

/// Width and height of one panel, px.
const PANEL: (u32, u32) = (960, 420);

/// The x position of quantile `q` on the "nines" scale: 0.9 → 1, 0.99 → 2, 0.999 → 3 (capped
/// at 4.5 for the maximum).
fn nines(q: f64) -> f64 {
    if q >= 1.0 {
        4.5
    } else {
        (-libm::log10(1.0 - q)).min(4.5)
    }
}

/// One SVG document for `runs` (one run per algorithm, of one scenario and load; the first
/// run names them): the latency distribution of each, and with `faulty` the faulty member's
/// share per time bucket.
///
/// Errors: plotters' drawing error, as text (none is expected for finite inputs).
pub fn picture(title: &str, runs: &[&RunReport], faulty: Option<usize>) -> Result<String, String> {
    let over_time = faulty.filter(|_| runs.iter().any(|r| r.share_over_time.is_some()));
    let height = if over_time.is_some() {
        PANEL.1 * 2
    } else {
        PANEL.1
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PANEL.0, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let (top, bottom) = root.split_vertically(PANEL.1);
        let (lo, hi) = runs
            .iter()
            .flat_map(|r| r.latency_quantiles_ms.iter().map(|p| p[1]))
            .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (lo, hi) = if hi > 0.0 {
            ((lo * 0.8).max(1e-3), hi * 1.25)
        } else {
            (1e-3, 1.0)
        };
        let mut chart = ChartBuilder::on(&top)
            .caption(format!("{title}: latency distribution"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..4.5, (lo..hi).log_scale())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("percentile: 1 = p90, 2 = p99, 3 = p99.9, 4 = p99.99, 4.5 = max")
            .y_desc("latency, ms")
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, run) in runs.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = run
                .latency_quantiles_ms
                .iter()
                .map(|p| (nines(p[0]), p[1].max(lo)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(run.algorithm.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        if let Some(member) = over_time {
            let buckets = runs
                .iter()
                .filter_map(|r| r.share_over_time.as_ref())
                .map(|o| o.shares.len())
                .max()
                .unwrap_or(1);
            let bucket_s = runs
                .iter()
                .find_map(|r| r.share_over_time.as_ref())
                .map_or(1.0, |o| o.bucket_s);
            let mut chart = ChartBuilder::on(&bottom)
                .caption(
                    format!("{title}: member {member}'s share of the calls"),
                    ("sans-serif", 18),
                )
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d(0f64..(buckets as f64 * bucket_s), 0f64..100.0)
                .map_err(|e| e.to_string())?;
            chart
                .configure_mesh()
                .x_desc("s into the measured window")
                .y_desc("share, %")
                .draw()
                .map_err(|e| e.to_string())?;
            for (i, run) in runs.iter().enumerate() {
                let Some(o) = &run.share_over_time else {
                    continue;
                };
                let color = Palette99::pick(i).to_rgba();
                let points: Vec<(f64, f64)> = o
                    .shares
                    .iter()
                    .enumerate()
                    .map(|(b, shares)| {
                        (
                            (b as f64 + 0.5) * o.bucket_s,
                            shares.get(member).copied().unwrap_or(0.0) * 100.0,
                        )
                    })
                    .collect();
                chart
                    .draw_series(LineSeries::new(points, color.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label(run.algorithm.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{run, LoadPoint, RunSpec, Scenario};

    #[test]
    fn a_picture_has_a_line_and_a_label_per_algorithm_and_needs_no_font() {
        let mut scenario = Scenario::load("paused-member").unwrap();
        scenario.warmup_s = 1.0;
        scenario.measure_s = 3.0;
        for event in &mut scenario.event {
            event.at_s = 2.0;
        }
        let algorithms = [
            &rpc_load_balancer::RoundRobin::new() as &dyn rpc_load_balancer::Algorithm,
            &rpc_load_balancer::LeastConnections::new(),
        ];
        let runs: Vec<RunReport> = algorithms
            .iter()
            .map(|a| {
                run(&RunSpec {
                    scenario: &scenario,
                    load: LoadPoint::Open { fraction: 0.5 },
                    algorithm: *a,
                    seed: 1,
                })
                .unwrap()
            })
            .collect();
        let refs: Vec<&RunReport> = runs.iter().collect();
        let svg = picture("paused-member open 50%", &refs, runs[0].faulty_member).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for name in ["round_robin", "least_connections", "share of the calls"] {
            assert!(svg.contains(name), "{name}");
        }
        assert!(svg.matches("<polyline").count() >= 4, "two lines per panel");
    }
}
