//! A control reply as `rpclb control` prints it: one JSON object, or plain text.

use rpc_load_balancer::ControlReply;
use serde_json::{json, Value};

use super::cpu::{reading_json, readings_text, selection_json, selection_text};
use super::drain::{drain_json, drain_text};

/// What the node's LeastCpu balancers route each member by, per balancer (the answer to
/// `ControlRequest::CpuSelection`).
type Selection = [(String, Vec<(String, f64)>)];

/// Plain text of a control reply: list entries one per line, fields as `name: value`.
pub(super) fn text_of(value: &Value) -> String {
    let Some(fields) = value.as_object() else {
        return value.to_string();
    };
    let mut lines = Vec::new();
    for (name, field) in fields {
        match field {
            Value::Array(items) => lines.extend(items.iter().map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| i.to_string())
            })),
            Value::String(text) => lines.push(format!("{name}: {text}")),
            other => lines.push(format!("{name}: {other}")),
        }
    }
    lines.join("\n")
}

/// The plain text of `reply` where it has its own (CPU readings with `selection`, a drain
/// report, `done`); `None` for the others, which print [`text_of`] their [`json`].
pub(super) fn text(reply: &ControlReply, selection: Option<&Selection>) -> Option<String> {
    match reply {
        ControlReply::CpuReading(None) => Some("no reading".to_string()),
        ControlReply::CpuReading(Some(reading)) => {
            Some(format!("{:.2} %  {} ms old", reading.cpu, reading.age_ms))
        }
        ControlReply::CpuReadings(readings) => Some(
            readings_text(readings.iter().map(|(node, r)| (node.as_str(), r)))
                + &selection_text(selection.unwrap_or_default()),
        ),
        ControlReply::Done => Some("done".to_string()),
        ControlReply::Stopped(report) => Some(drain_text(report)),
        ControlReply::Labels(labels) => Some(
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// The `reply` object of `rpclb control --json` (docs/reference/rpclb.md): per request, its
/// fields; `selection` beside CPU readings (null from a node too old to say).
pub(super) fn json(reply: ControlReply, selection: Option<&Selection>) -> Value {
    match reply {
        ControlReply::Pong { node, wire_version } => {
            json!({"node": node, "wire_version": wire_version})
        }
        ControlReply::Nodes(nodes) => json!({"nodes": nodes}),
        ControlReply::Functions(functions) => json!({"functions": functions}),
        ControlReply::Stats {
            served_in_flight,
            served_total,
        } => {
            json!({"served_in_flight": served_in_flight, "served_total": served_total})
        }
        ControlReply::CpuReading(reading) => reading_json(reading.as_ref()),
        ControlReply::CpuReadings(readings) => {
            let readings: Vec<Value> = readings
                .iter()
                .map(|(node, r)| json!({"node": node, "cpu": r.cpu, "age_ms": r.age_ms}))
                .collect();
            json!({ "readings": readings, "selection": selection.map(selection_json) })
        }
        ControlReply::Done => json!({"done": true}),
        ControlReply::Labels(labels) => {
            let labels: serde_json::Map<String, Value> = labels
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect();
            json!({ "labels": labels })
        }
        ControlReply::Stopped(report) => drain_json(&report),
        other => json!({"reply": format!("{other:?}")}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_print_as_key_value_lines_and_a_json_object() {
        let reply = || {
            ControlReply::Labels(vec![
                ("version".into(), "2".into()),
                ("zone".into(), "a".into()),
            ])
        };
        assert_eq!(text(&reply(), None).as_deref(), Some("version=2\nzone=a"));
        assert_eq!(
            json(reply(), None),
            json!({"labels": {"version": "2", "zone": "a"}})
        );
        assert_eq!(
            text(&ControlReply::Labels(Vec::new()), None).as_deref(),
            Some("")
        );
    }
}
