//! A small kit for multi-process tests and the demo: start `rpclb node` children on free
//! loopback ports, wait for them to be ready (bounded), and kill them by handle.
//!
//! * Every child listens on `127.0.0.1:0` (unless told a port) and reports its real address in
//!   its ready line.
//! * A [`Cluster`] gets a random cookie, so concurrent clusters never join each other.
//! * A child is SIGKILLed when its [`NodeProcess`] is dropped, and it exits by itself when the
//!   process that started it dies (`--exit-with-stdin`: the harness holds the child's stdin,
//!   and the kernel closes it when the harness dies), so a crashed test leaves no orphans.
//! * A child runs in its own process group: a Ctrl-C at the terminal signals the process that
//!   started it (e.g. `rpclb demo`, which then stops its children), not the children.
//!
//! [`NodeSpec`] says how to start one child and [`NodeProcess`] is the running child;
//! [`Cluster`] starts several as one cluster; [`StandIn`] members stand for other nodes in
//! single-process tests.

use std::time::Duration;

mod cluster;
mod error;
mod process;
mod spec;
mod stand_in;

pub use cluster::Cluster;
pub use error::HarnessError;
pub use process::NodeProcess;
pub use spec::NodeSpec;
pub use stand_in::{join_stand_ins, stand_in_node, StandIn};

/// How long a child may take to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A random cookie for one test's cluster.
pub fn random_cookie() -> String {
    format!("test-{:016x}", rand::random::<u64>())
}
