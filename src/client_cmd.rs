//! `rpclb call`, `rpclb control` and `rpclb load`: join the cluster as a short-lived client
//! node, send requests, print the answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rpc_load_balancer::cpu::CpuReading;
use rpc_load_balancer::{
    Balancer, BalancerConfig, ControlReply, ControlRequest, DrainOutcome, DrainReport, Error, Node,
    NodeConfig, Payload, RemoteFunction, SelectionAlgorithm,
};
use serde_json::{json, Value};

use crate::cli::{CallArgs, ClusterArgs, ControlArgs, LoadArgs};
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
async fn join_cluster_with(
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
pub async fn client_balancer(
    name: &str,
    algorithm: Arc<dyn SelectionAlgorithm>,
) -> Result<Balancer, Error> {
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
async fn wait_for_node(node: &Node, target: &str) {
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
    fn report(&self) -> i32 {
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
