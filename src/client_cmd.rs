//! `rpclb call` and `rpclb control`: join the cluster as a short-lived client node, send one
//! request, print the answer.

use std::time::{Duration, Instant};

use rpc_load_balancer::{ControlReply, ControlRequest, Error, Node, NodeConfig};
use serde_json::json;

use crate::cli::{CallArgs, ClusterArgs, ControlArgs};
use crate::functions::{Blob, Burn, CallWhoami, Echo, Fail, Panic, Sleep, Whoami};
use crate::CmdResult;

/// Starts a client node, connects to `peer` and waits (≤ 5 s) until `target` is connected.
async fn join(cluster: &ClusterArgs, peer: &str, target: &str) -> Result<Node, Error> {
    let name = format!("rpclb-client-{}", std::process::id());
    let node = Node::start(NodeConfig::new(name, "127.0.0.1:0").cookie(&cluster.cookie)).await?;
    node.connect(peer).await?;
    let mut nodes = node.watch_nodes();
    let seen = tokio::time::timeout(
        Duration::from_secs(5),
        nodes.wait_for(|n| n.iter().any(|m| m == target)),
    )
    .await;
    if !matches!(seen, Ok(Ok(_))) {
        tracing::warn!(%target, "target node not connected after 5 s; calling anyway");
    }
    Ok(node)
}

fn number(function: &str, arg: Option<&str>) -> Result<u64, String> {
    let arg = arg.ok_or_else(|| format!("{function} needs a number argument"))?;
    arg.parse()
        .map_err(|e| format!("{function}: {arg:?} is not a number: {e}"))
}

fn text(arg: Option<&str>) -> String {
    arg.unwrap_or_default().to_string()
}

/// Runs one demo-function call; the reply rendered as JSON.
async fn call_demo(
    node: &Node,
    args: &CallArgs,
) -> Result<Result<serde_json::Value, Error>, String> {
    let target = args.node.as_str();
    let timeout = Duration::from_millis(args.timeout_ms);
    let arg = args.arg.as_deref();
    Ok(match args.function.as_str() {
        "echo" => node.call::<Echo>(target, text(arg)).timeout(timeout).await.map(|r| json!(r)),
        "sleep" => node.call::<Sleep>(target, number("sleep", arg)?).timeout(timeout).await.map(|r| json!(r)),
        "burn" => node.call::<Burn>(target, number("burn", arg)?).timeout(timeout).await.map(|r| json!(r)),
        "whoami" => node.call::<Whoami>(target, ()).timeout(timeout).await.map(|r| json!(r)),
        "fail" => node.call::<Fail>(target, text(arg)).timeout(timeout).await.map(|r| json!(r)),
        "panic" => node.call::<Panic>(target, text(arg)).timeout(timeout).await.map(|r| json!(r)),
        "call_whoami" => node.call::<CallWhoami>(target, text(arg)).timeout(timeout).await.map(|r| json!(r)),
        "blob" => node.call::<Blob>(target, number("blob", arg)?).timeout(timeout).await.map(|r| json!(r.len())),
        other => return Err(format!("unknown demo function {other:?} (echo, sleep, burn, whoami, fail, panic, blob, call_whoami)")),
    })
}

/// The JSON form of an error: `{"kind","code","message","node"}`.
pub fn error_json(error: &Error) -> serde_json::Value {
    json!({
        "kind": error.kind(),
        "code": error.code().as_str(),
        "message": error.to_string(),
        "node": error.node(),
    })
}

/// `rpclb call`: exit status 0 with the reply, 1 with the error kind on failure, 2 on usage
/// errors.
pub async fn call(args: CallArgs) -> CmdResult<i32> {
    let node = join(&args.cluster, &args.peer, &args.node).await?;
    let started = Instant::now();
    let outcome = call_demo(&node, &args).await;
    let latency_us = started.elapsed().as_micros() as u64;
    node.shutdown().await;
    match outcome {
        Err(usage) => {
            eprintln!("error: {usage}");
            Ok(2)
        }
        Ok(Ok(reply)) => {
            if args.json {
                println!(
                    "{}",
                    json!({"ok": true, "node": args.node, "reply": reply, "latency_us": latency_us})
                );
            } else {
                println!(
                    "{}",
                    reply
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| reply.to_string())
                );
            }
            Ok(0)
        }
        Ok(Err(error)) => {
            if args.json {
                println!(
                    "{}",
                    json!({"ok": false, "node": args.node, "error": error_json(&error), "latency_us": latency_us})
                );
            }
            eprintln!("error: {}: {error}", error.kind());
            Ok(1)
        }
    }
}

/// `rpclb control`.
pub async fn control(args: ControlArgs) -> CmdResult<i32> {
    let request = match args.request.as_str() {
        "ping" => ControlRequest::Ping,
        "nodes" => ControlRequest::Nodes,
        "functions" => ControlRequest::Functions,
        "stats" => ControlRequest::Stats,
        other => {
            eprintln!("error: unknown control request {other:?} (ping, nodes, functions, stats)");
            return Ok(2);
        }
    };
    let node = join(&args.cluster, &args.peer, &args.node).await?;
    let outcome = node.control(&args.node, request).await;
    node.shutdown().await;
    match outcome {
        Ok(reply) => {
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
                other => json!({"reply": format!("{other:?}")}),
            };
            if args.json {
                println!("{}", json!({"ok": true, "node": args.node, "reply": value}));
            } else {
                println!("{value}");
            }
            Ok(0)
        }
        Err(error) => {
            if args.json {
                println!(
                    "{}",
                    json!({"ok": false, "node": args.node, "error": error_json(&error)})
                );
            }
            eprintln!("error: {}: {error}", error.kind());
            Ok(1)
        }
    }
}
