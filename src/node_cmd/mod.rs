//! `rpclb node`: a cluster node serving the demo functions (and the raw floor actor of
//! `rpclb bench`, see [`crate::raw_floor`]).
//!
//! `events` turns the node's events into the stdout lines; `test_flags` applies the test
//! flags (the library's test hooks) or refuses them without the `test-hooks` feature.

use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerActor, BalancerConfig, Node, NodeConfig};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::sync::broadcast::error::RecvError;

use crate::cli::NodeArgs;
use crate::stop_signals::StopSignals;
use crate::{functions, raw_floor, CmdResult};

mod events;
mod test_flags;

use events::EventLines;

/// Prints one JSON event line on stdout. A closed stdout (the reader went away, e.g. `| head
/// -1`) must not stop the node: write errors are ignored.
fn emit(value: serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}").and_then(|()| out.flush());
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
        .labels(args.label_args.labels.clone())
        .heartbeat_interval(Duration::from_millis(args.heartbeat_interval_ms))
        .heartbeat_timeout(Duration::from_millis(args.heartbeat_timeout_ms))
        .dial_backoff_max(Duration::from_millis(args.dial_backoff_max_ms))
        .reconnect_give_up(Duration::from_millis(args.reconnect_give_up_ms))
        .max_dials_in_flight(args.max_dials_in_flight)
        .sparse_mesh(args.sparse_mesh);
    if let Some(cap) = args.concurrency.max_concurrent_calls {
        config = config.max_concurrent_calls(cap);
    }
    for (function, cap) in &args.concurrency.function_max_concurrent_calls {
        config = config.function_max_concurrent_calls(function, *cap);
    }
    config = test_flags::apply_test_flags(config, &args)?;
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
        test_flags::quiet_test_sampler_panics();
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
    if args.trace_record {
        crate::trace_record::install(&node)?;
    }
    // The plain ractor_cluster echo that `rpclb bench` measures our calls against.
    let raw_floor = raw_floor::start(node.name()).await?;
    let parent = match args.balancer_parent {
        true => Some(
            ractor::Actor::spawn(None, test_flags::TestParent, ())
                .await?
                .0,
        ),
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
        let config = match &args.label_args.locality {
            Some(key) => config.locality(rpc_load_balancer::Locality::label(key)),
            None => config,
        };
        let config = match args.subset_size {
            Some(size) => config.subsetting(rpc_load_balancer::routing::Subsetting::with(
                args.subset_scheme,
                usize::try_from(size).unwrap_or(usize::MAX),
            )),
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
    let workers = &args.group_workers;
    crate::group_worker::start(node.name(), &workers.scope, &workers.group, workers.count)
        .await
        .map_err(|error| format!("group workers: {error}"))?;
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
