//! `rpclb call`: one demo-function call to a node or through a balancer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::{Balancer, Error, Node, Payload, RemoteFunction};
use serde_json::{json, Value};

use super::join::{client_balancer, join_cluster, wait_for_node};
use super::{CmdFailure, CANCEL_GRACE, INTERRUPTED_STATUS};
use crate::cli::CallArgs;
use crate::functions::{
    Blob, Burn, BytesEcho, CallWhoami, Echo, Fail, Panic, RoutedWhoami, Sleep, Whoami,
};
use crate::interrupt::Interrupt;
use crate::CmdResult;

/// Where a call goes.
enum Target<'a> {
    Node(&'a Node, &'a str),
    Balancer(&'a Balancer),
}

impl Target<'_> {
    /// Calls `F`; the reply and the node that served it.
    async fn call<F: RemoteFunction>(
        &self,
        args: F::Args,
        timeout: Duration,
    ) -> Result<(F::Reply, String), Error> {
        match self {
            Target::Node(node, name) => node
                .call::<F>(*name, args)
                .timeout(timeout)
                .await
                .map(|r| (r, name.to_string())),
            Target::Balancer(balancer) => balancer
                .call::<F>(args)
                .timeout(timeout)
                .with_node()
                .await
                .map(|(r, node): (F::Reply, Arc<str>)| (r, node.to_string())),
        }
    }
}

fn number(function: &str, arg: Option<&str>) -> Result<u64, String> {
    let arg = arg.ok_or_else(|| format!("{function} needs a number argument"))?;
    arg.parse()
        .map_err(|e| format!("{function}: {arg:?} is not a number: {e}"))
}

/// Runs one demo-function call; `Err` is a usage error, `Ok(Err)` the call's error.
async fn call_demo(
    target: &Target<'_>,
    args: &CallArgs,
) -> Result<Result<(Value, String), Error>, String> {
    let timeout = Duration::from_millis(args.timeout_ms);
    let arg = args.arg.as_deref();
    let text = || arg.unwrap_or_default().to_string();
    fn to_json<T: serde::Serialize>(
        outcome: Result<(T, String), Error>,
    ) -> Result<(Value, String), Error> {
        outcome.map(|(reply, node)| (json!(reply), node))
    }
    Ok(match args.function.as_str() {
        "echo" => to_json(target.call::<Echo>(text(), timeout).await),
        "sleep" => to_json(target.call::<Sleep>(number("sleep", arg)?, timeout).await),
        "burn" => to_json(target.call::<Burn>(number("burn", arg)?, timeout).await),
        "whoami" => to_json(target.call::<Whoami>((), timeout).await),
        "fail" => to_json(target.call::<Fail>(text(), timeout).await),
        "panic" => to_json(target.call::<Panic>(text(), timeout).await),
        "blob" => to_json(target.call::<Blob>(number("blob", arg)?, timeout).await.map(|(r, n)| (r.len(), n))),
        "call_whoami" => to_json(target.call::<CallWhoami>(text(), timeout).await),
        "routed_whoami" => to_json(target.call::<RoutedWhoami>(text(), timeout).await),
        "bytes_echo" => {
            let bytes: Payload = serde_json::from_str(arg.unwrap_or("[]")).map_err(|e| {
                format!("bytes_echo needs a JSON list of byte values, e.g. [1,2,3]: {e}")
            })?;
            to_json(target.call::<BytesEcho>(bytes, timeout).await)
        }
        other => {
            return Err(format!(
                "unknown demo function {other:?} (echo, sleep, burn, whoami, fail, panic, blob, call_whoami, routed_whoami, bytes_echo)"
            ))
        }
    })
}

/// `rpclb call`: exit status 0 with the reply, 1 with the error kind on failure (joining the
/// cluster included), 2 on usage errors. With `--json`, every outcome is one JSON line on
/// stdout; `latency_us` is null when no call was made.
///
/// On SIGINT or SIGTERM the call in flight is dropped, which sends the serving node its
/// cancellation; after [`CANCEL_GRACE`] for it to leave, the client node stops and the
/// status is 130 (with `--json`, an error of kind `interrupted`).
pub async fn call(args: CallArgs) -> CmdResult<i32> {
    let interrupt = Interrupt::listen()?;
    let joined = tokio::select! {
        joined = join_cluster(&args.cluster, &args.peer) => joined,
        () = interrupt.wait() => return Ok(call_interrupted(&args)),
    };
    let outcome = match joined {
        Ok(node) => {
            let outcome = tokio::select! {
                outcome = call_through(&node, &args) => Some(outcome),
                () = interrupt.wait() => None,
            };
            if outcome.is_none() {
                tokio::time::sleep(CANCEL_GRACE).await;
            }
            node.shutdown().await;
            match outcome {
                Some(outcome) => outcome,
                None => return Ok(call_interrupted(&args)),
            }
        }
        Err(error) => Err((error.into(), None)),
    };
    match outcome {
        Ok((reply, served_by, latency_us)) => {
            if args.json {
                let line = json!({"ok": true, "node": served_by, "balancer": args.balancer, "reply": reply, "latency_us": latency_us});
                println!("{line}");
            } else {
                let text = match &reply {
                    Value::String(text) => text.clone(),
                    Value::Null => "ok".to_string(),
                    other => other.to_string(),
                };
                println!("{text}");
            }
            Ok(0)
        }
        Err((failure, latency_us)) => {
            if args.json {
                let node = failure.node().or(args.node.as_deref());
                let line = json!({"ok": false, "node": node, "balancer": args.balancer, "error": failure.to_json(), "latency_us": latency_us});
                println!("{line}");
            }
            Ok(failure.report())
        }
    }
}

/// Reports an interrupted `rpclb call` (stderr; with `--json` one line with an error of kind
/// `interrupted`, code null) and returns [`INTERRUPTED_STATUS`].
fn call_interrupted(args: &CallArgs) -> i32 {
    eprintln!("interrupted: the call was cancelled");
    if args.json {
        let error = json!({"kind": "interrupted", "code": null,
                           "message": "interrupted: the call was cancelled", "node": null});
        let line = json!({"ok": false, "node": args.node, "balancer": args.balancer,
                          "error": error, "latency_us": null});
        println!("{line}");
    }
    INTERRUPTED_STATUS
}

/// The call of `rpclb call` from the joined `node`: the reply, the node that served it and the
/// latency in µs; or why it failed, with the latency when the call was made.
async fn call_through(
    node: &Node,
    args: &CallArgs,
) -> Result<(Value, String, u64), (CmdFailure, Option<u64>)> {
    let balancer = match &args.balancer {
        Some(name) => {
            let started = async {
                let random = rpc_load_balancer::algorithm::by_name("random")?;
                client_balancer(name, random).await
            };
            Some(started.await.map_err(|error| (error.into(), None))?)
        }
        None => None,
    };
    let target = match (&balancer, &args.node) {
        (Some(balancer), _) => Target::Balancer(balancer),
        (None, Some(name)) => {
            wait_for_node(node, name).await;
            Target::Node(node, name)
        }
        (None, None) => {
            let usage = "give --node NAME or --balancer NAME".to_string();
            return Err((CmdFailure::Usage(usage), None));
        }
    };
    let started = Instant::now();
    let outcome = call_demo(&target, args).await;
    let latency_us = started.elapsed().as_micros() as u64;
    match outcome {
        Err(usage) => Err((CmdFailure::Usage(usage), None)),
        Ok(Ok((reply, served_by))) => Ok((reply, served_by, latency_us)),
        Ok(Err(error)) => Err((error.into(), Some(latency_us))),
    }
}
