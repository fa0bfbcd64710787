//! Load-balanced RPC for [`ractor`] clusters: the Rust re-creation of the Elixir library
//! `rpc_load_balancer`.
//!
//! Every OS process runs one [`Node`] (a ractor_cluster `NodeServer` plus our endpoint and
//! cluster manager). Nodes serve [`RemoteFunction`]s registered on them, and any node can
//! [`call`](Node::call) or [`cast`](Node::cast) a function on another node by name, getting a
//! typed reply or a typed [`Error`] — never a hang: every call has a timeout, and the serving
//! node always replies, even when the function fails or panics.
//! Inside a function, [`CallContext::current`] gives the call's deadline and its cancellation,
//! for work that must stop when its caller gives up.
//!
//! A [`Balancer`] routes calls to "some member of balancer X": every node that starts the
//! balancer (and matches its `node_match_list`) is a member, found through a `ractor::pg` group,
//! and an [`Algorithm`] picks one per call — [`Random`], [`RoundRobin`],
//! [`WeightedRoundRobin`], [`LeastConnections`], [`PowerOfTwo`], [`PeakEwma`] (by the latency
//! each reply took), [`LoadWeighted`] (by the load each reply reported), [`HashRing`],
//! [`CallDirect`], [`LeastCpu`] (by the members' CPU readings, see [`cpu`]) or your own: an
//! algorithm builds each balancer a [`Selector`] in the [`routing`] core, which the test kit
//! (feature `testkit`) drives without a network. See the [`balancer`] module for an example,
//! [`telemetry`] for spans and metrics.
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//! use rpc_load_balancer::{FunctionError, Node, NodeConfig, RemoteFunction};
//!
//! struct Square;
//! impl RemoteFunction for Square {
//!     const NAME: &'static str = "math.square";
//!     type Args = u32;
//!     type Reply = u64;
//!     async fn call(&self, n: u32) -> Result<u64, FunctionError> {
//!         Ok(u64::from(n) * u64::from(n))
//!     }
//! }
//!
//! # #[tokio::main] async fn main() -> Result<(), rpc_load_balancer::Error> {
//! // In each process: start a node (port 0 = any free port) and register functions.
//! let node = Node::start(
//!     NodeConfig::new("worker", "127.0.0.1:0").cookie("secret").peers(Vec::<String>::new()),
//! )
//! .await?;
//! node.register(Square)?;
//!
//! // Call a function on a node by its full name, with a timeout.
//! let nine = node.call::<Square>(node.name(), 3).timeout(Duration::from_secs(1)).await?;
//! assert_eq!(nine, 9);
//! node.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # TLS
//!
//! [`NodeConfig::tls`] with a [`TlsConfig`] (certificate chain, private key and CA, as PEM
//! files or bytes) makes every session of the node mutual TLS 1.3; plaintext nodes and nodes of
//! another CA cannot connect, and the cookie still applies. See [`TlsConfig`].
//!
//! # Cargo features
//!
//! - `telemetry` (on by default): spans, events and metrics (see [`telemetry`]); off only to
//!   measure what they cost.
//! - `test-hooks` (off by default): fault injection for tests — pinned or failing CPU
//!   samplers, garbled CPU replies, another wire version, and carrying out the control
//!   requests that kill a balancer's actor or crash its Poller, and reading a remote
//!   function's failure of one set message as a lost connection (a retryable failure). The
//!   `rpclb` binary turns it on for its test flags. The hooks are hidden from these docs in
//!   every build and are not for production: turn the feature on in `[dev-dependencies]`
//!   only. The configuration reference
//!   (docs/reference/configuration.md, "Test hooks") lists them. The hooks' control requests
//!   keep their place on the wire in every build, and a node built without the feature
//!   answers them with [`Error::BadRequest`].
//! - `testkit` (off by default; for `[dev-dependencies]`): the `testkit` module — a
//!   `SelectorKit` that drives an algorithm's selector without a network, and (Unix)
//!   `testkit::cluster`: start N child node processes of your own binary
//!   or test executable on 127.0.0.1 from a test, wait for their ready lines, call them from a
//!   node of the test's own, kill, stop or pause them, all gone when the cluster is dropped
//!   (docs/how-to/testing-a-cluster.md). Adds the `libc` dependency.
//!
//! # Using ractor_cluster in your binary
//!
//! ractor_cluster turns on ractor's `cluster` feature for the whole build, so **every message
//! type of every actor in the binary** needs `#[derive(RactorMessage)]` (local-only) or
//! `#[derive(RactorClusterMessage)]`, both re-exported by `ractor_cluster`. Don't enable
//! ractor's `blanket_serde` feature: it changes the wire encoding of `Vec<u8>`.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Entry points for the fuzz target in `fuzz/` and the corpus replay test: behind the
// off-by-default `fuzzing` feature, hidden, and not part of the public API.
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod __fuzz;
pub mod algorithm;
pub mod balancer;
mod call;
pub mod control;
pub mod cpu;
mod deadline;
mod endpoint;
mod entry;
mod error;
pub mod filter;
pub mod function;
pub mod group;
mod load;
mod named;
mod node;
mod panic;
mod payload;
mod random_node;
mod retry;
pub mod routing;
pub mod telemetry;
#[cfg(any(test, feature = "testkit"))]
#[cfg_attr(docsrs, doc(cfg(feature = "testkit")))]
pub mod testkit;
mod transport;
mod wire;

