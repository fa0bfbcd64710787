//! Sending: a call or control request to an actor (a node's endpoint or a balancer member)
//! with its deadline watched by the node's [`Deadlines`] (no timer of its own), the
//! cancellation sent when the caller gives up, and a cast handed to a session.

use std::time::Duration;

use ractor::concurrency::OneshotReceiver;
use ractor::rpc::CallResult;
use ractor::{ActorRef, MessagingErr, RpcReplyPort};
use tokio::time::Instant;

use super::encode::encode;
use super::reply::{decode_reply, outcome_to_reply, refusal_error};
use crate::control::{ControlReply, ControlRequest};
use crate::function::RemoteFunction;
use crate::load::LoadReport;
use crate::telemetry::TraceContext;
use crate::transport::{Deadlines, Elapsed, Transport};
use crate::wire::reply::{self, ReplyStatus};
use crate::wire::{DecodeError, RpcMessage};
use crate::{Error, Unavailable};

/// Sends one cast of `F` to `endpoint` on `node`, carrying the caller's `trace` context.
pub(crate) fn cast_endpoint<F: RemoteFunction>(
    transport: &Transport,
    endpoint: &ActorRef<RpcMessage>,
    (node, balancer): (&str, Option<&str>),
    args: &F::Args,
    trace: Option<&TraceContext>,
) -> Result<(), Error> {
    let (bytes, _id) = encode::<F>(transport, balancer, args, Duration::ZERO, trace)?;
    endpoint
        .cast(RpcMessage::Cast(bytes))
        .map_err(|_| Error::ServiceUnavailable {
            node: node.to_string(),
            reason: Unavailable::Disconnected,
        })
}

/// Sends one control request to `node` and waits at most `timeout` for the answer.
///
/// Errors: [`Error::ServiceUnavailable`] (this node stopped, `node` unknown or disconnected),
/// [`Error::RequestTimeout`], and the errors of the answer's envelope (see
/// [`decode_reply`](super::decode_reply)).
pub(crate) async fn control(
    transport: &Transport,
    node: &str,
    request: &ControlRequest,
    timeout: Duration,
) -> Result<ControlReply, Error> {
    let endpoint = transport.endpoint_of(node)?;
    let bytes = crate::wire::encode_control(request).map_err(|e| Error::Codec {
        function: "control".into(),
        message: e.to_string(),
    })?;
    let deadline = crate::deadline::after(timeout);
    let outcome = send_call(
        &transport.deadlines,
        &endpoint,
        RpcMessage::Control,
        bytes,
        deadline,
    );
    let reply = outcome_to_reply(node, timeout, outcome.await)?;
    decode_reply(node, "control", reply, timeout)
}

/// What became of an encoded call.
pub(crate) enum Sent<T> {
    /// It left this node; this is the outcome.
    Replied(Result<T, Error>),
    /// It never left this node (the target's actor or session was already gone); the bytes
    /// and id are given back so the call can go elsewhere.
    Unsent((Vec<u8>, u64)),
    /// The member refused it unrun — it is leaving its balancer, is at a concurrency cap
    /// (`Unavailable::Overloaded`), or speaks another wire version — so it can go elsewhere;
    /// the error is what to report if it can't, and the call's bytes when the member handed
    /// them back.
    Refused(Error, Option<Vec<u8>>),
    /// Its reply port was dropped without a reply (the node went away, or the member's actor
    /// stopped): the call may have run.
    Dropped,
}

/// Sends an encoded call of `F` (id `id`) to `actor` on `node`, waits for the reply until
/// `deadline` (on `deadlines`), and decodes it; `timeout` is the call's, for its errors.
/// `load` gets the serving node's load report when the reply carries one.
pub(crate) async fn send_encoded<F: RemoteFunction>(
    deadlines: &Deadlines,
    actor: &ActorRef<RpcMessage>,
    node: &str,
    (bytes, id): (Vec<u8>, u64),
    (timeout, deadline): (Duration, Instant),
    load: &mut Option<LoadReport>,
) -> Sent<F::Reply> {
    let abandoned = CancelOnDrop::new(actor, id);
    let outcome = send_call(deadlines, actor, RpcMessage::Call, bytes, deadline).await;
    abandoned.settle(&outcome);
    match outcome {
        Err(MessagingErr::SendErr(RpcMessage::Call(bytes, _))) => Sent::Unsent((bytes, id)),
        Ok(CallResult::Success(reply)) => {
            let decoded = reply::decode_with_report(&reply);
            if let Ok((_, _, appended)) = &decoded {
                *load = appended.report;
            }
            match decoded {
                // (Its reason was decoded with it: no second decode.)
                Ok((ReplyStatus::Leaving, value, appended)) => Sent::Refused(
                    refusal_error(node, appended.refusal()),
                    reply::refused_call(reply, value),
                ),
                // Not run there (a peer of another version is refused as soon as it connects;
                // this covers the moment before).
                Ok((ReplyStatus::WireVersion { .. }, _, _)) | Err(DecodeError::Version(_)) => {
                    match decode_reply::<F::Reply>(node, F::NAME, reply, timeout) {
                        Err(error) => Sent::Refused(error, None),
                        Ok(value) => Sent::Replied(Ok(value)),
                    }
                }
                _ => {
                    let result = decode_reply::<F::Reply>(node, F::NAME, reply, timeout);
                    // Test hook: a failure of the set message reads as a lost connection.
                    #[cfg(any(test, feature = "test-hooks"))]
                    if super::lost_reply::is_lost(&result) {
                        return Sent::Dropped;
                    }
                    Sent::Replied(result)
                }
            }
        }
        Ok(CallResult::SenderError) => Sent::Dropped,
        outcome => Sent::Replied(
            outcome_to_reply(node, timeout, outcome)
                .and_then(|reply| decode_reply::<F::Reply>(node, F::NAME, reply, timeout)),
        ),
    }
}

