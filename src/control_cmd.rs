//! `rpclb control`: join the cluster as a short-lived client node, send one control request
//! to a node, print its answer.

use std::time::Duration;

use rpc_load_balancer::cpu::CpuReading;
use rpc_load_balancer::{ControlReply, ControlRequest, DrainOutcome, DrainReport, Error};
use serde_json::{json, Value};

use crate::cli::ControlArgs;
use crate::client_cmd::{join_cluster_with, wait_for_node, CmdFailure};
use crate::CmdResult;
/// Plain text of a control reply: list entries one per line, fields as `name: value`.
fn text_of(value: &Value) -> String {
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

/// The control requests `rpclb control` sends, for messages.
const CONTROL_REQUESTS: &str = "ping, nodes, functions, stats, cpu_reading, cpu_readings, \
     crash_poller BALANCER, stop_balancer BALANCER";

/// The default `rpclb control --timeout-ms` of `stop_balancer`: 60 s. The stop answers when
/// the member's drain has ended, which takes up to its drain timeout (15 s by default, `rpclb
/// node --drain-timeout-ms`): a wait four times as long reaches the `timed_out` report of a
/// default drain, and of drains set up to ~a minute, and still ends within a minute when the
/// node never answers.
pub const STOP_BALANCER_TIMEOUT: Duration = Duration::from_secs(60);

/// The default `rpclb control --timeout-ms` of every other request: 10 s, a node's default
/// call timeout (`NodeConfig::call_timeout`).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long `rpclb control` waits for the answer to `request`: `timeout_ms` when given, else
/// [`STOP_BALANCER_TIMEOUT`] for a stop of a balancer and [`CONTROL_TIMEOUT`] otherwise.
pub fn control_timeout(request: &ControlRequest, timeout_ms: Option<u64>) -> Duration {
    match (timeout_ms, request) {
        (Some(ms), _) => Duration::from_millis(ms),
        (None, ControlRequest::StopBalancerReport(_) | ControlRequest::StopBalancer(_)) => {
            STOP_BALANCER_TIMEOUT
        }
        (None, _) => CONTROL_TIMEOUT,
    }
}

/// The request `rpclb control REQUEST [ARG]` names; `Err` is a usage error.
fn control_request(request: &str, arg: Option<&str>) -> Result<ControlRequest, String> {
    let no_arg = |parsed: ControlRequest| match arg {
        None => Ok(parsed),
        Some(arg) => Err(format!("{request} takes no argument (got {arg:?})")),
    };
    match request {
        "ping" => no_arg(ControlRequest::Ping),
        "nodes" => no_arg(ControlRequest::Nodes),
        "functions" => no_arg(ControlRequest::Functions),
        "stats" => no_arg(ControlRequest::Stats),
        "cpu_reading" => no_arg(ControlRequest::CpuReading),
        "cpu_readings" => no_arg(ControlRequest::CpuReadings),
        "crash_poller" => arg
            .map(|balancer| ControlRequest::CrashPoller(balancer.to_string()))
            .ok_or_else(|| "crash_poller needs the balancer's name: crash_poller BALANCER".into()),
        "stop_balancer" => arg
            .map(|balancer| ControlRequest::StopBalancerReport(balancer.to_string()))
            .ok_or_else(|| {
                "stop_balancer needs the balancer's name: stop_balancer BALANCER".into()
            }),
        other => Err(format!(
            "unknown control request {other:?} ({CONTROL_REQUESTS})"
        )),
    }
}

/// A balancer's [`DrainReport`] as JSON: `{"balancer", "outcome", "routed_in_flight",
/// "served_in_flight", "took_ms"}`, `outcome` being `"drained"`, `"timed_out"` or `"killed"`.
pub fn drain_json(report: &DrainReport) -> Value {
    json!({
        "balancer": report.balancer,
        "outcome": outcome_name(report.outcome),
        "routed_in_flight": report.routed_in_flight,
        "served_in_flight": report.served_in_flight,
        "took_ms": report.took.as_millis() as u64,
    })
}

/// The `outcome` of [`drain_json`].
fn outcome_name(outcome: DrainOutcome) -> &'static str {
    match outcome {
        DrainOutcome::Drained => "drained",
        DrainOutcome::TimedOut => "timed_out",
        DrainOutcome::Killed => "killed",
        _ => "unknown",
    }
}

