//! `rpclb load`: stream calls through a client-only balancer and report them.

use std::time::Duration;

use serde_json::{json, Value};

use super::join::{client_balancer, join_cluster_sampling};
use super::{CmdFailure, CANCEL_GRACE, INTERRUPTED_STATUS};
use crate::cli::LoadArgs;
use crate::interrupt::Interrupt;
use crate::{load, CmdResult};

/// `rpclb load`: exit status 0 when every call succeeded, 1 otherwise (joining the cluster or
/// starting the balancer failed, or a call failed), 2 on usage errors. With `--json` the
/// report is one JSON line on stdout; when no call could be made it has zero calls and
/// `error` says why (see [`load_report_json`]).
///
/// On SIGINT or SIGTERM the calls in flight are dropped (each sends the serving node its
/// cancellation), the client node stops after [`CANCEL_GRACE`], the report of the calls that
/// had ended is printed (`--json`: `"interrupted": true`) and the status is 130.
pub async fn load(args: LoadArgs) -> CmdResult<i32> {
    let interrupt = Interrupt::listen()?;
    match run_load(&args, &interrupt).await {
        Ok((report, interrupted)) => {
            if args.shape.json {
                let mut value = load_report_json(&args, &report, None);
                value["interrupted"] = json!(interrupted);
                println!("{value}");
            } else {
                println!("{}", report.to_table());
            }
            if interrupted {
                eprintln!(
                    "interrupted after {} calls: the calls in flight were cancelled",
                    report.calls
                );
                return Ok(INTERRUPTED_STATUS);
            }
            Ok(if report.error_count() > 0 { 1 } else { 0 })
        }
        Err(failure) => {
            if args.shape.json {
                let report = load::LoadReport {
                    algorithm: args.algorithm.clone(),
                    ..load::LoadReport::default()
                };
                let mut value = load_report_json(&args, &report, Some(&failure));
                value["interrupted"] = json!(false);
                println!("{value}");
            }
            Ok(failure.report())
        }
    }
}

/// The `--json` line of `rpclb load`: the report ([`load::LoadReport::to_json`]) with
/// `balancer`, `concurrency` and `error` — null when the run took place (its failed calls are
/// counted in `errors`), else the [`CmdFailure::to_json`] object of what stopped it before any
/// call (the report then counts no call).
pub fn load_report_json(
    args: &LoadArgs,
    report: &load::LoadReport,
    failure: Option<&CmdFailure>,
) -> Value {
    let mut value = report.to_json();
    value["balancer"] = json!(args.balancer);
    value["concurrency"] = json!(args.shape.concurrency);
    value["error"] = failure.map_or(Value::Null, CmdFailure::to_json);
    value
}

/// Longest `rpclb load --duration`, in seconds (a day).
const MAX_LOAD_SECS: f64 = 86_400.0;

/// Joins the cluster and runs the load of `rpclb load` until its amount or `interrupt`: the
/// report, and whether `interrupt` cut it (an interruption before the first call is a run of
/// zero calls).
async fn run_load(
    args: &LoadArgs,
    interrupt: &Interrupt,
) -> Result<(load::LoadReport, bool), CmdFailure> {
    let call =
        load::DemoCall::parse(&args.function, args.arg.as_deref()).map_err(CmdFailure::Usage)?;
    let amount = match (args.calls, args.duration) {
        (Some(calls), _) => load::Amount::Calls(calls),
        (None, Some(secs)) if secs > 0.0 && secs <= MAX_LOAD_SECS => {
            load::Amount::Duration(Duration::from_secs_f64(secs))
        }
        _ => {
            let usage = format!("give --calls N or --duration SECS (> 0, at most {MAX_LOAD_SECS})");
            return Err(CmdFailure::Usage(usage));
        }
    };
    // The client node samples often enough for the LeastCpu TTL it is given (it is no
    // member, so its own reading does not matter).
    let sampling = (args.algorithm == "least_cpu")
        .then(|| Duration::from_millis((args.least_cpu.cpu_cache_ttl_ms / 2).clamp(1, 1_000)));
    let cut = |algorithm: &str| {
        let report = load::LoadReport {
            algorithm: algorithm.to_string(),
            ..load::LoadReport::default()
        };
        Ok((report, true))
    };
    let node = tokio::select! {
        joined = join_cluster_sampling(&args.cluster, &args.peer, sampling) => joined?,
        () = interrupt.wait() => return cut(&args.algorithm),
    };
    let balancer = match args.least_cpu.algorithm(&args.algorithm) {
        Ok(algorithm) => tokio::select! {
            started = client_balancer(&args.balancer, algorithm) => Some(started),
            () = interrupt.wait() => None,
        },
        Err(error) => Some(Err(error)),
    };
    let balancer = match balancer {
        Some(Ok(balancer)) => balancer,
        Some(Err(error)) => {
            node.shutdown().await;
            return Err(error.into());
        }
        None => {
            node.shutdown().await;
            return cut(&args.algorithm);
        }
    };
    let timeout = Duration::from_millis(args.shape.timeout_ms);
    let (report, interrupted) = load::run_until(
        &balancer,
        &call,
        amount,
        args.shape.concurrency,
        timeout,
        !args.shape.json,
        interrupt.wait(),
    )
    .await;
    if interrupted {
        tokio::time::sleep(CANCEL_GRACE).await;
    }
    node.shutdown().await;
    Ok((report, interrupted))
}

#[cfg(test)]
mod tests {
    use rpc_load_balancer::Error;

    use super::*;
    use crate::client_cmd::error_json;

    fn load_args(extra: &[&str]) -> LoadArgs {
        use clap::Parser as _;
        let args = [
            "rpclb",
            "load",
            "--peer",
            "h:1",
            "--balancer",
            "w",
            "--json",
        ];
        match crate::cli::Cli::try_parse_from(args.iter().chain(extra)) {
            Ok(crate::cli::Cli {
                command: crate::cli::Command::Load(args),
                ..
            }) => args,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_load_that_could_not_run_keeps_the_report_shape_with_its_error() {
        let args = load_args(&["--calls", "5", "--concurrency", "3"]);
        let done = load::LoadReport {
            algorithm: "random".into(),
            ..load::LoadReport::default()
        };
        let ran = load_report_json(&args, &done, None);
        assert!(ran["error"].is_null(), "{ran}");
        let error = Error::NoMembers {
            balancer: "w".into(),
        };
        let failed = load_report_json(&args, &done, Some(&CmdFailure::from(error.clone())));
        assert_eq!(failed["error"], error_json(&error));
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&ran), keys(&failed));
        assert_eq!(
            (&failed["calls"], &failed["ok"], &failed["concurrency"]),
            (&json!(0), &json!(0), &json!(3))
        );
        assert_eq!(failed["balancer"], "w");
        assert_eq!(failed["algorithm"], "random");
    }
}
