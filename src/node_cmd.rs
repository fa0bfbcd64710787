//! `rpclb node`: a cluster node serving the demo functions (and the raw floor actor of
//! `rpclb bench`, see [`crate::raw_floor`]).

use std::collections::HashSet;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerActor, BalancerConfig, Node, NodeConfig, NodeEvent};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::sync::broadcast::error::RecvError;

use crate::cli::NodeArgs;
use crate::stop_signals::StopSignals;
use crate::{functions, raw_floor, CmdResult};

/// Prints one JSON event line on stdout. A closed stdout (the reader went away, e.g. `| head
/// -1`) must not stop the node: write errors are ignored.
fn emit(value: serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}").and_then(|()| out.flush());
}

/// The test flags `--cpu-reply`, `--wire-version` and `--wire-extra-field` (the library's test
/// hooks).
#[cfg(feature = "test-hooks")]
fn apply_test_flags(config: NodeConfig, args: &NodeArgs) -> CmdResult<NodeConfig> {
    let config = config
        .cpu_reply_garbage(args.cpu_reply == "garbage")
        .cpu_reply_error(args.cpu_reply == "error");
    rpc_load_balancer::send_newer_wire_fields(args.wire_extra_field);
    Ok(match args.wire_version {
        Some(version) => config.wire_version(version),
        None => config,
    })
}

/// Without the `test-hooks` feature the test flags `--cpu-reply`, `--wire-version`,
/// `--wire-extra-field` and `--balancer-parent` are refused (the node does not start) rather
/// than ignored.
#[cfg(not(feature = "test-hooks"))]
fn apply_test_flags(config: NodeConfig, args: &NodeArgs) -> CmdResult<NodeConfig> {
    if args.cpu_reply != "normal"
        || args.wire_version.is_some()
        || args.wire_extra_field
        || args.balancer_parent
    {
        return Err(
            "--cpu-reply, --wire-version, --wire-extra-field and --balancer-parent are test \
             flags: this rpclb was built without its `test-hooks` feature"
                .into(),
        );
    }
    Ok(config)
}

/// The parent of `--balancer-parent`: an app's supervisor whose `post_stop` is empty, so it
/// stops (or is killed) without stopping its balancers; the test hook
/// `ControlRequest::EndBalancerParent` ends it.
struct TestParent;

impl ractor::Actor for TestParent {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _: ractor::ActorRef<()>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

/// Keeps the deliberate panics of the `panic` and `const-then-panic` test samplers off stderr
/// (each is logged as a failed sample at WARN anyway); every other panic is reported as usual.
#[cfg(feature = "test-hooks")]
fn quiet_test_sampler_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        let deliberate = message.starts_with("the `panic` test sampler")
            || message.starts_with("the `const-then-panic` test sampler");
        if !deliberate {
            report(info);
        }
    }));
}

