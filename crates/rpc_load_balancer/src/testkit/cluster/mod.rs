//! Multi-process tests (feature `testkit`, Unix only): start N child nodes of your own
//! binary on 127.0.0.1 from a test, wait until they are ready, call them from a node of the
//! test's own, kill, stop or pause them, and have them all gone when the test ends.
//!
//! A process runs at most one [`Node`](crate::Node), so a test of several nodes needs
//! several processes. By default a child is the current test executable re-run to one
//! `#[ignore]`d test whose body is [`run_child`] ([`ClusterSpec::test`]); any command that
//! serves as [`serve_child`] does works too ([`ClusterSpec::command`]).
//!
//! The parent tells each child by environment variables its node name ([`ENV_NAME`]), the
//! cluster's cookie ([`ENV_COOKIE`], random per cluster, so concurrent clusters never join),
//! its listen address ([`ENV_LISTEN`], `127.0.0.1:0`) and the peers to dial ([`ENV_PEERS`]);
//! [`child_config`] reads them. A ready child prints one line on stdout, [`READY_MARKER`]
//! then its full name and real address, and the parent waits for it (30 s by default).
//!
//! What the harness guarantees ([`ChildProcess`]): children run in their own process group;
//! the parent holds each child's stdin and a child serving with [`serve_child`] exits when it
//! closes, so children end when the test process dies, even by SIGKILL; dropping a
//! [`TestCluster`] SIGKILLs and reaps every child (no zombie, no orphan); signals only ever
//! go to the harness's own children, never after they were reaped.
//!
//! ```no_run
//! use std::time::Duration;
//! use rpc_load_balancer::testkit::cluster::{run_child, ClusterError, ClusterSpec};
//! use rpc_load_balancer::{FunctionError, NodeConfig, RemoteFunction};
//!
//! /// Returns the name of the node it runs on.
//! struct WhoAmI;
//! impl RemoteFunction for WhoAmI {
//!     const NAME: &'static str = "test.who_am_i";
//!     type Args = ();
//!     type Reply = String;
//!     async fn call(&self, _: ()) -> Result<String, FunctionError> {
//!         Ok(rpc_load_balancer::Node::current().map(|n| n.name().to_string()).unwrap_or_default())
//!     }
//! }
//!
//! // The child: skipped by ordinary runs, run by the harness.
//! #[test]
//! #[ignore = "a child of the cluster tests"]
//! fn child() -> Result<(), ClusterError> {
//!     run_child(|node| async move {
//!         node.register(WhoAmI)?;
//!         Ok(())
//!     })
//! }
//!
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn three_nodes() -> Result<(), Box<dyn std::error::Error>> {
//!     let mut cluster = ClusterSpec::test("child")?.nodes(3).start().await?;
//!     let me = cluster
//!         .join(NodeConfig::new("tester", "127.0.0.1:0"), Duration::from_secs(10))
//!         .await?;
//!     for name in cluster.names() {
//!         assert_eq!(me.call::<WhoAmI>(&name, ()).await?, name);
//!     }
//!     cluster.child(1).kill().await;
//!     me.shutdown().await;
//!     Ok(()) // dropping `cluster` kills and reaps the other children
//! }
//! # fn main() {}
//! ```

mod child;
mod error;
mod node;
mod process;
mod running;
mod spec;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use child::{child_config, is_child, run_child, serve_child, SetupError};
pub use error::ClusterError;
pub use node::ChildNode;
pub use process::{ChildProcess, StderrMode};
pub use running::TestCluster;
pub use spec::ClusterSpec;

/// The environment variable holding a child's node name (e.g. `n1`).
pub const ENV_NAME: &str = "RPC_LOAD_BALANCER_TESTKIT_NAME";
/// The environment variable holding the cluster's cookie.
pub const ENV_COOKIE: &str = "RPC_LOAD_BALANCER_TESTKIT_COOKIE";
/// The environment variable holding a child's listen address (`127.0.0.1:0`).
pub const ENV_LISTEN: &str = "RPC_LOAD_BALANCER_TESTKIT_LISTEN";
/// The environment variable holding the addresses a child dials, comma-separated `ip:port`
/// (empty for `n0`).
pub const ENV_PEERS: &str = "RPC_LOAD_BALANCER_TESTKIT_PEERS";

/// What a child's ready line starts with; `name=<full name> address=<ip:port>` follow,
/// separated by spaces, e.g. `rpc_load_balancer-testkit-ready name=n1@127.0.0.1
/// address=127.0.0.1:40123`. It may follow other text on its line.
pub const READY_MARKER: &str = "rpc_load_balancer-testkit-ready";

/// How long a child may take to print its ready line by default (30 s: a debug build on a
/// loaded machine can take seconds to start).
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A fresh random cookie, `test-` and 16 hex digits, for one test's cluster.
pub fn random_cookie() -> String {
    format!("test-{:016x}", rand::random::<u64>())
}
