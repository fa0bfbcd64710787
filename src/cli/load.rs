//! `rpclb load`, and the shape of a load run that `load`, `demo` and `bench` share.

use clap::builder::PossibleValuesParser;
use clap::{ArgGroup, Args};
use rpc_load_balancer::algorithm::BUILT_IN;

use super::{ClusterArgs, LeastCpuArgs};

/// Options of a load run, shared by `rpclb load`, `rpclb demo` and `rpclb bench`.
#[derive(Debug, Clone, Args)]
pub struct LoadShape {
    /// Concurrent callers.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub concurrency: u32,
    /// Timeout of each call, in ms (≥ 1).
    #[arg(long, default_value_t = 10_000, value_parser = super::values::at_least_one)]
    pub timeout_ms: u64,
    /// Print one JSON object on stdout instead of tables (`rpclb load`: also when it fails
    /// before any call, with no calls counted and the `error` object).
    #[arg(long)]
    pub json: bool,
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
    #[command(flatten)]
    pub least_cpu: LeastCpuArgs,
    /// Demo function: whoami, echo, sleep or burn.
    #[arg(long, default_value = "whoami", value_parser = PossibleValuesParser::new(["whoami", "echo", "sleep", "burn"]))]
    pub function: String,
    /// The function's argument (text for echo, ms for sleep and burn).
    #[arg(long)]
    pub arg: Option<String>,
    /// Number of calls (≥ 1).
    #[arg(long, value_parser = super::values::at_least_one)]
    pub calls: Option<u64>,
    /// Run for this many seconds instead (> 0, at most 86,400).
    #[arg(long)]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub shape: LoadShape,
}
