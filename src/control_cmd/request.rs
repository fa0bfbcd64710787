//! The request `rpclb control REQUEST [ARG]` sends, and how long it waits for the answer.

use std::time::Duration;

use rpc_load_balancer::ControlRequest;

/// The control requests `rpclb control` sends, for messages.
const CONTROL_REQUESTS: &str = "ping, nodes, functions, stats, labels, cpu_reading, cpu_readings, \
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
pub(super) fn control_request(request: &str, arg: Option<&str>) -> Result<ControlRequest, String> {
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
        "labels" => no_arg(ControlRequest::Labels),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_requests_parse_with_their_arguments() {
        assert_eq!(
            control_request("cpu_reading", None),
            Ok(ControlRequest::CpuReading)
        );
        assert_eq!(control_request("labels", None), Ok(ControlRequest::Labels));
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
}