/// Starts `threads` OS threads that spin for the rest of the process's life (`--burn-threads`).
/// They run at normal priority, so they load the CPU even when other processes want it; the
/// node's own threads, mostly asleep, still get scheduled promptly when they wake.
fn start_burning(threads: u32) {
    for i in 0..threads {
        let spawned = std::thread::Builder::new()
            .name(format!("rpclb-burn-{i}"))
            .spawn(|| loop {
                std::hint::spin_loop();
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start a burn thread");
        }
    }
}

/// Turns the node's events into stdout lines, so that every peer that comes up gets one
/// `node_up` line — also those already connected when the node subscribed to its events.
#[derive(Debug, Default)]
struct EventLines {
    /// Peers reported from the node list at subscription whose `Up` may still come through
    /// the events (a peer that came up while the node subscribed): that `Up` is not reported
    /// again. A peer leaves the set at its first event.
    reported_at_start: HashSet<String>,
}

impl EventLines {
    /// Starts with `peers`, the peers connected when the node subscribed; returns a `node_up`
    /// line for each of them.
    fn new(peers: &[String]) -> (Self, Vec<Value>) {
        let lines = peers
            .iter()
            .map(|node| node_line("node_up", node))
            .collect();
        let reported_at_start = peers.iter().cloned().collect();
        (Self { reported_at_start }, lines)
    }

    /// The line of `event`, if it is reported: `node_up`, `node_down`, `node_leaving` or
    /// `node_refused`.
    fn event(&mut self, event: NodeEvent) -> Option<Value> {
        match event {
            NodeEvent::Up { node } if self.reported_at_start.remove(&node) => None,
            NodeEvent::Up { node } => Some(node_line("node_up", &node)),
            NodeEvent::Down { node } => {
                self.reported_at_start.remove(&node);
                Some(node_line("node_down", &node))
            }
            NodeEvent::Leaving { node } => Some(node_line("node_leaving", &node)),
            NodeEvent::Refused { node, reason } => {
                self.reported_at_start.remove(&node);
                Some(json!({"event": "node_refused", "node": node, "reason": reason}))
            }
            _ => None,
        }
    }

    /// The line saying `missed` events were dropped (this reader fell behind the node's event
    /// buffer), with `peers`, the peers connected now, to resynchronise from:
    /// `{"event":"events_lagged","missed":N,"peers":[..]}`.
    fn lagged(&mut self, missed: u64, peers: Vec<String>) -> Value {
        // A dropped `Down` would otherwise hide the `Up` of the peer's return.
        self.reported_at_start.clear();
        json!({"event": "events_lagged", "missed": missed, "peers": peers})
    }
}

/// `{"event": event, "node": node}`.
fn node_line(event: &str, node: &str) -> Value {
    json!({"event": event, "node": node})
}

/// Runs the node until SIGTERM, SIGINT, SIGHUP or (with `--exit-with-stdin`) end of stdin, then
/// drains it; a second signal during the drain exits at once (status 130), except the first
/// signal repeated within [`REPEAT_WINDOW`](crate::stop_signals::REPEAT_WINDOW) (100 ms),
/// which is the same request.
pub async fn run(args: NodeArgs) -> CmdResult {
    args.cluster.warn_if_dev_cookie();
    let mut config = args
        .cluster
        .apply(NodeConfig::new(&args.name, &args.listen))
        .remote_admin(!args.no_remote_admin)
        .peers(args.peers.clone())
        .max_payload_bytes(args.max_payload_bytes)
        .cpu_sampler(args.cpu_sampler.clone())
        .cpu_sample_interval(Duration::from_millis(args.cpu_sample_interval_ms))
        .excluded_node_patterns(args.exclude_patterns.clone())
        .heartbeat_interval(Duration::from_millis(args.heartbeat_interval_ms))
        .heartbeat_timeout(Duration::from_millis(args.heartbeat_timeout_ms))
        .dial_backoff_max(Duration::from_millis(args.dial_backoff_max_ms))
        .reconnect_give_up(Duration::from_millis(args.reconnect_give_up_ms));
    config = apply_test_flags(config, &args)?;
    let work = crate::work::Work::new(args.work.settings())?;
    if args.work.cpu_from_work {
        let work = std::sync::Arc::clone(&work);
        config = config.cpu_sampler(rpc_load_balancer::cpu::CpuSampler::custom(move || {
            work.utilization_percent()
        }));
    }
    if let Some(host) = &args.advertise {
        config = config.advertise_host(host);
    }
    let algorithm = args.least_cpu.algorithm(&args.algorithm)?;
    let node_match_list = args.node_match_list();
    #[cfg(feature = "test-hooks")]
    if matches!(
        args.cpu_sampler,
        rpc_load_balancer::cpu::CpuSampler::Panic
            | rpc_load_balancer::cpu::CpuSampler::ConstThenPanic { .. }
    ) {
        quiet_test_sampler_panics();
    }
    let node = Node::start(config).await?;
    // Subscribe before anything else, then list who is already connected: the node list is
    // updated before a peer's `Up` is sent, so every peer is in that list or has its `Up`
    // come through `events` (or both, which `EventLines` reports once).
    let mut events = node.events();
    let peers_at_start = node.nodes();
    start_burning(args.burn_threads);
    functions::register_all(&node, Duration::from_millis(args.delay_ms))?;
    crate::work::register(&node, &work)?;
    // The plain ractor_cluster echo that `rpclb bench` measures our calls against.
    let raw_floor = raw_floor::start(node.name()).await?;
    let parent = match args.balancer_parent {
        true => Some(ractor::Actor::spawn(None, TestParent, ()).await?.0),
        false => None,
    };
    // One instance serves every balancer: the built-ins keep each balancer's ring, cycle,
    // rotation and CPU slots apart.
    for name in &args.balancers {
        let config = BalancerConfig::new(name)
            .algorithm_arc(std::sync::Arc::clone(&algorithm))
            .leave_grace(Duration::from_millis(args.leave_grace_ms))
            .drain_timeout(Duration::from_millis(args.drain_timeout_ms));
        let config = match &node_match_list {
            Some(filters) => config.node_match_list(filters.iter().cloned()),
            None => config,
        };
        match &parent {
            // The ractor way: the balancer's actor linked under the parent.
            Some(parent) => {
                let (actor, _) =
                    ractor::Actor::spawn_linked(None, BalancerActor, config, parent.get_cell())
                        .await
                        .map_err(|error| format!("balancer {name}: {error}"))?;
                Balancer::from_actor(&actor)?;
            }
            None => {
                Balancer::start(config).await?;
            }
        }
    }
    // Listening before `ready`: a stop signal sent as soon as it is printed is a stop request.
    let mut signals = StopSignals::listen()?;
    emit(json!({
        "event": "ready",
        "node": node.name(),
        "listen": node.listen_addr(),
        "pid": std::process::id(),
        "balancers": args.balancers,
        "peers": peers_at_start,
    }));
    let (mut lines, startup) = EventLines::new(&peers_at_start);
    startup.into_iter().for_each(emit);

    let stdin_closed = async {
        if !args.exit_with_stdin {
            return std::future::pending::<()>().await;
        }
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 256];
        while let Ok(n) = stdin.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::pin!(stdin_closed);
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Ok(event) => {
                    if let Some(line) = lines.event(event) {
                        emit(line);
                    }
                }
                Err(RecvError::Lagged(missed)) => emit(lines.lagged(missed, node.nodes())),
                Err(RecvError::Closed) => break,
            },
            _ = signals.request() => break,
            _ = &mut stdin_closed => break,
        }
    }
    raw_floor.stop(None);
    // A second SIGTERM, SIGINT or SIGHUP during the drain gives up on it: the calls still
    // running are lost, as with SIGKILL, but the exit is reported. The same signal again
    // within `REPEAT_WINDOW` is the first request repeated (e.g. by `timeout`), not a second.
    let shutdown = node.shutdown();
    tokio::pin!(shutdown);
    let drains = tokio::select! {
        drains = &mut shutdown => drains,
        _ = signals.request() => abandon_drain(&node),
    };
    let drains: Vec<Value> = drains.iter().map(crate::control_cmd::drain_json).collect();
    emit(json!({"event": "stopped", "node": node.name(), "drains": drains}));
    Ok(())
}

