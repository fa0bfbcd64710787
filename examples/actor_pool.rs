//! A ractor application over a cluster (docs/how-to/a-ractor-application.md): a pool of
//! worker actors spread over several processes, used through an actor group, and a remote
//! function used through a balancer, both owned by a supervision tree, their replies
//! forwarded into an actor's mailbox. One binary, run once per process, in three terminals:
//!
//! ```text
//! cargo run --example actor_pool -- worker worker_a 4200
//! cargo run --example actor_pool -- worker worker_b 4201 127.0.0.1:4200
//! cargo run --example actor_pool -- app app 4202 127.0.0.1:4200 12
//! ```
//!
//! The tree of a worker process:
//!
//! ```text
//! WorkerRoot ── PoolWorker × 3   (each joined to pg group `actor_pool`/`workers`)
//!            └─ balancer `stampers` (this node serves the `Stamp` function)
//! ```
//!
//! and of the app process:
//!
//! ```text
//! AppRoot ── balancer `stampers`        (Balancer::spawn_linked, workers only)
//!         ├─ actor group `workers`      (ActorGroup::spawn_linked, LeastConnections)
//!         └─ Dispatcher                 (sends the jobs, collects the replies)
//! ```
//!
//! `tests/cluster/actor_pool.rs` runs it the same way and checks what it prints.

use std::collections::BTreeMap;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use ractor_cluster::{RactorClusterMessage, RactorMessage};
use rpc_load_balancer::group::{ActorGroup, ActorGroupConfig};
use rpc_load_balancer::{
    Balancer, BalancerConfig, Error, FunctionError, LeastConnections, Node, NodeConfig, NodeFilter,
    RemoteFunction,
};
use tokio::sync::oneshot;
use tracing_subscriber::EnvFilter;

/// Every process of the cluster uses this cookie.
const COOKIE: &str = "actor-pool";
/// The pg scope and group the worker actors join (yours to choose: not the library's).
const SCOPE: &str = "actor_pool";
const GROUP: &str = "workers";
/// Worker actors per worker process.
const WORKERS_PER_NODE: usize = 3;
/// The function balancer every process starts.
const BALANCER: &str = "stampers";
/// The label that marks a worker process: the app's balancer takes only those as members.
const ROLE: (&str, &str) = ("role", "worker");
/// Bound for every call, and for the members to show up.
const TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// What crosses the network
// ---------------------------------------------------------------------------------------

/// A worker actor's message. It crosses processes, so `ractor_cluster` serializes it: every
/// field (and an `#[rpc]` variant's reply) is a type ractor can encode — numbers, `String`,
/// `Vec<u8>` and vectors of numbers.
#[derive(RactorClusterMessage)]
enum Work {
    /// Square a number; the reply is `"{square} {node}#{pid}"`: the result and who served it.
    #[rpc]
    Square(u64, RpcReplyPort<String>),
}

/// A remote function the worker processes serve: it names the node that ran it.
struct Stamp;

impl RemoteFunction for Stamp {
    const NAME: &'static str = "actor_pool.stamp";
    type Args = String;
    type Reply = String;

    async fn call(&self, from: String) -> Result<String, FunctionError> {
        let node = Node::current().map(|node| node.name().to_string());
        Ok(format!("{from} stamped by {}", node.unwrap_or_default()))
    }
}

// ---------------------------------------------------------------------------------------
// The worker process
// ---------------------------------------------------------------------------------------

/// One worker of the pool: joins the pg group in `pre_start`, so it is a member of every
/// caller's actor group as soon as it can be called.
struct PoolWorker;

impl Actor for PoolWorker {
    type Msg = Work;
    /// Its member id, `"{node}#{pid}"`: the id callers' groups give it.
    type State = String;
    type Arguments = ();

    async fn pre_start(&self, myself: ActorRef<Work>, _: ()) -> Result<String, ActorProcessingErr> {
        ractor::pg::join_scoped(SCOPE.into(), GROUP.into(), vec![myself.get_cell()]);
        let node = Node::current().ok_or("no node runs in this process")?;
        Ok(format!("{}#{}", node.name(), myself.get_id().pid()))
    }

    async fn handle(
        &self,
        _: ActorRef<Work>,
        message: Work,
        id: &mut String,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            Work::Square(n, reply) => {
                let _ = reply.send(format!("{} {id}", n * n));
            }
        }
        Ok(())
    }
}

/// The worker process's root: starts the pool and the function balancer under it. A child
/// that stops or fails stops the root (ractor's default supervision), and so the process
/// (with an error).
struct WorkerRoot;

#[derive(RactorMessage)]
enum WorkerRootMsg {}

