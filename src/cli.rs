//! Command-line definitions of `rpclb` (clap). Flags and `--json` fields are a public
//! interface: add, never rename or remove.

use clap::builder::PossibleValuesParser;
use clap::{ArgGroup, Args, Parser, Subcommand};
use rpc_load_balancer::algorithm::BUILT_IN;

/// Names `--algorithm` accepts where `all` is allowed too.
fn algorithms_or_all() -> Vec<&'static str> {
    BUILT_IN.iter().copied().chain(["all"]).collect()
}

/// `rpclb`: run rpc_load_balancer cluster nodes and talk to them.
#[derive(Debug, Parser)]
#[command(name = "rpclb", version, about)]
pub struct Cli {
    /// Tokio worker threads for this process (default 1: nodes sharing few cores answer
    /// faster on one worker; CPU-heavy functions run on the blocking pool).
    #[arg(long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub worker_threads: u16,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a cluster node serving the demo functions until SIGTERM, SIGINT or SIGHUP.
    ///
    /// Prints one JSON object per line on stdout:
    /// `{"event":"ready","node":..,"listen":..,"pid":..,"balancers":[..]}`
    /// once serving, then `{"event":"node_up"|"node_down","node":..}` and finally
    /// `{"event":"stopped","node":..}`. Logs go to stderr (RUST_LOG).
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
    /// Join a cluster as a client node and send one control request (ping, nodes, functions,
    /// stats) to a node.
    Control(ControlArgs),
}

/// Options shared by every command that joins a cluster.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The cluster's shared secret.
    #[arg(long, env = "RPCLB_COOKIE", default_value = "rpclb-dev-cookie")]
    pub cookie: String,
}

/// `rpclb node`.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// Node name without host (the full name is NAME@ADVERTISE_HOST).
    #[arg(long)]
    pub name: String,
    /// Address to listen on, ip:port (port 0 = any free port, reported in the ready line).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Host other nodes dial to reach this one (default: the listen IP).
    #[arg(long)]
    pub advertise: Option<String>,
    /// A peer to dial (host:port); repeat for several. Re-dialled with backoff while down.
    #[arg(long = "peer")]
    pub peers: Vec<String>,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Added to every demo function call, in ms (test flag).
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
    /// Cap on one encoded call or reply, in bytes.
    #[arg(long, default_value_t = rpc_load_balancer::DEFAULT_MAX_PAYLOAD_BYTES)]
    pub max_payload_bytes: usize,
    /// Start a balancer of this name on the node (repeat for several), after registering the
    /// demo functions.
    #[arg(long = "balancer")]
    pub balancers: Vec<String>,
    /// The algorithm of the balancers started with --balancer.
    #[arg(long, default_value = "random", value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: String,
    /// Refuse remote admin requests (start/stop balancers, kill a LoadBalancer); by default
    /// this node accepts them from any node holding the cookie.
    #[arg(long)]
    pub no_remote_admin: bool,
    /// Exit when stdin reaches end of file (a test harness holds the pipe; when the harness
    /// dies the node exits too).
    #[arg(long)]
    pub exit_with_stdin: bool,
}

/// `rpclb call`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["node", "balancer"])))]
pub struct CallArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Full name of the node to call (e.g. a@127.0.0.1).
    #[arg(long)]
    pub node: Option<String>,
    /// Call through this balancer instead (this client is not a member).
    #[arg(long)]
    pub balancer: Option<String>,
    /// Call timeout in ms (≥ 1).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Demo function: echo, sleep, burn, whoami, fail, panic, blob or call_whoami.
    pub function: String,
    /// The function's argument (text for echo/fail/panic, ms for sleep/burn, bytes for blob,
    /// a full node name for call_whoami).
    pub arg: Option<String>,
}

/// `rpclb control`.
#[derive(Debug, Clone, Args)]
pub struct ControlArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Full name of the node to ask.
    #[arg(long)]
    pub node: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// ping, nodes, functions or stats.
    pub request: String,
}

/// Options of a load run, shared by `rpclb load` and `rpclb demo`.
#[derive(Debug, Clone, Args)]
pub struct LoadShape {
    /// Concurrent callers.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: u32,
    /// Timeout of each call, in ms (≥ 1).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
    /// Print one JSON object on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// `rpclb demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Number of `rpclb node` children.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub nodes: u32,
    /// Calls per algorithm (≥ 1).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub calls: u64,
    /// An algorithm's name, or `all`.
    #[arg(long, default_value = "all", value_parser = PossibleValuesParser::new(algorithms_or_all()))]
    pub algorithm: String,
    /// Record the library's metrics and print them (Prometheus text) at the end; with
    /// --json they are the `metrics` field.
    #[arg(long)]
    pub metrics: bool,
    #[command(flatten)]
    pub shape: LoadShape,
}

/// `rpclb load`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("amount").required(true).args(["calls", "duration"])))]
pub struct LoadArgs {
    /// Address (host:port) of any node of the cluster.
    #[arg(long)]
    pub peer: String,
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The balancer to call through (this client is not a member).
    #[arg(long)]
    pub balancer: String,
    /// Selection algorithm on this client.
    #[arg(long, default_value = "random", value_parser = PossibleValuesParser::new(BUILT_IN))]
    pub algorithm: String,
    /// Demo function: whoami, echo, sleep or burn.
    #[arg(long, default_value = "whoami", value_parser = PossibleValuesParser::new(["whoami", "echo", "sleep", "burn"]))]
    pub function: String,
    /// The function's argument (text for echo, ms for sleep and burn).
    #[arg(long)]
    pub arg: Option<String>,
    /// Number of calls (≥ 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub calls: Option<u64>,
    /// Run for this many seconds instead (> 0).
    #[arg(long)]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub shape: LoadShape,
}