/// How long a cancellation may take to be handed over; nobody waits for it.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// A sent call not settled yet: if the caller gives up on it — its timeout ran out, or its
/// future was dropped — the serving node is told to stop it (see [`cancel`]).
struct CancelOnDrop<'a> {
    actor: &'a ActorRef<RpcMessage>,
    id: u64,
}

impl<'a> CancelOnDrop<'a> {
    fn new(actor: &'a ActorRef<RpcMessage>, id: u64) -> Self {
        Self { actor, id }
    }

    /// The send ended with `outcome`: only a timeout still needs the cancellation.
    fn settle<T>(self, outcome: &Result<CallResult<T>, MessagingErr<RpcMessage>>) {
        if !matches!(outcome, Ok(CallResult::Timeout)) {
            std::mem::forget(self);
        }
    }
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        cancel(self.actor, self.id);
    }
}

/// Tells the node behind `actor` (its endpoint or a balancer member) that call `id` was given
/// up, so it stops the handler now rather than at the deadline it measures itself — which a
/// call that spent its time in transit (a paused node, a slow network) would otherwise run
/// to. Fire and forget: the outcome is not awaited.
fn cancel(actor: &ActorRef<RpcMessage>, id: u64) {
    if id == 0 {
        return;
    }
    let Ok(bytes) = crate::wire::encode_control(&ControlRequest::Cancel(id)) else {
        return;
    };
    // (A call dropped outside any runtime cannot send; its handler stops at its deadline.)
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let actor = actor.clone();
    runtime.spawn(async move {
        if let Ok(reply) = post(&actor, RpcMessage::Control, bytes) {
            let _ = tokio::time::timeout(CANCEL_TIMEOUT, reply).await;
        }
    });
}

/// Sends `bytes` as a `variant` request to `endpoint` and waits until `deadline` for the
/// reply, the deadline watched by `deadlines`.
///
/// The reply port carries no timeout of its own: the deadline is the only one. (With one,
/// ractor would start a timer here and ractor_cluster another on the serving node, and a
/// timed-out remote port that ractor_cluster drops would look like a lost connection if its
/// timer fired first.) The serving endpoint enforces the deadline from the call's header and
/// always answers or drops the port, so nothing waits forever there; a port abandoned here is
/// reclaimed by ractor_cluster once closed. A `SenderError` therefore always means the node
/// or the actor went away.
async fn send_call(
    deadlines: &Deadlines,
    endpoint: &ActorRef<RpcMessage>,
    variant: fn(Vec<u8>, RpcReplyPort<Vec<u8>>) -> RpcMessage,
    bytes: Vec<u8>,
    deadline: Instant,
) -> Result<CallResult<Vec<u8>>, MessagingErr<RpcMessage>> {
    let reply = post(endpoint, variant, bytes)?;
    Ok(match deadlines.timeout(deadline, reply).await {
        Ok(Ok(reply)) => CallResult::Success(reply),
        Ok(Err(_port_dropped)) => CallResult::SenderError,
        Err(Elapsed) => CallResult::Timeout,
    })
}

/// Sends `bytes` as a `variant` request to `endpoint`: the receiver of its reply.
///
/// Errors: the message could not be sent (it is handed back in the error).
fn post(
    endpoint: &ActorRef<RpcMessage>,
    variant: fn(Vec<u8>, RpcReplyPort<Vec<u8>>) -> RpcMessage,
    bytes: Vec<u8>,
) -> Result<OneshotReceiver<Vec<u8>>, MessagingErr<RpcMessage>> {
    let (port, reply) = ractor::concurrency::oneshot();
    endpoint.send_message(variant(bytes, port.into()))?;
    Ok(reply)
}
