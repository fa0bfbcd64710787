//! The RpcEndpoint actor: serves calls, casts and control requests addressed to this node.
//!
//! It **always replies** to a call: an unknown function or undecodable arguments give
//! `BadRequest`, a returned error gives `Failed`, a panic is caught and gives `Panicked` (the
//! node keeps serving), a reply over the payload cap gives `PayloadTooLarge`, another wire
//! version gives `WireVersion`. Without this a caller could only wait out its timeout, because
//! ractor_cluster drops messages it cannot decode and says nothing.
//!
//! A call over one of the node's concurrency caps (`NodeConfig::max_concurrent_calls`,
//! `function_max_concurrent_calls`; `transport::Admission`) is refused before any task is
//! spawned: a `Leaving` reply handing the call back, with the load report and the reason
//! `Overloaded`, so its caller sends it elsewhere (pushback).
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
use tracing::Instrument;

use crate::control::{ControlReply, ControlRequest};
use crate::function::{CallContext, Signal};
use crate::panic::panic_message;
use crate::transport::{Refused, Transport};
use crate::wire::header::decode_call;
use crate::wire::reply::{self, Refusal, ReplyStatus};
use crate::wire::{split_version, DecodeError, RpcMessage, ENDPOINT_GROUP, SCOPE};

/// What the serving side needs from the node above it, which it does not name: the transport
/// state it serves with, and the answers to the control requests that are about the node
/// (its peers, a join notice, a leave announcement) or its balancers. The node implements it.
pub(crate) trait Serving: Send + Sync + 'static {
    /// The transport state calls are served with.
    fn transport(&self) -> &Arc<Transport>;

    /// Answers a control request the serving side does not answer itself: `Nodes`,
    /// `ConnectionOf`, `Peers`, `Joined`, `Leaving`, and those about balancers (`InFlight`,
    /// `Members`, `Served`, `CpuSelection`, and the admin ones once `remote_admin` allowed
    /// them). Returns the reply, or the error to answer with.
    fn answer(
        self: Arc<Self>,
        request: ControlRequest,
    ) -> BoxFuture<'static, Result<ControlReply, crate::Error>>;
}

/// Serves this node's registered functions. One per node, named
/// `rpc_load_balancer/@endpoint/<node>` and joined to the `@endpoints` pg group.
pub(crate) struct RpcEndpoint;

impl Actor for RpcEndpoint {
    type Msg = RpcMessage;
    type State = Arc<dyn Serving>;
    type Arguments = Arc<dyn Serving>;

    async fn pre_start(
        &self,
        myself: ActorRef<RpcMessage>,
        shared: Arc<dyn Serving>,
    ) -> Result<Arc<dyn Serving>, ActorProcessingErr> {
        ractor::pg::join_scoped(
            SCOPE.to_string(),
            ENDPOINT_GROUP.to_string(),
            vec![myself.get_cell()],
        );
        if shared.transport().config.client {
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
        shared: &mut Arc<dyn Serving>,
    ) -> Result<(), ActorProcessingErr> {
        dispatch(shared, message);
        Ok(())
    }
}

/// Serves one message on its own task: the endpoint and every balancer member do this.
pub(crate) fn dispatch<S: Serving + ?Sized>(shared: &Arc<S>, message: RpcMessage) {
    let abandoned = Arc::clone(&shared.transport().abandoned);
    dispatch_with(shared, message, (), abandoned);
}

/// What a served call or cast holds until it is served (e.g. its balancer's served count).
pub(crate) trait Held: Send + 'static {
    /// Calls of the balancer this one came through being served here, this one included;
    /// `None` when it came through none (a direct call).
    fn balancer_in_flight(&self) -> Option<usize> {
        None
    }
}

impl Held for () {}

