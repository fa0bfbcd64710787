//! `rpclb call` and `rpclb load`: join the cluster as a short-lived client
//! node, send requests, print the answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::{
    Algorithm, Balancer, BalancerConfig, Error, Node, NodeConfig, Payload, RemoteFunction,
};
use serde_json::{json, Value};

use crate::cli::{CallArgs, ClusterArgs, LoadArgs};
use crate::functions::{Blob, Burn, BytesEcho, CallWhoami, Echo, Fail, Panic, Sleep, Whoami};
use crate::interrupt::Interrupt;
use crate::{load, CmdResult};

/// Starts a client node and connects it to `peer`. It serves the demo functions too, so a
/// CallDirect balancer (which runs calls on the calling node) works from it.
///
/// Errors: the node's start or connect error.
pub async fn join_cluster(cluster: &ClusterArgs, peer: &str) -> Result<Node, Error> {
    join_cluster_sampling(cluster, peer, None).await
}

/// [`join_cluster`], the client node sampling its CPU every `sample_interval` (default 1 s):
/// a LeastCpu balancer's `cpu_cache_ttl` must exceed the interval of the node it runs on.
///
/// Errors: the node's start or connect error.
pub async fn join_cluster_sampling(
    cluster: &ClusterArgs,
    peer: &str,
    sample_interval: Option<Duration>,
) -> Result<Node, Error> {
    join_cluster_with(cluster, peer, |config| match sample_interval {
        Some(interval) => config.cpu_sample_interval(interval),
        None => config,
    })
    .await
}

/// [`join_cluster`], the client node's configuration changed by `configure` first.
///
/// Errors: the node's start or connect error.
pub(crate) async fn join_cluster_with(
    cluster: &ClusterArgs,
    peer: &str,
    configure: impl FnOnce(NodeConfig) -> NodeConfig,
) -> Result<Node, Error> {
    let name = format!("rpclb-client-{}", std::process::id());
    let config = configure(cluster.apply(NodeConfig::new(name, "127.0.0.1:0").client(true)));
    let node = Node::start(config).await?;
    crate::functions::register_all(&node, Duration::ZERO)?;
    if let Err(error) = node.connect(peer).await {
        node.shutdown().await;
        return Err(error);
    }
    Ok(node)
}

/// Starts a client-only balancer `name` with `algorithm` and waits (≤ 5 s) until it has
/// members and its membership has been quiet for 300 ms (the rest of the cluster connects to
/// a new node within milliseconds of the first peer).
///
/// Errors: the balancer's start error (e.g. invalid algorithm options).
pub async fn client_balancer(name: &str, algorithm: Arc<dyn Algorithm>) -> Result<Balancer, Error> {
    let config = BalancerConfig::new(name)
        .algorithm_arc(algorithm)
        .node_match_list(Vec::<String>::new());
    let balancer = Balancer::start(config).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let first = load::wait_for_members(&balancer, 1, Duration::from_secs(5)).await;
    if first.is_err() {
        tracing::warn!(balancer = %name, "no member after 5 s; calling anyway");
        return Ok(balancer);
    }
    let mut members = balancer.watch_members();
    members.mark_unchanged();
    while tokio::time::Instant::now() < deadline {
        let quiet = tokio::time::timeout(Duration::from_millis(300), members.changed()).await;
        if !matches!(quiet, Ok(Ok(()))) {
            break;
        }
    }
    Ok(balancer)
}

/// Waits until `target` is connected, or the node list has been quiet for 300 ms (the mesh
/// is complete and `target` is not in it), at most 5 s.
pub(crate) async fn wait_for_node(node: &Node, target: &str) {
    if !target.contains('@') {
        eprintln!("note: node names are full names, like {target}@127.0.0.1");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut nodes = node.watch_nodes();
    while !nodes.borrow_and_update().iter().any(|n| n == target)
        && tokio::time::Instant::now() < deadline
    {
        let quiet = tokio::time::timeout(Duration::from_millis(300), nodes.changed()).await;
        if !matches!(quiet, Ok(Ok(()))) {
            break;
        }
    }
}

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
        "bytes_echo" => {
            let bytes: Payload = serde_json::from_str(arg.unwrap_or("[]")).map_err(|e| {
                format!("bytes_echo needs a JSON list of byte values, e.g. [1,2,3]: {e}")
            })?;
            to_json(target.call::<BytesEcho>(bytes, timeout).await)
        }
        other => {
            return Err(format!(
                "unknown demo function {other:?} (echo, sleep, burn, whoami, fail, panic, blob, call_whoami, bytes_echo)"
            ))
        }
    })
}