pub use algorithm::{
    CallDirect, HashRing, LeastConnections, LeastCpu, LoadWeighted, PeakEwma, PowerOfTwo, Random,
    RoundRobin, WeightedRoundRobin,
};
pub use balancer::call::Call;
pub use balancer::{
    BalancedCall, BalancedCast, Balancer, BalancerActor, BalancerConfig, DrainOutcome, DrainReport,
    ForwardOutcome, ForwardedReply, Member, Members, SelectionGuard, SupervisorMsg,
};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use balancer::{FunctionFuture, FunctionService};
pub use control::{ControlReply, ControlRequest};
pub use error::{Error, ErrorCode, PayloadDirection, RemoteFailure, Unavailable};
pub use filter::NodeFilter;
pub use function::{CallContext, FunctionError, RemoteFunction};
pub use named::NamedBalancer;
pub use node::{
    ForwardedEvent, Forwarding, ForwardingEnd, Labels, Node, NodeConfig, NodeEvent, TlsConfig,
    DEFAULT_HANDSHAKE_FRAME_LIMIT, DEFAULT_MAX_DIALS_IN_FLIGHT, DEFAULT_MAX_HANDSHAKES,
    DEFAULT_MAX_PAYLOAD_BYTES, MAX_LABELS, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES,
    MAX_PAYLOAD_CAP_BYTES,
};
pub use payload::{Payload, PAYLOAD_TAIL_ROOM};
pub use random_node::{RandomNodeCall, RandomNodeCast};
pub use retry::{
    HedgeDelay, HedgePolicy, Retry, RetryBudget, RetryCount, MAX_RETRY_RATIO, MAX_RETRY_WINDOW,
    MIN_RETRY_WAIT, MIN_RETRY_WINDOW,
};
pub use routing::{
    Algorithm, Explanation, LoadReport, Locality, MemberView, OutlierEjection, Selector, SlowStart,
    SubsetScheme, Subsetting,
};
// Test hook (hidden): the twin's failures of the retryable kind (`rpclb demo --fail-kind`).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub use call::lost_reply::read_failures_as_lost_connections;
// Test hook (hidden): `rpclb node --wire-extra-field`.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub use wire::newer_fields::send_newer_wire_fields;
pub use wire::{RpcMessage, ENDPOINT_GROUP, SCOPE, WIRE_VERSION};

/// The README's code blocks, compiled as doc tests so they stay true.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The guides under `docs/` (tutorial, how-tos, reference, explanation), compiled as doc tests.
#[cfg(doctest)]
pub mod guides;
