//! How fast the simulator runs: simulated calls per second of wall time, per algorithm, on
//! `uniform` at 85 % (about 1.7 million calls a run) and `large` at 85 % for 0.2 s (about
//! 1.2 million calls over 1,000 members). Run it optimized:
//! `cargo run --release -p rpclb_lab --example speed`.

use std::time::Instant;

use rpc_load_balancer::algorithm;
use rpclb_lab::{run, LoadPoint, RunSpec, Scenario};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uniform = Scenario::load("uniform")?;
    let mut large = Scenario::load("large")?;
    large.warmup_s = 0.0;
    large.measure_s = 0.2;
    for scenario in [&uniform, &large] {
        for name in [
            "round_robin",
            "least_connections",
            "power_of_two",
            "least_cpu",
        ] {
            let algorithm = algorithm::by_name(name)?;
            let started = Instant::now();
            let report = run(&RunSpec {
                scenario,
                load: LoadPoint::Open { fraction: 0.85 },
                algorithm: &*algorithm,
                seed: 1,
            })?;
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "{:<8} {:<18} {:>9} calls in {:>6.2} s: {:>5.2} M calls/s",
                scenario.name,
                name,
                report.simulated_calls,
                seconds,
                report.simulated_calls as f64 / seconds / 1e6
            );
        }
    }
    Ok(())
}