/// The JSON form of an error: `{"kind","code","message","node"}`.
pub fn error_json(error: &Error) -> Value {
    json!({
        "kind": error.kind(),
        "code": error.code().as_str(),
        "message": error.to_string(),
        "node": error.node(),
    })
}

/// The one JSON document `demo --json` and `bench --json` print when they fail before their
/// report: `{"ok":false,"error":{"kind","code","message","node"}}` — the library's error as
/// [`error_json`] gives it (found through the harness's error too), else kind `"failed"` with
/// code and node null.
pub fn failure_document(error: &(dyn std::error::Error + 'static)) -> Value {
    let library = error.downcast_ref::<Error>().or_else(|| {
        match error.downcast_ref::<crate::harness::HarnessError>() {
            Some(crate::harness::HarnessError::Node(inner)) => Some(inner),
            _ => None,
        }
    });
    let error = match library {
        Some(error) => error_json(error),
        None => json!({"kind": "failed", "code": null, "message": error.to_string(), "node": null}),
    };
    json!({"ok": false, "error": error})
}

/// Why `call`, `control` or `load` could not do its work: the library's error (joining the
/// cluster, starting the client balancer, the call itself), or a usage error found after
/// parsing (an unknown demo function or control request, a bad argument).
#[derive(Debug)]
pub enum CmdFailure {
    /// The library's error: exit status 1.
    Error(Error),
    /// A usage error: exit status 2.
    Usage(String),
}

impl From<Error> for CmdFailure {
    fn from(error: Error) -> Self {
        Self::Error(error)
    }
}

impl CmdFailure {
    /// The JSON error object, as [`error_json`] gives it; a usage error is
    /// `{"kind":"usage","code":"bad_request","message":..,"node":null}`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Error(error) => error_json(error),
            Self::Usage(message) => json!({
                "kind": "usage",
                "code": rpc_load_balancer::ErrorCode::BadRequest.as_str(),
                "message": message,
                "node": null,
            }),
        }
    }

    /// The node the error is about, when there is one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::Error(error) => error.node(),
            Self::Usage(_) => None,
        }
    }

    /// The exit status: 1 for the library's errors, 2 for usage errors.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Error(_) => 1,
            Self::Usage(_) => 2,
        }
    }

    /// Prints `error: KIND: MESSAGE` (usage: `error: MESSAGE`) on stderr and returns the exit
    /// status.
    pub(crate) fn report(&self) -> i32 {
        match self {
            Self::Error(error) => eprintln!("error: {}: {error}", error.kind()),
            Self::Usage(usage) => eprintln!("error: {usage}"),
        }
        self.exit_code()
    }
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

/// How long `rpclb call` and `rpclb load`, interrupted, keep their client node up after
/// dropping their calls in flight: time for the cancellations those drops send (each a
/// message through the client node's session to the serving node) to leave before the
/// session closes. On 127.0.0.1 they leave within a millisecond.
pub const CANCEL_GRACE: Duration = Duration::from_millis(200);

/// The exit status of an interrupted `rpclb call`, `rpclb load` or `rpclb demo`: 130, as a
/// shell reports a command that SIGINT ended.
pub const INTERRUPTED_STATUS: i32 = 130;

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
    use super::*;

    #[test]
    fn failures_of_demo_and_bench_are_one_json_document() {
        let peers = Error::PeersNotReady {
            wanted: 3,
            connected: 2,
            timeout: std::time::Duration::from_secs(15),
        };
        let direct = failure_document(&peers);
        assert_eq!(direct["ok"], false);
        assert_eq!(direct["error"], error_json(&peers));
        let wrapped = crate::harness::HarnessError::Node(peers.clone());
        assert_eq!(failure_document(&wrapped), direct);
        let other: Box<dyn std::error::Error + Send + Sync> = "expected 3 nodes, have 2".into();
        let document = failure_document(other.as_ref());
        assert_eq!(document["error"]["kind"], "failed");
        assert_eq!(document["error"]["message"], "expected 3 nodes, have 2");
        assert!(document["error"]["code"].is_null() && document["error"]["node"].is_null());
    }

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
    fn failures_have_the_error_object_of_call_errors() {
        let error = Error::ConnectFailed {
            addr: "h:1".into(),
            reason: "wrong cookie".into(),
        };
        let failure = CmdFailure::from(error.clone());
        assert_eq!(failure.to_json(), error_json(&error));
        assert_eq!(failure.exit_code(), 1);
        let usage = CmdFailure::Usage("unknown control request".into());
        assert_eq!(
            usage.to_json(),
            json!({"kind": "usage", "code": "bad_request", "message": "unknown control request", "node": null})
        );
        assert_eq!(usage.exit_code(), 2);
        assert_eq!(usage.node(), None);
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
