//! The RpcEndpoint actor: serves calls, casts and control requests addressed to this node.
//!
//! It **always replies** to a call: an unknown function or undecodable arguments give
//! `BadRequest`, a returned error gives `Failed`, a panic is caught and gives `Panicked` (the
//! node keeps serving), a reply over the payload cap gives `PayloadTooLarge`, another wire
//! version gives `WireVersion`. Without this a caller could only wait out its timeout, because
//! ractor_cluster drops messages it cannot decode and says nothing.
//!
//! Each call runs on its own tokio task, so a slow function never holds up the mailbox; the
//! task ends at the caller's deadline, when nobody waits for the answer any more. The function
//! sees that deadline and its cancellation through its [`CallContext`] (a task-local).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};

use crate::control::{ControlReply, ControlRequest, CpuReading};
use crate::function::{CallContext, Signal};
use crate::node::shared::NodeShared;
// Re-exported for `cpu::sampler` (which names it here).
use crate::panic::panic_message;
use crate::wire::header::decode_call;
use crate::wire::reply::{self, ReplyStatus};
use crate::wire::{split_version, DecodeError, RpcMessage, ENDPOINT_GROUP, SCOPE};

/// Serves this node's registered functions. One per node, named
/// `rpc_load_balancer/@endpoint/<node>` and joined to the `@endpoints` pg group.
pub(crate) struct RpcEndpoint;

impl Actor for RpcEndpoint {
    type Msg = RpcMessage;
    type State = Arc<NodeShared>;
    type Arguments = Arc<NodeShared>;

    async fn pre_start(
        &self,
        myself: ActorRef<RpcMessage>,
        shared: Arc<NodeShared>,
    ) -> Result<Arc<NodeShared>, ActorProcessingErr> {
        ractor::pg::join_scoped(
            SCOPE.to_string(),
            ENDPOINT_GROUP.to_string(),
            vec![myself.get_cell()],
        );
        if shared.config.client {
            ractor::pg::join_scoped(
                SCOPE.to_string(),
                crate::wire::CLIENT_GROUP.to_string(),
                vec![myself.get_cell()],
            );
        }
        Ok(shared)
    }

    async fn handle(
        &self,
        _myself: ActorRef<RpcMessage>,
        message: RpcMessage,
        shared: &mut Arc<NodeShared>,
    ) -> Result<(), ActorProcessingErr> {
        dispatch(shared, message);
        Ok(())
    }
}

/// Serves one message on its own task: the endpoint and every balancer member do this.
pub(crate) fn dispatch(shared: &Arc<NodeShared>, message: RpcMessage) {
    let abandoned = Arc::clone(&shared.abandoned);
    dispatch_with(shared, message, (), abandoned);
}

/// [`dispatch`], holding `guard` until the call or cast is served (e.g. a served count); the
/// call is cancelled if `abandoned` fires (its drain gave up).
pub(crate) fn dispatch_with<G: Send + 'static>(
    shared: &Arc<NodeShared>,
    message: RpcMessage,
    guard: G,
    abandoned: Arc<Signal>,
) {
    let shared = Arc::clone(shared);
    match message {
        RpcMessage::Call(bytes, reply_port) => {
            tokio::spawn(async move {
                let reply = serve_call_in(&shared, bytes, abandoned).await;
                // The caller may have timed out and dropped its port; nothing to do then.
                let _ = reply_port.send(reply);
                drop(guard);
            });
        }
        RpcMessage::Cast(bytes) => {
            tokio::spawn(async move {
                let reply = serve_call_in(&shared, bytes, abandoned).await;
                drop(guard);
                if let Ok((status, _)) = reply::decode(&reply) {
                    if !status.is_ok() {
                        tracing::warn!(?status, "cast failed on this node");
                    }
                }
            });
        }
        RpcMessage::Control(bytes, reply_port) => {
            tokio::spawn(async move {
                let _ = reply_port.send(serve_control(&shared, &bytes).await);
            });
        }
    }
}

