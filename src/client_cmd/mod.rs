//! `rpclb call` and `rpclb load`: join the cluster as a short-lived client
//! node, send requests, print the answers.
//!
//! `join` starts the client node (and a client-only balancer), `call` and `load` are the two
//! commands, and `failure` is how they report what went wrong (the JSON error object and the
//! exit status).

use std::time::Duration;

mod call;
mod failure;
mod join;
mod load;

pub use call::call;
pub use failure::{error_json, failure_document, CmdFailure};
pub use join::{client_balancer, join_cluster, join_cluster_sampling};
pub(crate) use join::{join_cluster_with, wait_for_node};
pub use load::{load, load_report_json};

/// How long `rpclb call` and `rpclb load`, interrupted, keep their client node up after
/// dropping their calls in flight: time for the cancellations those drops send (each a
/// message through the client node's session to the serving node) to leave before the
/// session closes. On 127.0.0.1 they leave within a millisecond.
pub const CANCEL_GRACE: Duration = Duration::from_millis(200);

/// The exit status of an interrupted `rpclb call`, `rpclb load` or `rpclb demo`: 130, as a
/// shell reports a command that SIGINT ended.
pub const INTERRUPTED_STATUS: i32 = 130;
