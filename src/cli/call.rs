//! `rpclb call`: one call to a node or through a balancer.

use clap::{ArgGroup, Args};

use super::ClusterArgs;

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
    #[arg(long, default_value_t = 10_000, value_parser = super::values::at_least_one)]
    pub timeout_ms: u64,
    /// Print one JSON object instead of text: `{"ok":true,"node":..,"balancer":..,"reply":..,
    /// "latency_us":..}`, or on any failure (joining the cluster, a usage error, the call)
    /// `{"ok":false,"node":..,"balancer":..,"error":{"kind","code","message","node"},
    /// "latency_us":..}` (`latency_us` null when no call was made; kind `usage` for a usage
    /// error, exit status 2).
    #[arg(long)]
    pub json: bool,
    /// Demo function: echo, sleep, burn, whoami, fail, panic, blob, call_whoami, routed_whoami
    /// or bytes_echo.
    pub function: String,
    /// The function's argument (text for echo/fail/panic, ms for sleep/burn, bytes for blob,
    /// a full node name for call_whoami; a balancer name for routed_whoami; a JSON list of byte
    /// values for bytes_echo).
    pub arg: Option<String>,
}