/// Runs one encoded call and returns the encoded reply. Never panics.
///
/// Takes the message: a [`Payload`](crate::Payload) argument is the message itself.
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(dead_code))]
pub(crate) async fn serve_call(shared: &NodeShared, bytes: Vec<u8>) -> Vec<u8> {
    serve_call_in(shared, bytes, Arc::clone(&shared.abandoned)).await
}

/// [`serve_call`] for a call that is also cancelled when `abandoned` fires (the drain of its
/// balancer, or of this node, gave up on it).
pub(crate) async fn serve_call_in(
    shared: &NodeShared,
    bytes: Vec<u8>,
    abandoned: Arc<Signal>,
) -> Vec<u8> {
    let _serving = shared.served.enter();
    // A caller with a larger cap may send more than this node accepts: refused unrun.
    if bytes.len() > shared.config.max_payload_bytes {
        let message = format!(
            "call of {} bytes exceeds this node's max_payload_bytes of {}; not run",
            bytes.len(),
            shared.config.max_payload_bytes
        );
        return reply::encode_status(&ReplyStatus::BadRequest(&message));
    }
    let (header, args) = match decode_call(&bytes) {
        Ok(decoded) => decoded,
        Err(DecodeError::Version(remote)) => {
            return reply::encode_status(&ReplyStatus::WireVersion { remote })
        }
        Err(DecodeError::Malformed(why)) => {
            return reply::encode_status(&ReplyStatus::BadRequest(&why))
        }
    };
    let Some((name, function)) = shared.registry.get_named(header.function) else {
        let message = format!("unknown function `{}` on {}", header.function, shared.name);
        return reply::encode_status(&ReplyStatus::BadRequest(&message));
    };
    let (deadline_ms, call_id, raw) = (header.deadline_ms, header.call_id, header.raw_args);
    let running = match function.start(bytes, args, raw) {
        Ok(running) => running,
        Err(why) => {
            let message = format!("cannot decode arguments of `{name}`: {why}");
            return reply::encode_status(&ReplyStatus::BadRequest(&message));
        }
    };
    // The function sees its deadline and cancellation through this (`CallContext::current`);
    // it is cancelled if the run is dropped before it ends (the deadline or a cancel below).
    let deadline =
        (deadline_ms != 0).then(|| crate::deadline::after_std(Duration::from_millis(deadline_ms)));
    let running = CallContext::serving(deadline, abandoned).run(running);
    let guarded = AssertUnwindSafe(running).catch_unwind();
    let outcome = if deadline_ms == 0 {
        guarded.await
    } else {
        // The caller cancels the call when it gives up (its timeout): the handler stops then,
        // or at the deadline measured here, whichever comes first.
        let (guarded, abort) = futures_util::future::abortable(guarded);
        let Some(_registered) = shared.calls.running(call_id, abort) else {
            // Its caller gave up before it got here: skip it.
            tracing::debug!(
                function = name,
                call_id,
                "skipping a call its caller cancelled"
            );
            return reply::encode_status(&ReplyStatus::DeadlineExceeded);
        };
        match tokio::time::timeout(Duration::from_millis(deadline_ms), guarded).await {
            // Ended at its deadline (work polling its context stops there), a hair before the
            // timer: too late for its caller all the same.
            Ok(Ok(_)) if deadline.is_some_and(|d| std::time::Instant::now() >= d) => {
                return reply::encode_status(&ReplyStatus::DeadlineExceeded)
            }
            Ok(Ok(outcome)) => outcome,
            Ok(Err(futures_util::future::Aborted)) | Err(_) => {
                return reply::encode_status(&ReplyStatus::DeadlineExceeded)
            }
        }
    };
    match outcome {
        Err(panic) => {
            let message = panic_message(panic.as_ref());
            tracing::warn!(function = name, %message, "remote function panicked");
            reply::encode_status(&ReplyStatus::Panicked(&message))
        }
        Ok(Err(error)) if error.is_bad_request() => {
            reply::encode_status(&ReplyStatus::BadRequest(error.message()))
        }
        Ok(Err(error)) => reply::encode_status(&ReplyStatus::Failed(error.message())),
        Ok(Ok(encoded)) if encoded.len() > shared.config.max_payload_bytes => {
            reply::encode_status(&ReplyStatus::PayloadTooLarge {
                size: encoded.len() as u64,
                limit: shared.config.max_payload_bytes as u64,
            })
        }
        Ok(Ok(encoded)) => encoded,
    }
}