impl Actor for WorkerRoot {
    type Msg = WorkerRootMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<WorkerRootMsg>,
        _: (),
    ) -> Result<(), ActorProcessingErr> {
        for _ in 0..WORKERS_PER_NODE {
            Actor::spawn_linked(None, PoolWorker, (), myself.get_cell()).await?;
        }
        // Starting the balancer makes this node one of its members (the node serves `Stamp`).
        Balancer::spawn_linked(BalancerConfig::new(BALANCER), myself.get_cell()).await?;
        Ok(())
    }
}

async fn run_worker(node: &Node) -> Result<(), Box<dyn std::error::Error>> {
    node.register(Stamp)?;
    let (root, mut root_done) = Actor::spawn(None, WorkerRoot, ()).await?;
    println!(
        "{} ready: {WORKERS_PER_NODE} workers in {SCOPE}/{GROUP}, listening on {}",
        node.name(),
        node.listen_addr()
    );
    // Until Ctrl-C or the end of stdin (Ctrl-D, or a parent that closes the pipe). Stdin is
    // read on a thread of its own: a read blocked in tokio's blocking pool would keep the
    // runtime, and so the process, from ending after Ctrl-C.
    let (stdin_closed, stdin_eof) = oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = stdin_closed.send(());
    });
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = stdin_eof => {}
        _ = &mut root_done => return Err("the worker's root stopped".into()),
    }
    // Stopping the root ends its children (ractor kills them): the workers leave the pg
    // group, the balancer drains its calls in flight all the same.
    root.stop(None);
    root_done.await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The app process
// ---------------------------------------------------------------------------------------

/// The dispatcher's messages. Local only (`RactorMessage`): the replies of the remote calls
/// arrive here through `forward_to`, not over the wire.
#[derive(RactorMessage)]
enum DispatcherMsg {
    /// Wait for the pool, then send every job.
    Start,
    /// Job `n`'s reply (or its error), forwarded by the actor group's call.
    Squared(u64, Result<String, Error>),
    /// The function call's reply, forwarded by the balancer's call.
    Stamped(Result<String, Error>),
}

/// Sends `jobs` jobs through the group and one call through the balancer, then collects
/// the replies from its mailbox. Stops itself once all are in; fails on a wrong reply.
struct Dispatcher;

struct DispatcherArgs {
    group: ActorGroup<Work>,
    stampers: Balancer,
    jobs: u64,
    worker_nodes: usize,
}

struct DispatcherState {
    args: DispatcherArgs,
    /// Jobs answered, per worker (`"{node}#{pid}"`).
    served: BTreeMap<String, u64>,
    answered: u64,
    stamped: bool,
}

impl Actor for Dispatcher {
    type Msg = DispatcherMsg;
    type State = DispatcherState;
    type Arguments = DispatcherArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DispatcherMsg>,
        args: DispatcherArgs,
    ) -> Result<DispatcherState, ActorProcessingErr> {
        myself.send_message(DispatcherMsg::Start)?;
        Ok(DispatcherState {
            args,
            served: BTreeMap::new(),
            answered: 0,
            stamped: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<DispatcherMsg>,
        message: DispatcherMsg,
        state: &mut DispatcherState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            DispatcherMsg::Start => {
                // Members show up as the sessions to the worker processes come up.
                let args = &state.args;
                let pool = args.worker_nodes * WORKERS_PER_NODE;
                let members = args.group.wait_for_members(pool, TIMEOUT).await?;
                let mut nodes = members.nodes();
                nodes.dedup();
                println!("pool: {} workers on {}", members.len(), nodes.join(", "));
                args.stampers
                    .wait_for_members(args.worker_nodes, TIMEOUT)
                    .await?;
                // Each call returns at once: its reply comes back as a message.
                for n in 1..=args.jobs {
                    args.group
                        .call(move |port| Work::Square(n, port))
                        .timeout(TIMEOUT)
                        .forward_to(&myself, move |reply| DispatcherMsg::Squared(n, reply));
                }
                let me = myself.get_name().unwrap_or_default();
                args.stampers
                    .call::<Stamp>(me)
                    .timeout(TIMEOUT)
                    .forward_to(&myself, DispatcherMsg::Stamped);
            }
            DispatcherMsg::Squared(n, reply) => {
                let reply = reply?;
                let (square, worker) = reply.split_once(' ').ok_or("a malformed reply")?;
                if square != (n * n).to_string() {
                    return Err(format!("job {n}: {reply:?}").into());
                }
                *state.served.entry(worker.to_string()).or_insert(0) += 1;
                state.answered += 1;
            }
            DispatcherMsg::Stamped(reply) => {
                println!("stamp: {}", reply?);
                state.stamped = true;
            }
        }
        if state.stamped && state.answered == state.args.jobs {
            for (worker, jobs) in &state.served {
                println!("{worker} served {jobs}");
            }
            println!(
                "all {} jobs answered by {} workers",
                state.answered,
                state.served.len()
            );
            myself.stop(Some("all answered".into()));
        }
        Ok(())
    }
}