/// [`dispatch`], holding `guard` until the call or cast is served (e.g. a served count); the
/// call is cancelled if `abandoned` fires (its drain gave up).
pub(crate) fn dispatch_with<S: Serving + ?Sized, G: Held>(
    shared: &Arc<S>,
    message: RpcMessage,
    guard: G,
    abandoned: Arc<Signal>,
) {
    match message {
        RpcMessage::Call(bytes, reply_port) => {
            let transport = Arc::clone(shared.transport());
            // Over a concurrency cap: refused here, at once, unrun (pushback).
            let permit = match transport.admission.admit_encoded(&bytes) {
                Ok(permit) => permit,
                Err(refused) => {
                    let reply = refuse(&transport, bytes, refused, guard.balancer_in_flight());
                    let _ = reply_port.send(reply);
                    return;
                }
            };
            // Boxed: tokio moves a task's future several times while making the task, and
            // this one is large; a box moves as one word.
            tokio::spawn(Box::pin(async move {
                let reply = serve_call_in(&transport, bytes, abandoned).await;
                // Its place under the caps is free before the reply leaves: a caller's next
                // call right after it is not refused.
                drop(permit);
                let reply = reported(&transport, reply, guard.balancer_in_flight());
                // The caller may have timed out and dropped its port; nothing to do then.
                let _ = reply_port.send(reply);
                drop(guard);
            }));
        }
        RpcMessage::Cast(bytes) => {
            let transport = Arc::clone(shared.transport());
            tokio::spawn(Box::pin(async move {
                let reply = serve_call_in(&transport, bytes, abandoned).await;
                drop(guard);
                if let Ok((status, _)) = reply::decode(&reply) {
                    transport.serving_load.finished(status.is_ok());
                    if !status.is_ok() {
                        tracing::warn!(?status, "cast failed on this node");
                    }
                }
            }));
        }
        RpcMessage::Control(bytes, reply_port) => {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let _ = reply_port.send(serve_control(&shared, &bytes).await);
            });
        }
    }
}

/// Counts a call served (in the serving node's rates) and appends the node's load report to
/// its `reply`; `balancer_in_flight`: the served calls of its balancer, that call included.
fn reported(transport: &Transport, reply: Vec<u8>, balancer_in_flight: Option<usize>) -> Vec<u8> {
    // The call's own served count has ended: the node's count no longer holds it.
    let node = transport.served.in_flight.load(Ordering::Relaxed) as usize;
    let balancer = balancer_in_flight.map_or(node, |n| n.saturating_sub(1));
    let report = transport
        .serving_load
        .finish(reply::is_ok(&reply), balancer, node);
    reply::with_report(reply, &report)
}

/// The reply refusing `call` because the cap `refused` is reached (see [`refusal`]); counted
/// (`pushback.sent.count`) and logged at DEBUG.
#[cold]
#[inline(never)]
fn refuse(
    transport: &Transport,
    call: Vec<u8>,
    refused: Refused,
    balancer_in_flight: Option<usize>,
) -> Vec<u8> {
    // The label is a registered name, never one a peer made up (a series per name would grow
    // without bound).
    let function = decode_call(&call)
        .ok()
        .and_then(|(header, _)| transport.registry.get_named(header.function))
        .map_or("", |(name, _)| name);
    crate::telemetry::pushback_sent(function, refused.cap(), refused.limit());
    refusal(transport, call, Refusal::Overloaded, balancer_in_flight)
}

/// The reply refusing `call` unrun for `reason`: the call handed back with the node's load
/// report and the reason ([`reply::encode_refused`]), so its caller sends it to another
/// member. `balancer_in_flight`: the served calls of its balancer, that call included.
pub(crate) fn refusal(
    transport: &Transport,
    call: Vec<u8>,
    reason: Refusal,
    balancer_in_flight: Option<usize>,
) -> Vec<u8> {
    let node = transport.served.in_flight.load(Ordering::Relaxed) as usize;
    let balancer = balancer_in_flight.map_or(node, |n| n.saturating_sub(1));
    let report = transport.serving_load.report(balancer, node);
    reply::encode_refused(call, &report, reason)
}

/// Runs one encoded call and returns the encoded reply. Never panics.
///
/// Takes the message: a [`Payload`](crate::Payload) argument is the message itself.
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(dead_code))]
pub(crate) async fn serve_call(shared: &Transport, bytes: Vec<u8>) -> Vec<u8> {
    serve_call_in(shared, bytes, Arc::clone(&shared.abandoned)).await
}

