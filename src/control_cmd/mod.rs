//! `rpclb control`: join the cluster as a short-lived client node, send one control request
//! to a node, print its answer.
//!
//! `request` parses the request and picks its timeout; `reply` prints the answer as text or
//! JSON, with `drain` (a balancer's stop) and `cpu` (readings, what LeastCpu routes by).

use rpc_load_balancer::{ControlReply, ControlRequest, Error};
use serde_json::json;

use crate::cli::ControlArgs;
use crate::client_cmd::{join_cluster_with, wait_for_node, CmdFailure};
use crate::CmdResult;

mod cpu;
mod drain;
mod reply;
mod request;

pub use drain::drain_json;
pub use request::{control_timeout, CONTROL_TIMEOUT, STOP_BALANCER_TIMEOUT};

use request::control_request;

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
            let text = reply::text(&reply, selection.as_deref());
            let value = reply::json(reply, selection.as_deref());
            if args.json {
                println!("{}", json!({"ok": true, "node": args.node, "reply": value}));
            } else {
                println!("{}", text.unwrap_or_else(|| reply::text_of(&value)));
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
