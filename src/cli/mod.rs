//! Command-line definitions of `rpclb` (clap). Flags and `--json` fields are a public
//! interface: add, never rename or remove.
//!
//! One module per subcommand's arguments (`node`, `call`, `load`, `control`, `demo`,
//! `demo_caller`, `bench`, `lab`), and the groups several commands flatten in: `cluster`
//! (cookie and TLS), `least_cpu` (LeastCpu's options), `work` (the `work` function's) and
//! `runtime` (the global `--runtime` and `--worker-threads`). Everything is re-exported here.

use clap::{Parser, Subcommand};

mod bench;
mod call;
mod cluster;
mod control;
mod demo;
mod demo_caller;
mod lab;
mod least_cpu;
mod load;
mod node;
mod runtime;
mod values;
mod work;

pub use bench::{parse_size, BenchArgs, MAX_BENCH_PAYLOAD};
pub use call::CallArgs;
pub use cluster::{ClusterArgs, DEV_COOKIE};
pub use control::ControlArgs;
pub use demo::DemoArgs;
pub use demo_caller::DemoCallerArgs;
pub use lab::LabArgs;
pub use least_cpu::LeastCpuArgs;
pub use load::{LoadArgs, LoadShape};
pub use node::{ConcurrencyArgs, NodeArgs};
pub use runtime::{RuntimeFlavor, RuntimeSettings};
pub use work::WorkArgs;

/// `rpclb`: run rpc_load_balancer cluster nodes and talk to them.
#[derive(Debug, Parser)]
#[command(name = "rpclb", version, about)]
pub struct Cli {
    /// Tokio worker threads of a `--runtime multi-thread` process (default 1: nodes sharing
    /// few cores answer faster on one worker).
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// Tokio runtime flavor of this process: `current-thread` (the default: every task and the
    /// I/O driver on one thread; `--worker-threads` is ignored) or `multi-thread`
    /// (`--worker-threads` workers). Both keep a blocking pool for CPU-heavy work.
    /// bench/README.md compares them: on 2 shared cores current-thread served 8–22 % more calls
    /// per second at the same sequential latency, and 2 workers were slower than 1.
    #[arg(long, global = true, value_enum, default_value_t = RuntimeFlavor::CurrentThread)]
    pub runtime: RuntimeFlavor,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The process's arguments, parsed as [`Parser::parse`] does and then [checked](Self::check):
    /// on an error, clap's usage message and exit status 2.
    pub fn parse_checked() -> Self {
        let cli = Self::parse();
        if let Err(error) = cli.check() {
            error.exit();
        }
        cli
    }

    /// Checks what no single flag's parser can (e.g. how many `rpclb node --label` keys), so
    /// that the message names the flags the user typed.
    ///
    /// Errors: clap's value-validation error with the message.
    pub fn check(&self) -> Result<(), clap::Error> {
        let problem = match &self.command {
            Command::Node(args) => args.label_args.check().err(),
            _ => None,
        };
        match problem {
            Some(message) => {
                use clap::CommandFactory;
                Err(Self::command().error(clap::error::ErrorKind::ValueValidation, message))
            }
            None => Ok(()),
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a cluster node serving the demo functions until SIGTERM, SIGINT or SIGHUP.
    ///
    /// Prints one JSON object per line on stdout:
    /// `{"event":"ready","node":..,"listen":..,"pid":..,"balancers":[..],"peers":[..]}`
    /// once serving (`peers`: those already connected when it started watching), then
    /// `{"event":"node_up"|"node_down"|"node_leaving","node":..}` (one `node_up` per peer that
    /// comes up, those in `peers` included), `{"event":"node_refused","node":..,"reason":..}`,
    /// `{"event":"events_lagged","missed":N,"peers":[..]}` if it fell behind the node's events,
    /// and finally `{"event":"stopped","node":..}`. Logs go to stderr (RUST_LOG).
    Node(NodeArgs),
    /// Start a cluster of `rpclb node` children on 127.0.0.1, route calls through a balancer
    /// with each algorithm, print a table per algorithm, stop the children.
    Demo(DemoArgs),
    /// Join a cluster as a client node, make one call (to a node or through a balancer), print
    /// the reply.
    Call(CallArgs),
    /// Join a cluster as a client node and stream calls through a balancer; print calls per
    /// node, errors by kind and latency percentiles.
    Load(LoadArgs),
    /// Measure end-to-end call latency and throughput against the raw ractor_cluster floor:
    /// start 3 `rpclb node` children on 127.0.0.1, join as a 4th node, and run the cases raw,
    /// direct, balanced and local interleaved in rounds for each payload size.
    Bench(BenchArgs),
    /// Join a cluster as a client node and send one control request (ping, nodes, functions,
    /// stats, labels, cpu_reading, cpu_readings, crash_poller, stop_balancer) to a node.
    Control(ControlArgs),
    /// One caller process of `rpclb demo --scenario` (internal: the demo starts it).
    #[command(hide = true)]
    DemoCaller(DemoCallerArgs),
    /// The balancing lab: run scenarios (a cluster, its traffic and faults) in a deterministic
    /// simulation that drives each algorithm's real selector in virtual time, and print per
    /// scenario, load and algorithm the latency percentiles, error rate, goodput, members'
    /// shares and how long a faulty member kept being picked (medians over the seeds).
    Lab(LabArgs),
}