/// Answers one encoded control request. Never panics.
pub(crate) async fn serve_control(shared: &Arc<NodeShared>, bytes: &[u8]) -> Vec<u8> {
    answer_control(shared, bytes, test_hooks::HONOURED).await
}

/// [`serve_control`], carrying out the test hooks' requests if `hooks` (else refusing them
/// with `BadRequest`).
async fn answer_control(shared: &Arc<NodeShared>, bytes: &[u8], hooks: bool) -> Vec<u8> {
    let body = match split_version(bytes) {
        Ok(body) => body,
        Err(DecodeError::Version(remote)) => {
            return reply::encode_status(&ReplyStatus::WireVersion { remote })
        }
        Err(DecodeError::Malformed(why)) => {
            return reply::encode_status(&ReplyStatus::BadRequest(&why))
        }
    };
    // Fields a newer release appended after the request are skipped (see `wire::section`).
    let request: ControlRequest = match crate::wire::decode_control(body) {
        Ok((request, _newer)) => request,
        Err(e) => {
            let message = format!("unknown control request: {e}");
            return reply::encode_status(&ReplyStatus::BadRequest(&message));
        }
    };
    if let Some(why) = test_hooks::refusal(&request, hooks) {
        return reply::encode_status(&ReplyStatus::BadRequest(&why));
    }
    let cpu_reading = matches!(request, ControlRequest::CpuReading);
    let answer = match admin(shared, request).await {
        Ok(answer) => answer,
        Err(error) => return reply::encode_status(&ReplyStatus::Failed(&error.to_string())),
    };
    if cpu_reading && shared.config.cpu_reply_error {
        return reply::encode_status(&ReplyStatus::Failed(CPU_REPLY_ERROR));
    }
    if cpu_reading && shared.config.cpu_reply_garbage {
        return garbage_reply();
    }
    reply::encode_ok(&answer).unwrap_or_else(|e| {
        let message = format!("control reply could not be encoded: {e}");
        reply::encode_status(&ReplyStatus::Failed(&message))
    })
}

/// The error a node started with `NodeConfig::cpu_reply_error` answers CPU-reading requests
/// with (the caller gets `Error::Remote` carrying it).
pub(crate) const CPU_REPLY_ERROR: &str =
    "cpu reading refused: this node answers every cpu reading with an error (cpu_reply_error)";

/// A reply that fails to decode on the caller (`NodeConfig::cpu_reply_garbage`): a valid
/// envelope (wire version, `Ok` status) whose value starts with an over-long varint, which no
/// [`ControlReply`] variant index can be. The caller's `decode_reply` maps it to
/// `Error::Codec`.
fn garbage_reply() -> Vec<u8> {
    let mut bytes = crate::wire::start_message(16);
    bytes.extend_from_slice(&[0xff; 6]);
    crate::wire::push_trailer(bytes, &ReplyStatus::Ok).unwrap_or_default()
}

/// Answers the control requests about a node's balancers (their members, calls in flight and
/// served, LeastCpu scores; start, stop, kill, a Poller crash) for the serving side, which does
/// not know balancers: the node is given one (`NodeShared::balancer_admin`) by the layer that
/// owns them. Takes the node's state and the request; returns the reply or the error to send.
pub(crate) type BalancerAdmin =
    fn(Arc<NodeShared>, ControlRequest) -> BoxFuture<'static, Result<ControlReply, crate::Error>>;

