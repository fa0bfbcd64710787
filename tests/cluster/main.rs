//! Multi-process tests: every node is a real `rpclb node` OS process on 127.0.0.1, and the test
//! process joins the cluster as one more node. They run serially (nextest test group
//! `multi-process`), each in its own process, so the one-`Node`-per-process rule holds.

mod actor_group;
mod actor_pool;
mod algorithms;
mod balancer;
mod client_interrupt;
mod client_notice;
mod commands;
#[cfg(feature = "telemetry")]
mod cpu_poller;
mod cpu_sampling;
mod direct;
mod drain;
mod drain_report;
mod drain_timeout;
mod drain_under_load;
#[cfg(feature = "telemetry")]
mod dropped_calls;
mod errors;
mod filters;
mod forward;
mod forward_reply;
mod function_limits;
mod handshake;
mod heartbeat;
mod hedging;
mod hostile;
mod labels;
mod least_cpu;
mod least_cpu_options;
mod leaving;
mod lifecycle;
mod load_reports;
mod local;
mod mesh;
mod mesh_load;
mod mesh_review;
mod node_death;
mod outlier;
mod overload;
mod parent_end;
mod payload;
mod payload_calls;
mod payload_pick;
#[cfg(feature = "telemetry")]
mod prometheus;
mod pushback;
mod random_node;
mod reconnect;
mod restart;
mod retry;
mod retry_budget;
mod stop_signal;
mod subset_mesh;
#[cfg(feature = "telemetry")]
#[path = "../support/telemetry.rs"]
mod support;
#[cfg(feature = "telemetry")]
mod telemetry;
mod terminal;
mod tls;
mod tower;
#[cfg(feature = "telemetry")]
mod trace;
mod tutorial;
mod twin;
#[cfg(feature = "telemetry")]
mod twin_hedging;
mod twin_parent_death;
#[cfg(feature = "telemetry")]
mod twin_retries;
mod unauthenticated;
mod wire_fields;
mod wire_version;

use std::time::Duration;

use rpc_load_balancer::{FunctionError, RemoteFunction};

/// The `rpclb` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_rpclb");

/// Bound for a cluster to form (debug build, 2 shared cores).
pub const MESH_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the series `name` is emitted only with an option a plain balancer has not: a
/// LeastCpu Poller's, outlier ejection's, slow start's, pushback's, retries' and hedges'
/// (issue 22).
pub fn optional(name: &str) -> bool {
    [
        "rpc_load_balancer.least_cpu.",
        "rpc_load_balancer.member.",
        "rpc_load_balancer.members.",
        "rpc_load_balancer.pushback.",
        "rpc_load_balancer.retry.",
        "rpc_load_balancer.hedge.",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

/// The demo `whoami`, as a caller sees it.
pub struct Whoami;
impl RemoteFunction for Whoami {
    const NAME: &'static str = "whoami";
    type Args = ();
    type Reply = String;
    async fn call(&self, _: ()) -> Result<String, FunctionError> {
        unreachable!("only called remotely")
    }
}

pub use rpclb::functions::{Blob, CallWhoami, Echo, Fail, Panic, Sleep};