/// The app's root: in `pre_start`, the balancer and the actor group (both linked under it)
/// and then the dispatcher, which gets handles to both. It reports how the dispatcher
/// ended on `done` and stops; any other child ending stops it too (with its children).
struct AppRoot;

#[derive(RactorMessage)]
enum AppRootMsg {}

struct AppRootArgs {
    jobs: u64,
    worker_nodes: usize,
    done: oneshot::Sender<Result<(), String>>,
}

impl Actor for AppRoot {
    type Msg = AppRootMsg;
    type State = Option<oneshot::Sender<Result<(), String>>>;
    type Arguments = AppRootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<AppRootMsg>,
        args: AppRootArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        // The function's balancer: only the worker processes are members (they serve `Stamp`).
        let stampers = Balancer::spawn_linked(
            BalancerConfig::new(BALANCER).node_match_list([NodeFilter::label(ROLE.0, ROLE.1)]),
            myself.get_cell(),
        )
        .await?;
        let group = ActorGroup::spawn_linked(
            ActorGroupConfig::new(SCOPE, GROUP).algorithm(LeastConnections::new()),
            myself.get_cell(),
        )
        .await?;
        let dispatcher = DispatcherArgs {
            group,
            stampers,
            jobs: args.jobs,
            worker_nodes: args.worker_nodes,
        };
        Actor::spawn_linked(
            Some("dispatcher".into()),
            Dispatcher,
            dispatcher,
            myself.get_cell(),
        )
        .await?;
        Ok(Some(args.done))
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<AppRootMsg>,
        event: SupervisionEvent,
        done: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // A child's name, else its id (the balancer's and the group's actors).
        let who = |child: &ActorCell| {
            child
                .get_name()
                .unwrap_or_else(|| child.get_id().to_string())
        };
        let outcome = match event {
            SupervisionEvent::ActorTerminated(child, _, reason) => {
                match (who(&child).as_str(), reason.as_deref()) {
                    ("dispatcher", Some("all answered")) => Ok(()),
                    (who, reason) => Err(format!("{who} stopped: {reason:?}")),
                }
            }
            SupervisionEvent::ActorFailed(child, error) => {
                Err(format!("{} failed: {error}", who(&child)))
            }
            _ => return Ok(()),
        };
        if let Some(done) = done.take() {
            let _ = done.send(outcome);
        }
        myself.stop(None);
        Ok(())
    }
}

async fn run_app(jobs: u64, worker_nodes: usize) -> Result<(), Box<dyn std::error::Error>> {
    let (done_tx, done) = oneshot::channel();
    let args = AppRootArgs {
        jobs,
        worker_nodes,
        done: done_tx,
    };
    let (_root, root_done) = Actor::spawn(None, AppRoot, args).await?;
    let outcome = done
        .await
        .unwrap_or_else(|_| Err("the root ended first".into()));
    root_done.await?;
    Ok(outcome?)
}

// ---------------------------------------------------------------------------------------

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The library's warnings on stderr; RUST_LOG sets the level (RUST_LOG=debug shows more).
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,ractor_cluster=error".into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let stderr = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    stderr.with_env_filter(EnvFilter::new(filter)).init();
    // worker NAME PORT [SEED] | app NAME PORT SEED JOBS [WORKER_NODES]
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: worker NAME PORT [SEED] | app NAME PORT SEED JOBS [WORKER_NODES]";
    let (role, name, port, seed, rest) = match args.as_slice() {
        [role, name, port, rest @ ..] => (role.as_str(), name, port, rest.first(), rest),
        _ => return Err(usage.into()),
    };

    let mut config = NodeConfig::new(name.as_str(), format!("127.0.0.1:{port}")).cookie(COOKIE);
    if let Some(seed) = seed {
        config = config.peers([seed.as_str()]);
    }
    let outcome = match (role, rest) {
        ("worker", [] | [_]) => {
            let node = Node::start(config.label(ROLE.0, ROLE.1)).await?;
            let outcome = run_worker(&node).await;
            (node, outcome)
        }
        ("app", [_, jobs, more @ ..]) if more.len() <= 1 => {
            let jobs: u64 = jobs.parse()?;
            let worker_nodes: usize = more.first().map_or(Ok(2), |n| n.parse())?;
            let node = Node::start(config).await?;
            println!("{} listening on {}", node.name(), node.listen_addr());
            let outcome = run_app(jobs, worker_nodes).await;
            (node, outcome)
        }
        _ => return Err(usage.into()),
    };
    let (node, outcome) = outcome;
    node.shutdown().await;
    println!("{} stopped", node.name());
    outcome
}