/// Exits at once with status 130 after a second signal, saying so.
fn abandon_drain(node: &rpc_load_balancer::Node) -> ! {
    emit(json!({"event": "drain_abandoned", "node": node.name()}));
    std::process::exit(130)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(node: &str) -> NodeEvent {
        NodeEvent::Up { node: node.into() }
    }

    fn down(node: &str) -> NodeEvent {
        NodeEvent::Down { node: node.into() }
    }

    #[test]
    fn peers_connected_before_subscribing_are_reported_once() {
        let (mut lines, startup) = EventLines::new(&["a@h".to_string(), "b@h".to_string()]);
        assert_eq!(
            startup,
            [
                json!({"event": "node_up", "node": "a@h"}),
                json!({"event": "node_up", "node": "b@h"})
            ]
        );
        // a's `Up` raced the subscription: already reported.
        assert_eq!(lines.event(up("a@h")), None);
        assert_eq!(
            lines.event(up("c@h")),
            Some(json!({"event": "node_up", "node": "c@h"}))
        );
        // b goes down and comes back: both reported.
        assert_eq!(
            lines.event(down("b@h")),
            Some(json!({"event": "node_down", "node": "b@h"}))
        );
        assert_eq!(
            lines.event(up("b@h")),
            Some(json!({"event": "node_up", "node": "b@h"}))
        );
        // a, too, once it has had its first event.
        assert_eq!(
            lines.event(up("a@h")),
            Some(json!({"event": "node_up", "node": "a@h"}))
        );
    }

    #[tokio::test]
    async fn a_lagging_reader_says_how_many_events_it_missed() {
        let (events, mut received) = tokio::sync::broadcast::channel(2);
        for i in 0..5 {
            events.send(up(&format!("n{i}@h"))).unwrap();
        }
        let (mut lines, _) = EventLines::new(&["n0@h".to_string()]);
        let missed = match received.recv().await {
            Err(RecvError::Lagged(missed)) => missed,
            other => panic!("expected a lag, got {other:?}"),
        };
        assert_eq!(
            lines.lagged(missed, vec!["n0@h".into(), "n3@h".into()]),
            json!({"event": "events_lagged", "missed": 3, "peers": ["n0@h", "n3@h"]})
        );
        // After a lag nothing is assumed reported: n0's `Up` is printed.
        assert_eq!(
            lines.event(up("n0@h")),
            Some(json!({"event": "node_up", "node": "n0@h"}))
        );
        assert_eq!(
            lines.event(received.recv().await.unwrap()),
            Some(json!({"event": "node_up", "node": "n3@h"}))
        );
    }
}