/// The CPU readings a node answers `CpuReading` and `CpuReadings` with, given by the node
/// (`NodeShared::cpu_readings`: its sampler's cache), which the serving side does not know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuReadings {
    /// The reading of the node of this full name, with its age now; `None` while it has none.
    pub(crate) own: fn(&str) -> Option<CpuReading>,
    /// Every reading held, `(node, reading)` sorted by node, with their ages now.
    pub(crate) all: fn() -> Vec<(String, CpuReading)>,
}

/// Carries out one control request; those about balancers through the node's
/// [`BalancerAdmin`] (after the `remote_admin` check for the admin ones).
async fn admin(
    shared: &Arc<NodeShared>,
    request: ControlRequest,
) -> Result<ControlReply, crate::Error> {
    Ok(match request {
        ControlRequest::Ping => ControlReply::Pong {
            node: shared.name.clone(),
            wire_version: crate::wire::local_version(),
        },
        ControlRequest::Nodes => ControlReply::Nodes(shared.peers.names()),
        ControlRequest::Functions => ControlReply::Functions(shared.registry.names()),
        ControlRequest::Stats => ControlReply::Stats {
            served_in_flight: shared.served.in_flight.load(Ordering::Relaxed),
            served_total: shared.served.total.load(Ordering::Relaxed),
        },
        ControlRequest::ConnectionOf(name) => {
            ControlReply::ConnectionOf(shared.peers.connection_of(&name))
        }
        ControlRequest::Peers => ControlReply::Peers(shared.peers.addresses()),
        ControlRequest::Joined { node, addr } => {
            crate::node::on_joined(shared, node, addr);
            ControlReply::Done
        }
        ControlRequest::CpuReading => {
            ControlReply::CpuReading((shared.cpu_readings.own)(&shared.name))
        }
        ControlRequest::CpuReadings => ControlReply::CpuReadings((shared.cpu_readings.all)()),
        ControlRequest::Cancel(id) => {
            if shared.calls.cancel(id) {
                tracing::debug!(call_id = id, "call cancelled by its caller");
            }
            ControlReply::Done
        }
        ControlRequest::Leaving(node) if !shared.peers.is_connected(&node) => {
            // Only a connected peer can be leaving: a name we don't know is not recorded, so
            // the set stays bounded by the peers this node has had.
            tracing::debug!(%node, "ignoring a leave announcement for a node that is not a peer");
            ControlReply::Done
        }
        ControlRequest::Leaving(node) => {
            tracing::debug!(%node, "peer announced it is leaving");
            shared.peers.mark_leaving(&node);
            let _ = shared.events.send(crate::NodeEvent::Leaving { node });
            ControlReply::Done
        }
        ControlRequest::StartBalancer { .. }
        | ControlRequest::StopBalancer(_)
        | ControlRequest::StopBalancerReport(_)
        | ControlRequest::KillLoadBalancer(_)
        | ControlRequest::CrashPoller(_)
        | ControlRequest::EndBalancerParent { .. }
            if !shared.config.remote_admin =>
        {
            return Err(crate::Error::InvalidConfig {
                option: "remote_admin",
                reason: format!("{} does not allow remote admin requests", shared.name),
            })
        }
        request @ (ControlRequest::InFlight(_)
        | ControlRequest::Members(_)
        | ControlRequest::Served(_)
        | ControlRequest::CpuSelection
        | ControlRequest::StartBalancer { .. }
        | ControlRequest::StopBalancer(_)
        | ControlRequest::StopBalancerReport(_)
        | ControlRequest::KillLoadBalancer(_)
        | ControlRequest::CrashPoller(_)
        | ControlRequest::EndBalancerParent { .. }) => {
            return (shared.balancer_admin)(Arc::clone(shared), request).await
        }
    })
}

mod test_hooks;
#[cfg(test)]
mod tests;
