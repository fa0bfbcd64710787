//! CPU readings (`cpu_reading`, `cpu_readings`) and what LeastCpu balancers route by, as JSON
//! and as text.

use rpc_load_balancer::cpu::CpuReading;
use serde_json::{json, Value};

/// A CPU reading as JSON: `{"cpu": %, "age_ms": ms}`, both null without a reading.
pub(super) fn reading_json(reading: Option<&CpuReading>) -> Value {
    json!({"cpu": reading.map(|r| r.cpu), "age_ms": reading.map(|r| r.age_ms)})
}

/// Plain text of CPU readings: one `node  cpu %  age ms` line each.
pub(super) fn readings_text<'a>(
    readings: impl IntoIterator<Item = (&'a str, &'a CpuReading)>,
) -> String {
    let lines: Vec<String> = readings
        .into_iter()
        .map(|(node, r)| format!("{node}  {:.2} %  {} ms old", r.cpu, r.age_ms))
        .collect();
    if lines.is_empty() {
        "no readings".into()
    } else {
        lines.join("\n")
    }
}

/// What LeastCpu balancers route by ([`ControlReply::CpuSelection`]) as JSON:
/// `[{"balancer", "members": [{"node", "cpu"}]}]`.
pub(super) fn selection_json(balancers: &[(String, Vec<(String, f64)>)]) -> Value {
    balancers
        .iter()
        .map(|(balancer, values)| {
            let members: Vec<Value> = values
                .iter()
                .map(|(node, cpu)| json!({"node": node, "cpu": cpu}))
                .collect();
            json!({"balancer": balancer, "members": members})
        })
        .collect()
}

/// Plain text of what LeastCpu balancers route by: a `balancer B routes by:` line then one
/// `  node  cpu %` line per member, each block after a newline; empty without balancers.
pub(super) fn selection_text(balancers: &[(String, Vec<(String, f64)>)]) -> String {
    balancers
        .iter()
        .map(|(balancer, values)| {
            let lines: Vec<String> = values
                .iter()
                .map(|(node, cpu)| format!("  {node}  {cpu:.2} %"))
                .collect();
            format!(
                "\nbalancer {balancer} routes by (missing or stale = 50):\n{}",
                lines.join("\n")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_selection_prints_each_balancers_values() {
        let values = vec![(
            "work".to_string(),
            vec![("a@h".to_string(), 50.0), ("b@h".to_string(), 12.5)],
        )];
        assert_eq!(
            selection_json(&values),
            json!([{"balancer": "work", "members": [{"node": "a@h", "cpu": 50.0}, {"node": "b@h", "cpu": 12.5}]}])
        );
        assert_eq!(
            selection_text(&values),
            "\nbalancer work routes by (missing or stale = 50):\n  a@h  50.00 %\n  b@h  12.50 %"
        );
        assert_eq!(selection_text(&[]), "");
        assert_eq!(selection_json(&[]), json!([]));
    }

    #[test]
    fn readings_print_as_json_and_text() {
        let reading = CpuReading {
            cpu: 12.5,
            age_ms: 300,
        };
        assert_eq!(
            reading_json(Some(&reading)),
            json!({"cpu": 12.5, "age_ms": 300})
        );
        assert_eq!(reading_json(None), json!({"cpu": null, "age_ms": null}));
        assert_eq!(
            readings_text([("a@h", &reading)]),
            "a@h  12.50 %  300 ms old"
        );
        assert_eq!(readings_text([]), "no readings");
    }
}