/// Plain text of a [`DrainReport`]: one line.
fn drain_text(report: &DrainReport) -> String {
    let took = report.took.as_millis();
    match report.outcome {
        DrainOutcome::Drained => format!(
            "balancer {} drained and stopped in {took} ms",
            report.balancer
        ),
        DrainOutcome::TimedOut => format!(
            "balancer {} stopped after {took} ms: the drain timed out with {} routed and {} served \
             calls still running",
            report.balancer, report.routed_in_flight, report.served_in_flight
        ),
        _ => format!(
            "balancer {} had been killed: nothing was drained",
            report.balancer
        ),
    }
}

/// A CPU reading as JSON: `{"cpu": %, "age_ms": ms}`, both null without a reading.
fn reading_json(reading: Option<&CpuReading>) -> Value {
    json!({"cpu": reading.map(|r| r.cpu), "age_ms": reading.map(|r| r.age_ms)})
}

/// Plain text of CPU readings: one `node  cpu %  age ms` line each.
fn readings_text<'a>(readings: impl IntoIterator<Item = (&'a str, &'a CpuReading)>) -> String {
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
fn selection_json(balancers: &[(String, Vec<(String, f64)>)]) -> Value {
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
fn selection_text(balancers: &[(String, Vec<(String, f64)>)]) -> String {
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

/// `rpclb control`: exit status 0 with the reply, 1 with the error kind on failure (joining
/// the cluster included), 2 on usage errors. With `--json`, every outcome is one JSON line on
/// stdout.
pub async fn control(args: ControlArgs) -> CmdResult<i32> {
    let outcome = match control_request(&args.request, args.arg.as_deref()) {
        Err(usage) => Err(CmdFailure::Usage(usage)),
        Ok(request) => match join_cluster_with(&args.cluster, &args.peer, |config| {
            config.call_timeout(control_timeout(&request, args.timeout_ms))
        })
        .await
        {
            Err(error) => Err(error.into()),
            Ok(node) => {
                wait_for_node(&node, &args.node).await;
                let first = node.control(&args.node, request.clone()).await;
                let outcome = match (first, request) {
                    // A node older than the request stopped nothing: ask it the old way (it
                    // answers `Done`, without a report).
                    (Err(Error::BadRequest { .. }), ControlRequest::StopBalancerReport(name)) => {
                        node.control(&args.node, ControlRequest::StopBalancer(name))
                            .await
                    }
                    (first, _) => first,
                };
                // Beside the raw readings, what the node's LeastCpu balancers route by (`None`
                // from a node too old to answer it).
                let selection = match &outcome {
                    Ok(ControlReply::CpuReadings(_)) => {
                        match node.control(&args.node, ControlRequest::CpuSelection).await {
                            Ok(ControlReply::CpuSelection(values)) => Some(values),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                node.shutdown().await;
                outcome
                    .map(|reply| (reply, selection))
                    .map_err(CmdFailure::from)
            }
        },
    };
    match outcome {
        Ok((reply, selection)) => {
            let text = match &reply {
                ControlReply::CpuReading(None) => Some("no reading".to_string()),
                ControlReply::CpuReading(Some(reading)) => {
                    Some(format!("{:.2} %  {} ms old", reading.cpu, reading.age_ms))
                }
                ControlReply::CpuReadings(readings) => Some(
                    readings_text(readings.iter().map(|(node, r)| (node.as_str(), r)))
                        + &selection_text(selection.as_deref().unwrap_or_default()),
                ),
                ControlReply::Done => Some("done".to_string()),
                ControlReply::Stopped(report) => Some(drain_text(report)),
                _ => None,
            };
            let value = match reply {
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
                    json!({ "readings": readings, "selection": selection.as_deref().map(selection_json) })
                }
                ControlReply::Done => json!({"done": true}),
                ControlReply::Stopped(report) => drain_json(&report),
                other => json!({"reply": format!("{other:?}")}),
            };
            if args.json {
                println!("{}", json!({"ok": true, "node": args.node, "reply": value}));
            } else {
                println!("{}", text.unwrap_or_else(|| text_of(&value)));
            }
            Ok(0)
        }
        Err(failure) => {
            if args.json {
                println!(
                    "{}",
                    json!({"ok": false, "node": args.node, "error": failure.to_json()})
                );
            }
            Ok(failure.report())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drain_report_reads_as_json_and_as_text() {
        let report = |outcome, routed, served, ms| {
            let mut report: DrainReport = serde_json::from_value(json!({
                "balancer": "work", "outcome": "Drained", "routed_in_flight": routed,
                "served_in_flight": served, "took": {"secs": 0, "nanos": 0},
            }))
            .unwrap();
            report.outcome = outcome;
            report.took = Duration::from_millis(ms);
            report
        };
        let timed_out = report(DrainOutcome::TimedOut, 1, 2, 1_500);
        assert_eq!(
            drain_json(&timed_out),
            json!({"balancer": "work", "outcome": "timed_out", "routed_in_flight": 1,
                   "served_in_flight": 2, "took_ms": 1500})
        );
        assert!(drain_text(&timed_out).contains("timed out with 1 routed and 2 served"));
        let drained = report(DrainOutcome::Drained, 0, 0, 512);
        assert_eq!(drain_json(&drained)["outcome"], "drained");
        assert_eq!(
            drain_text(&drained),
            "balancer work drained and stopped in 512 ms"
        );
        let killed = report(DrainOutcome::Killed, 0, 0, 0);
        assert_eq!(drain_json(&killed)["outcome"], "killed");
    }

    #[test]
    fn control_requests_parse_with_their_arguments() {
        assert_eq!(
            control_request("cpu_reading", None),
            Ok(ControlRequest::CpuReading)
        );
        assert_eq!(
            control_request("cpu_readings", None),
            Ok(ControlRequest::CpuReadings)
        );
        assert_eq!(
            control_request("crash_poller", Some("work")),
            Ok(ControlRequest::CrashPoller("work".into()))
        );
        assert!(control_request("crash_poller", None)
            .unwrap_err()
            .contains("BALANCER"));
        assert_eq!(
            control_request("stop_balancer", Some("work")),
            Ok(ControlRequest::StopBalancerReport("work".into()))
        );
        assert!(control_request("stop_balancer", None)
            .unwrap_err()
            .contains("BALANCER"));
        assert!(control_request("ping", Some("x"))
            .unwrap_err()
            .contains("ping takes no argument"));
        assert!(control_request("cpu", None)
            .unwrap_err()
            .contains("cpu_readings"));
    }

    #[test]
    fn control_waits_long_enough_for_a_default_drain_unless_told() {
        let stop = ControlRequest::StopBalancerReport("work".into());
        assert_eq!(control_timeout(&stop, None), Duration::from_secs(60));
        assert_eq!(
            control_timeout(&ControlRequest::StopBalancer("work".into()), None),
            Duration::from_secs(60)
        );
        // Longer than a default drain (rpclb node --drain-timeout-ms 15000) with room to spare.
        assert!(STOP_BALANCER_TIMEOUT >= 2 * Duration::from_millis(15_000));
        assert_eq!(
            control_timeout(&ControlRequest::Stats, None),
            Duration::from_secs(10)
        );
        assert_eq!(
            control_timeout(&stop, Some(1_500)),
            Duration::from_millis(1_500)
        );
        assert_eq!(
            control_timeout(&ControlRequest::Ping, Some(20)),
            Duration::from_millis(20)
        );
    }

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
