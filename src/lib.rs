//! The `rpclb` command line as a library: the demo functions (and the raw floor actor) every
//! `rpclb node` serves, the commands, the test harness that multi-process tests, `rpclb
//! demo` and `rpclb bench` use to run `rpclb node` children, and a counter of retry waits
//! for tests.

pub mod bench_cmd;
pub mod cli;
pub mod client_cmd;
pub mod control_cmd;
pub mod demo_cmd;
pub mod functions;
pub mod group_worker;
pub mod harness;
pub mod interrupt;
pub mod lab_cmd;
pub mod latency;
pub mod load;
pub mod node_cmd;
pub mod raw_floor;
pub mod retry_waits;
pub mod stop_signals;
pub mod trace_record;
pub mod twin;
pub mod work;

/// Result of a command body: any error, boxed.
pub type CmdResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The log filter when `RUST_LOG` is unset: warnings, but only errors from ractor_cluster,
/// which logs every closed session and remote actor exit at WARN (our own `node up`/`node
/// down` and handshake logs say the same at INFO).
pub const DEFAULT_LOG_FILTER: &str = "warn,ractor_cluster=error";
