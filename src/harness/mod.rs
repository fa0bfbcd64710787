//! A small kit for multi-process tests and the demo: start `rpclb node` children on free
//! loopback ports, wait for them to be ready (bounded), and kill them by handle.
//!
//! The process mechanics are the library's test kit
//! ([`rpc_load_balancer::testkit::cluster::ChildProcess`]), as a user's tests get them:
//!
//! * Every child listens on `127.0.0.1:0` (unless told a port) and reports its real address in
//!   its ready line.
//! * A [`Cluster`] gets a random cookie, so concurrent clusters never join each other.
//! * A child is SIGKILLed and reaped when its [`NodeProcess`] is dropped, and it exits by
//!   itself when the process that started it dies (`--exit-with-stdin`: the harness holds the
//!   child's stdin, and the kernel closes it when the harness dies), so a crashed test leaves
//!   no orphans.
//! * A child runs in its own process group: a Ctrl-C at the terminal signals the process that
//!   started it (e.g. `rpclb demo`, which then stops its children), not the children.
//!
//! What is rpclb's own: [`NodeSpec`] says how to start one child (the `rpclb node` flags) and
//! [`NodeProcess`] is the running child with its JSON event lines; [`Cluster`] starts several
//! as one cluster; [`StandIn`] members stand for other nodes in single-process tests.

mod cluster;
mod process;
mod spec;
mod stand_in;

pub use cluster::Cluster;
pub use process::NodeProcess;
pub use rpc_load_balancer::testkit::cluster::{random_cookie, READY_TIMEOUT};
pub use spec::NodeSpec;
pub use stand_in::{join_stand_ins, stand_in_node, StandIn};

/// What went wrong starting or watching a child: the library test kit's error
/// ([`Spawn`](rpc_load_balancer::testkit::cluster::ClusterError::Spawn),
/// [`Exited`](rpc_load_balancer::testkit::cluster::ClusterError::Exited) with the exit status
/// and stderr tail, [`Timeout`](rpc_load_balancer::testkit::cluster::ClusterError::Timeout),
/// [`Node`](rpc_load_balancer::testkit::cluster::ClusterError::Node) for the node in this
/// process).
pub type HarnessError = rpc_load_balancer::testkit::cluster::ClusterError;
