//! `rpclb node`: a cluster node serving the demo functions (and the raw floor actor of
//! `rpclb bench`, see [`crate::raw_floor`]).

use std::time::Duration;

use rpc_load_balancer::cpu::CpuSampler;
use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig, NodeEvent};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::cli::NodeArgs;
use crate::{functions, raw_floor, CmdResult};

/// Prints one JSON event line on stdout. A closed stdout (the reader went away, e.g. `| head
/// -1`) must not stop the node: write errors are ignored.
fn emit(value: serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}").and_then(|()| out.flush());
}

/// Keeps the deliberate panics of the `panic` and `const-then-panic` test samplers off stderr
/// (each is logged as a failed sample at WARN anyway); every other panic is reported as usual.
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

/// Runs the node until SIGTERM, SIGINT or (with `--exit-with-stdin`) end of stdin.
pub async fn run(args: NodeArgs) -> CmdResult {
    let mut config = args
        .cluster
        .apply(NodeConfig::new(&args.name, &args.listen))
        .remote_admin(!args.no_remote_admin)
        .peers(args.peers.clone())
        .max_payload_bytes(args.max_payload_bytes)
        .cpu_sampler(args.cpu_sampler.clone())
        .cpu_sample_interval(Duration::from_millis(args.cpu_sample_interval_ms))
        .cpu_reply_garbage(args.cpu_reply == "garbage")
        .excluded_node_patterns(args.exclude_patterns.clone())
        .heartbeat_interval(Duration::from_millis(args.heartbeat_interval_ms))
        .heartbeat_timeout(Duration::from_millis(args.heartbeat_timeout_ms))
        .dial_backoff_max(Duration::from_millis(args.dial_backoff_max_ms))
        .reconnect_give_up(Duration::from_millis(args.reconnect_give_up_ms));
    if let Some(version) = args.wire_version {
        config = config.wire_version(version);
    }
    if let Some(host) = &args.advertise {
        config = config.advertise_host(host);
    }
    let algorithm = args.least_cpu.algorithm(&args.algorithm)?;
    let node_match_list = args.node_match_list();
    if matches!(
        args.cpu_sampler,
        CpuSampler::Panic | CpuSampler::ConstThenPanic { .. }
    ) {
        quiet_test_sampler_panics();
    }
    let node = Node::start(config).await?;
    start_burning(args.burn_threads);
    functions::register_all(&node, Duration::from_millis(args.delay_ms))?;
    // The plain ractor_cluster echo that `rpclb bench` measures our calls against.
    let raw_floor = raw_floor::start(node.name()).await?;
    for name in &args.balancers {
        let config = BalancerConfig::new(name)
            .algorithm_arc(std::sync::Arc::clone(&algorithm))
            .leave_grace(Duration::from_millis(args.leave_grace_ms))
            .drain_timeout(Duration::from_millis(args.drain_timeout_ms));
        let config = match &node_match_list {
            Some(filters) => config.node_match_list(filters.iter().cloned()),
            None => config,
        };
        Balancer::start(config).await?;
    }
    let mut events = node.events();
    emit(json!({
        "event": "ready",
        "node": node.name(),
        "listen": node.listen_addr(),
        "pid": std::process::id(),
        "balancers": args.balancers,
    }));

    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
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
                Ok(NodeEvent::Up { node }) => emit(json!({"event": "node_up", "node": node})),
                Ok(NodeEvent::Down { node }) => emit(json!({"event": "node_down", "node": node})),
                Ok(NodeEvent::Leaving { node }) => emit(json!({"event": "node_leaving", "node": node})),
                Ok(NodeEvent::Refused { node, reason }) => {
                    emit(json!({"event": "node_refused", "node": node, "reason": reason}))
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            },
            _ = term.recv() => break,
            _ = hangup.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = &mut stdin_closed => break,
        }
    }
    raw_floor.stop(None);
    node.shutdown().await;
    emit(json!({"event": "stopped", "node": node.name()}));
    Ok(())
}
