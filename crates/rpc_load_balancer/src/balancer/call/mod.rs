//! The call pipeline: every call and cast — direct ([`Node::call`](crate::Node::call),
//! [`Node::cast`](crate::Node::cast)), routed ([`Balancer::call`](super::Balancer::call),
//! [`Balancer::cast`](super::Balancer::cast)) and random-node
//! ([`Node::call_on_random_node`](crate::Node::call_on_random_node)) — goes one way:
//!
//! 1. its builder holds one options type (`options`: timeout, retry, `call_directly`, key,
//!    tracking balancer) and a [`Target`] (a node, a balancer's selection, a random node
//!    matching a filter);
//! 2. `dispatch` checks and resolves them against the balancer's and the node's defaults, then
//!    per attempt `target` chooses where it goes — the one place that decides between a run in
//!    this process and a send — waiting in the one retry loop (`wait`) while there is nobody
//!    to send to;
//! 3. the transport (`call`) runs it here (a task that owns its drain accounting and is
//!    aborted when its caller drops it) or sends it; a routed call that could not be handed
//!    over is chosen again, at most 3 times;
//! 4. its telemetry (`telemetry`) is started once per call and records the outcome.

mod balanced;
mod direct;
pub(crate) mod dispatch;
pub(crate) mod forward_reply;
mod hedge;
pub(crate) mod options;
mod random;
mod select;
pub(crate) mod target;
mod telemetry;
pub(crate) mod wait;

pub use balanced::{BalancedCall, BalancedCast};
pub use direct::Call;
pub use forward_reply::{ForwardOutcome, ForwardedReply};
pub(crate) use target::Target;

#[cfg(test)]
mod tests;