/// [`serve_call`] for a call that is also cancelled when `abandoned` fires (the drain of its
/// balancer, or of this node, gave up on it).
pub(crate) async fn serve_call_in(
    shared: &Transport,
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
    // The serving span, given the caller's trace context (before `start` takes the bytes the
    // header borrows from); the function runs in it.
    let trace = header.trace.map(|t| (t.traceparent, t.tracestate));
    let span = crate::telemetry::serve_span(name, header.balancer, header.call_id, trace);
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
    // Entered on every poll only when it records something: a disabled span (no subscriber
    // wants DEBUG here) wraps nothing.
    let running = if span.is_disabled() {
        futures_util::future::Either::Left(running)
    } else {
        futures_util::future::Either::Right(running.instrument(span))
    };
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
        // Watched by the node's deadline table (no tokio timer per served call).
        let timer_deadline = crate::deadline::after(Duration::from_millis(deadline_ms));
        let guarded = std::pin::pin!(guarded);
        match shared.deadlines.timeout(timer_deadline, guarded).await {
            // Ended at its deadline (work polling its context stops there), a hair before the
            // sweep: too late for its caller all the same.
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
pub(crate) async fn serve_control<S: Serving + ?Sized>(shared: &Arc<S>, bytes: &[u8]) -> Vec<u8> {
    answer_control(shared, bytes, test_hooks::HONOURED).await
}

/// [`serve_control`], carrying out the test hooks' requests if `hooks` (else refusing them
/// with `BadRequest`).
pub(crate) async fn answer_control<S: Serving + ?Sized>(
    shared: &Arc<S>,
    bytes: &[u8],
    hooks: bool,
) -> Vec<u8> {
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
    let config = &shared.transport().config;
    if cpu_reading && config.cpu_reply_error {
        return reply::encode_status(&ReplyStatus::Failed(CPU_REPLY_ERROR));
    }
    if cpu_reading && config.cpu_reply_garbage {
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

/// Carries out one control request: those about this node's transport here, the others
/// through the node ([`Serving::answer`]), after the `remote_admin` check for the admin ones.
async fn admin<S: Serving + ?Sized>(
    shared: &Arc<S>,
    request: ControlRequest,
) -> Result<ControlReply, crate::Error> {
    let transport = shared.transport();
    Ok(match request {
        ControlRequest::Ping => ControlReply::Pong {
            node: transport.name.clone(),
            wire_version: crate::wire::local_version(),
        },
        ControlRequest::Functions => ControlReply::Functions(transport.registry.names()),
        ControlRequest::Stats => ControlReply::Stats {
            served_in_flight: transport.served.in_flight.load(Ordering::Relaxed),
            served_total: transport.served.total.load(Ordering::Relaxed),
        },
        ControlRequest::CpuReading => {
            ControlReply::CpuReading((transport.cpu_readings.own)(&transport.name))
        }
        ControlRequest::CpuReadings => ControlReply::CpuReadings((transport.cpu_readings.all)()),
        ControlRequest::LoadReport => {
            let node = transport.served.in_flight.load(Ordering::Relaxed) as usize;
            ControlReply::LoadReport(transport.serving_load.report(node, node))
        }
        ControlRequest::Cancel(id) => {
            if transport.calls.cancel(id) {
                tracing::debug!(call_id = id, "call cancelled by its caller");
            }
            ControlReply::Done
        }
        ControlRequest::StartBalancer { .. }
        | ControlRequest::StopBalancer(_)
        | ControlRequest::StopBalancerReport(_)
        | ControlRequest::KillLoadBalancer(_)
        | ControlRequest::CrashPoller(_)
        | ControlRequest::EndBalancerParent { .. }
            if !transport.config.remote_admin =>
        {
            return Err(crate::Error::InvalidConfig {
                option: "remote_admin",
                reason: format!("{} does not allow remote admin requests", transport.name),
            })
        }
        request @ (ControlRequest::Nodes
        | ControlRequest::Labels
        | ControlRequest::Heartbeat(_)
        | ControlRequest::Gossip(_)
        | ControlRequest::GossipDigest(_)
        | ControlRequest::GossipEntries(_)
        | ControlRequest::Directory
        | ControlRequest::ConnectionOf(_)
        | ControlRequest::Peers
        | ControlRequest::Joined { .. }
        | ControlRequest::Leaving(_)
        | ControlRequest::InFlight(_)
        | ControlRequest::Members(_)
        | ControlRequest::Served(_)
        | ControlRequest::CpuSelection
        | ControlRequest::StartBalancer { .. }
        | ControlRequest::StopBalancer(_)
        | ControlRequest::StopBalancerReport(_)
        | ControlRequest::KillLoadBalancer(_)
        | ControlRequest::CrashPoller(_)
        | ControlRequest::EndBalancerParent { .. }) => {
            return Arc::clone(shared).answer(request).await
        }
    })
}

mod test_hooks;
#[cfg(test)]
pub(crate) mod tests;
