//! The calling side of a remote function: `call` and `cast` builders, and the mapping of
//! ractor's outcomes and our reply statuses onto [`Error`].

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorRef, MessagingErr, RpcReplyPort};
use tracing::Instrument;

use crate::control::{ControlReply, ControlRequest};
use crate::error::{PayloadDirection, RemoteFailure};
use crate::function::{CallContext, RemoteFunction, Signal};
use crate::node::shared::NodeShared;
use crate::telemetry::RpcTelemetry;
use crate::wire::header::{
    decode_call, encode_call, encode_call_owned, restamp_call, take_args, CallHeader,
};
use crate::wire::reply::{self, ReplyStatus};
use crate::wire::{DecodeError, RpcMessage};
use crate::{Error, Unavailable};

mod local_cap;

pub(crate) use local_cap::call_local_capped;

/// A call of `F` on one node, built by [`Node::call`](crate::Node::call). Await it (it
/// implements `IntoFuture`); set a timeout first with [`Call::timeout`].
#[must_use = "a call does nothing until awaited"]
pub struct Call<F: RemoteFunction> {
    shared: Arc<NodeShared>,
    node: String,
    args: F::Args,
    timeout: Option<Duration>,
    /// The count that tracks this call (a random-node call's `load_balancer`: its balancer's
    /// in-flight token), if one does, and what cancels the call when that count's drain
    /// gives up.
    counted: Option<(Box<dyn Send + Sync>, Arc<Signal>)>,
    function: PhantomData<fn() -> F>,
}

impl<F: RemoteFunction> Call<F> {
    pub(crate) fn new(shared: Arc<NodeShared>, node: String, args: F::Args) -> Self {
        Self {
            shared,
            node,
            args,
            timeout: None,
            counted: None,
            function: PhantomData,
        }
    }

    /// Counts the call with `token` (a balancer's in-flight token: the transport does not
    /// know its type) until it has ended (in the run itself when it runs on this node), and
    /// cancels it when `abandoned` fires (that balancer's drain gave up).
    pub(crate) fn counted_by(
        mut self,
        token: impl Send + Sync + 'static,
        abandoned: Arc<Signal>,
    ) -> Self {
        self.counted = Some((Box::new(token), abandoned));
        self
    }

    /// How long to wait for the reply; default `NodeConfig::call_timeout` (10 s). Past it the
    /// call returns [`Error::RequestTimeout`] (the serving node stops the call at that deadline
    /// too). Zero is refused with [`Error::InvalidConfig`] (`timeout`).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

impl<F: RemoteFunction> IntoFuture for Call<F> {
    type Output = Result<F::Reply, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let timeout = self.timeout.unwrap_or(self.shared.config.call_timeout);
            let mut telemetry = RpcTelemetry::start("call", F::NAME, None);
            telemetry.target(&self.node);
            let span = telemetry.span().clone();
            let (counted, abandoned) = match self.counted {
                Some((token, abandoned)) => (Some(token), abandoned),
                None => (None, Arc::clone(&self.shared.abandoned)),
            };
            let (shared, node) = (&self.shared, &self.node);
            let outcome = call::<F, _>(shared, node, self.args, timeout, counted, &abandoned)
                .instrument(span)
                .await;
            telemetry.finish(&outcome);
            outcome
        })
    }
}

/// Sends one call to `node` and waits at most `timeout` for its reply. A call to this node
/// itself runs in-process when `F` is the registered type, holding `counted` until the run
/// has ended and cancelled if `abandoned` fires (see [`call_local`]); otherwise `counted` is
/// held until the reply.
pub(crate) async fn call<F: RemoteFunction, G: Send + 'static>(
    shared: &Arc<NodeShared>,
    node: &str,
    args: F::Args,
    timeout: Duration,
    counted: G,
    abandoned: &Arc<Signal>,
) -> Result<F::Reply, Error> {
    check_timeout(timeout)?;
    if node == shared.name {
        shared.check_running(node)?;
        if let Some(function) = shared.registry.get_typed::<F>() {
            return call_local_capped(shared, None, function, args, timeout, counted, abandoned)
                .await;
        }
    }
    let _counted = counted;
    let endpoint = shared.endpoint_of(node)?;
    call_endpoint::<F>(shared, &endpoint, node, None, args, timeout).await
}

/// Sends one call of `F` to `endpoint` (an rpc endpoint or a balancer member on `node`).
pub(crate) async fn call_endpoint<F: RemoteFunction>(
    shared: &NodeShared,
    endpoint: &ActorRef<RpcMessage>,
    node: &str,
    balancer: Option<&str>,
    args: F::Args,
    timeout: Duration,
) -> Result<F::Reply, Error> {
    let (bytes, id) = encode_owned::<F>(shared, balancer, args, timeout)?;
    let abandoned = CancelOnDrop::new(endpoint, id);
    let outcome = send_call(endpoint, RpcMessage::Call, bytes, timeout).await;
    abandoned.settle(&outcome);
    let reply = outcome_to_reply(node, timeout, outcome)?;
    decode_reply::<F::Reply>(node, F::NAME, reply, timeout)
}

/// Sends one control request to `node` and waits at most `timeout` for the answer.
pub(crate) async fn control(
    shared: &NodeShared,
    node: &str,
    request: &ControlRequest,
    timeout: Duration,
) -> Result<ControlReply, Error> {
    let endpoint = shared.endpoint_of(node)?;
    let bytes = crate::wire::encode_control(request).map_err(|e| Error::Codec {
        function: "control".into(),
        message: e.to_string(),
    })?;
    let outcome = send_call(&endpoint, RpcMessage::Control, bytes, timeout).await;
    let reply = outcome_to_reply(node, timeout, outcome)?;
    decode_reply(node, "control", reply, timeout)
}

/// Runs `function` in this process on its own task, with the remote call's error contract and
/// timeout: a returned error or a panic becomes [`Error::Remote`] (or [`Error::BadRequest`]
/// for [`FunctionError::bad_request`](crate::FunctionError::bad_request)), the deadline
/// [`Error::RequestTimeout`].
///
/// The run ends with its caller: at the deadline, or when the caller's future is dropped, the
/// task is aborted. `counted` (a drain count) lives in the task, so it is released only when
/// the run has really ended; the function's [`CallContext`] has the deadline and is cancelled
/// on abort or when `abandoned` fires.
pub(crate) async fn call_local<F: RemoteFunction, G: Send + 'static>(
    shared: &Arc<NodeShared>,
    function: Arc<F>,
    args: F::Args,
    timeout: Duration,
    counted: G,
    abandoned: &Arc<Signal>,
) -> Result<F::Reply, Error> {
    let node_counted = Arc::clone(shared);
    let deadline = crate::deadline::after_std(timeout);
    let context = CallContext::serving(Some(deadline), Arc::clone(abandoned));
    let task = AbortOnDrop(tokio::spawn(async move {
        let _counted = counted;
        let _serving = node_counted.served.enter();
        context.run(function.call(args)).await
    }));
    let node = || shared.name.clone();
    let remote = |failure, message: String| Error::Remote {
        node: node(),
        function: F::NAME.to_string(),
        failure,
        message,
    };
    // On the deadline the task is dropped here, which aborts it.
    match tokio::time::timeout(timeout, task).await {
        // (Ended at its deadline, a hair before the timer, e.g. work polling its context.)
        Ok(Ok(_)) if std::time::Instant::now() >= deadline => Err(Error::RequestTimeout {
            node: node(),
            timeout,
        }),
        Err(_elapsed) => Err(Error::RequestTimeout {
            node: node(),
            timeout,
        }),
        Ok(Err(join_error)) if join_error.is_panic() => {
            let message = crate::panic::panic_message(join_error.into_panic().as_ref());
            Err(remote(RemoteFailure::Panicked, message))
        }
        Ok(Err(_cancelled)) => Err(Error::ServiceUnavailable {
            node: node(),
            reason: Unavailable::NodeStopped,
        }),
        Ok(Ok(Err(error))) if error.is_bad_request() => Err(Error::BadRequest {
            node: node(),
            message: error.message().to_string(),
        }),
        Ok(Ok(Err(error))) => Err(remote(RemoteFailure::Failed, error.message().to_string())),
        Ok(Ok(Ok(reply))) => Ok(reply),
    }
}

/// A local run's task: aborted when dropped, i.e. when its caller stops waiting for it (its
/// deadline, or its future dropped). Aborting a finished task does nothing.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends one cast of `F` to `node`: returns once it is handed to the node's session.
pub(crate) fn cast<F: RemoteFunction>(
    shared: &NodeShared,
    node: &str,
    args: &F::Args,
) -> Result<(), Error> {
    let endpoint = shared.endpoint_of(node)?;
    cast_endpoint::<F>(shared, &endpoint, node, None, args)
}

/// Sends one cast of `F` to `endpoint` on `node`.
pub(crate) fn cast_endpoint<F: RemoteFunction>(
    shared: &NodeShared,
    endpoint: &ActorRef<RpcMessage>,
    node: &str,
    balancer: Option<&str>,
    args: &F::Args,
) -> Result<(), Error> {
    let (bytes, _id) = encode::<F>(shared, balancer, args, Duration::ZERO)?;
    endpoint
        .cast(RpcMessage::Cast(bytes))
        .map_err(|_| Error::ServiceUnavailable {
            node: node.to_string(),
            reason: Unavailable::Disconnected,
        })
}

/// Encodes header and arguments and enforces the payload cap before anything is sent; the
/// bytes and the call's id. A [`Payload`](crate::Payload) argument is copied: see
/// [`encode_owned`].
pub(crate) fn encode<F: RemoteFunction>(
    shared: &NodeShared,
    balancer: Option<&str>,
    args: &F::Args,
    timeout: Duration,
) -> Result<(Vec<u8>, u64), Error> {
    let header = header::<F>(shared, balancer, timeout);
    finish_encoding::<F>(shared, encode_call(&header, args), header.call_id)
}

/// [`encode`] taking the arguments: a [`Payload`](crate::Payload)'s buffer becomes the call.
pub(crate) fn encode_owned<F: RemoteFunction>(
    shared: &NodeShared,
    balancer: Option<&str>,
    args: F::Args,
    timeout: Duration,
) -> Result<(Vec<u8>, u64), Error> {
    let header = header::<F>(shared, balancer, timeout);
    finish_encoding::<F>(shared, encode_call_owned(&header, args), header.call_id)
}

/// An encoded call of `F` (refused unrun by a member) readied to be sent again: a new id and
/// the time left.
pub(crate) fn reencode<F: RemoteFunction>(
    shared: &NodeShared,
    balancer: Option<&str>,
    bytes: Vec<u8>,
    timeout: Duration,
) -> Result<(Vec<u8>, u64), Error> {
    let header = header::<F>(shared, balancer, timeout);
    let bytes = restamp_call(bytes, &header).map_err(|e| Error::Codec {
        function: F::NAME.to_string(),
        message: e.to_string(),
    })?;
    Ok((bytes, header.call_id))
}

/// The arguments inside an encoded call of `F` (one a leaving member handed back, now to be
/// served on this node).
pub(crate) fn decode_args<F: RemoteFunction>(bytes: Vec<u8>) -> Result<F::Args, Error> {
    let codec = |message: String| Error::Codec {
        function: F::NAME.to_string(),
        message,
    };
    let (header, args) = decode_call(&bytes).map_err(|e| codec(e.to_string()))?;
    let raw = header.raw_args;
    take_args(bytes, args, raw).map_err(codec)
}

/// The error for a call whose arguments were sent and not handed back (not reached: a call is
/// sent again only with its bytes or its arguments).
pub(crate) fn args_gone<F: RemoteFunction>() -> Error {
    Error::Codec {
        function: F::NAME.to_string(),
        message: "the call's arguments were already sent".into(),
    }
}

/// The header of a new call of `F`. Its deadline is the timeout in whole ms, rounded up (a
/// call's deadline is never 0, which would mean "none").
fn header<'a, F: RemoteFunction>(
    shared: &NodeShared,
    balancer: Option<&'a str>,
    timeout: Duration,
) -> CallHeader<'a> {
    CallHeader {
        function: F::NAME,
        balancer,
        deadline_ms: deadline_ms(timeout),
        call_id: shared.calls.next_id(),
        raw_args: crate::payload::is_payload::<F::Args>(),
    }
}

/// `timeout` in whole ms for a call's header: rounded up, so a sub-millisecond timeout is a
/// 1 ms deadline (0 means "no deadline", for casts).
fn deadline_ms(timeout: Duration) -> u64 {
    if timeout.is_zero() {
        return 0;
    }
    let ms = timeout.as_millis() + u128::from(!timeout.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// The encoded call, its size checked against the payload cap.
fn finish_encoding<F: RemoteFunction>(
    shared: &NodeShared,
    encoded: Result<Vec<u8>, postcard::Error>,
    id: u64,
) -> Result<(Vec<u8>, u64), Error> {
    let bytes = encoded.map_err(|e| Error::Codec {
        function: F::NAME.to_string(),
        message: e.to_string(),
    })?;
    check_payload(
        bytes.len(),
        shared.config.max_payload_bytes,
        PayloadDirection::Argument,
    )?;
    Ok((bytes, id))
}

/// What became of an encoded call.
pub(crate) enum Sent<T> {
    /// It left this node; this is the outcome.
    Replied(Result<T, Error>),
    /// It never left this node (the target's actor or session was already gone); the bytes
    /// and id are given back so the call can go elsewhere.
    Unsent((Vec<u8>, u64)),
    /// The member refused it unrun — it is leaving its balancer, or speaks another wire
    /// version — so it can go elsewhere; the error is what to report if it can't, and the
    /// call's bytes when the member handed them back.
    Refused(Error, Option<Vec<u8>>),
    /// Its reply port was dropped without a reply (the node went away, or the member's actor
    /// stopped): the call may have run.
    Dropped,
}

/// Sends an encoded call of `F` (id `id`) to `actor` on `node` and decodes the reply.
pub(crate) async fn send_encoded<F: RemoteFunction>(
    actor: &ActorRef<RpcMessage>,
    node: &str,
    (bytes, id): (Vec<u8>, u64),
    timeout: Duration,
) -> Sent<F::Reply> {
    let abandoned = CancelOnDrop::new(actor, id);
    let outcome = send_call(actor, RpcMessage::Call, bytes, timeout).await;
    abandoned.settle(&outcome);
    match outcome {
        Err(MessagingErr::SendErr(RpcMessage::Call(bytes, _))) => Sent::Unsent((bytes, id)),
        Ok(CallResult::Success(reply)) => match reply::decode_range(&reply) {
            Ok((ReplyStatus::Leaving, value)) => Sent::Refused(
                Error::ServiceUnavailable {
                    node: node.to_string(),
                    reason: crate::Unavailable::Leaving,
                },
                reply::refused_call(reply, value),
            ),
            // Not run there (a peer of another version is refused as soon as it connects;
            // this covers the moment before).
            Ok((ReplyStatus::WireVersion { .. }, _)) | Err(DecodeError::Version(_)) => {
                match decode_reply::<F::Reply>(node, F::NAME, reply, timeout) {
                    Err(error) => Sent::Refused(error, None),
                    Ok(value) => Sent::Replied(Ok(value)),
                }
            }
            _ => Sent::Replied(decode_reply::<F::Reply>(node, F::NAME, reply, timeout)),
        },
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
        let _ = send_call(&actor, RpcMessage::Control, bytes, CANCEL_TIMEOUT).await;
    });
}

/// Sends `bytes` as a `variant` request and waits at most `timeout` for the reply.
///
/// The reply port carries no timeout of its own: ours is the only timer. (With one,
/// ractor would start a second timer here and ractor_cluster a third on the serving node,
/// and a timed-out remote port that ractor_cluster drops would look like a lost connection
/// if its timer fired first.) The serving endpoint enforces the deadline from the call's
/// header and always answers or drops the port, so nothing waits forever there; a port
/// abandoned here is reclaimed by ractor_cluster once closed. A `SenderError` therefore
/// always means the node or the actor went away.
async fn send_call(
    endpoint: &ActorRef<RpcMessage>,
    variant: fn(Vec<u8>, RpcReplyPort<Vec<u8>>) -> RpcMessage,
    bytes: Vec<u8>,
    timeout: Duration,
) -> Result<CallResult<Vec<u8>>, MessagingErr<RpcMessage>> {
    let reply = endpoint.call(|port| variant(bytes, port), None);
    match tokio::time::timeout(timeout, reply).await {
        Ok(outcome) => outcome,
        Err(_elapsed) => Ok(CallResult::Timeout),
    }
}

/// `Err(InvalidConfig)` for a zero timeout: a call that may not wait cannot succeed.
pub(crate) fn check_timeout(timeout: Duration) -> Result<(), Error> {
    if timeout.is_zero() {
        return Err(Error::InvalidConfig {
            option: "timeout",
            reason: "must be greater than 0".into(),
        });
    }
    Ok(())
}

/// `Err(PayloadTooLarge)` when `size` is over `limit`.
pub(crate) fn check_payload(
    size: usize,
    limit: usize,
    direction: PayloadDirection,
) -> Result<(), Error> {
    if size > limit {
        return Err(Error::PayloadTooLarge {
            direction,
            size,
            limit,
        });
    }
    Ok(())
}

/// Maps what ractor's `call` returned onto the reply bytes or our error.
pub(crate) fn outcome_to_reply(
    node: &str,
    timeout: Duration,
    outcome: Result<CallResult<Vec<u8>>, MessagingErr<RpcMessage>>,
) -> Result<Vec<u8>, Error> {
    let unavailable = |reason| Error::ServiceUnavailable {
        node: node.to_string(),
        reason,
    };
    match outcome {
        Ok(CallResult::Success(reply)) => Ok(reply),
        Ok(CallResult::Timeout) => Err(Error::RequestTimeout {
            node: node.to_string(),
            timeout,
        }),
        Ok(CallResult::SenderError) => Err(unavailable(Unavailable::ConnectionLost)),
        Err(MessagingErr::SendErr(_)) | Err(MessagingErr::ChannelClosed) => {
            Err(unavailable(Unavailable::Disconnected))
        }
        Err(MessagingErr::InvalidActorType) => Err(unavailable(Unavailable::NoEndpoint)),
    }
}

/// Decodes a reply envelope from `node` into `T` or the error it carries. Takes the reply: a
/// [`Payload`](crate::Payload) value is the reply itself.
///
/// `timeout` is the caller's, reported when the serving node says the call's deadline passed.
pub(crate) fn decode_reply<T: serde::de::DeserializeOwned + 'static>(
    node: &str,
    function: &str,
    bytes: Vec<u8>,
    timeout: Duration,
) -> Result<T, Error> {
    let (status, value) = match reply::decode_range(&bytes) {
        Ok(decoded) => decoded,
        Err(DecodeError::Version(remote)) => {
            return Err(Error::WireVersion {
                node: node.to_string(),
                local: crate::wire::local_version(),
                remote,
            })
        }
        Err(DecodeError::Malformed(why)) => {
            return Err(Error::Codec {
                function: function.to_string(),
                message: format!("reply from {node}: {why}"),
            })
        }
    };
    let remote = |failure, message: &str| Error::Remote {
        node: node.to_string(),
        function: function.to_string(),
        failure,
        message: message.to_string(),
    };
    match status {
        ReplyStatus::Ok | ReplyStatus::OkPayload => {
            let raw = status == ReplyStatus::OkPayload;
            reply::take_value(bytes, value, raw).map_err(|e| Error::Codec {
                function: function.to_string(),
                message: format!("reply from {node} does not decode as the expected type: {e}"),
            })
        }
        ReplyStatus::BadRequest(message) => Err(Error::BadRequest {
            node: node.to_string(),
            message: message.to_string(),
        }),
        ReplyStatus::Failed(message) => Err(remote(RemoteFailure::Failed, message)),
        ReplyStatus::Panicked(message) => Err(remote(RemoteFailure::Panicked, message)),
        ReplyStatus::WireVersion { remote } => {
            // The node reads our version as `remote`; it answered in ours, so it speaks both.
            Err(Error::WireVersion {
                node: node.to_string(),
                local: crate::wire::local_version(),
                remote,
            })
        }
        ReplyStatus::PayloadTooLarge { size, limit } => Err(Error::PayloadTooLarge {
            direction: PayloadDirection::Reply,
            size: usize::try_from(size).unwrap_or(usize::MAX),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        }),
        ReplyStatus::DeadlineExceeded => Err(Error::RequestTimeout {
            node: node.to_string(),
            timeout,
        }),
        ReplyStatus::Leaving => Err(Error::ServiceUnavailable {
            node: node.to_string(),
            reason: Unavailable::Leaving,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WIRE_VERSION;

    const NODE: &str = "b@127.0.0.1";
    /// The caller's timeout in these tests.
    const T: Duration = Duration::from_millis(250);

    #[test]
    fn a_calls_deadline_is_its_timeout_in_ms_rounded_up() {
        assert_eq!(deadline_ms(Duration::from_nanos(1)), 1);
        assert_eq!(deadline_ms(Duration::from_micros(1_500)), 2);
        assert_eq!(deadline_ms(Duration::from_millis(250)), 250);
        assert_eq!(deadline_ms(Duration::ZERO), 0);
        assert_eq!(deadline_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn a_deadline_passed_on_the_serving_node_reports_the_callers_timeout() {
        let late = reply::encode_status(&ReplyStatus::DeadlineExceeded);
        let error = decode_reply::<u8>(NODE, "f", late, T).unwrap_err();
        assert_eq!(
            error,
            Error::RequestTimeout {
                node: NODE.into(),
                timeout: T
            }
        );
        assert_eq!(
            error.to_string(),
            "request to b@127.0.0.1 timed out after 250 ms"
        );
    }

    #[test]
    fn ractor_outcomes_map_to_the_original_codes() {
        let t = Duration::from_millis(100);
        let timeout = outcome_to_reply(NODE, t, Ok(CallResult::Timeout)).unwrap_err();
        assert_eq!(
            timeout,
            Error::RequestTimeout {
                node: NODE.into(),
                timeout: t
            }
        );
        let lost = outcome_to_reply(NODE, t, Ok(CallResult::SenderError)).unwrap_err();
        assert_eq!(
            lost,
            Error::ServiceUnavailable {
                node: NODE.into(),
                reason: Unavailable::ConnectionLost
            }
        );
        let closed = outcome_to_reply(NODE, t, Err(MessagingErr::ChannelClosed)).unwrap_err();
        assert_eq!(closed.code().as_str(), "service_unavailable");
        assert_eq!(
            outcome_to_reply(NODE, t, Ok(CallResult::Success(vec![1]))).unwrap(),
            vec![1]
        );
    }

    #[test]
    fn reply_statuses_map_to_errors() {
        let ok = reply::encode_ok(&7u8).unwrap();
        assert_eq!(decode_reply::<u8>(NODE, "f", ok, T).unwrap(), 7);
        let wrong_type =
            decode_reply::<String>(NODE, "f", reply::encode_ok(&vec![0xffu8]).unwrap(), T);
        assert_eq!(wrong_type.unwrap_err().kind(), "codec");
        let bad = reply::encode_status(&ReplyStatus::BadRequest("unknown function `g`"));
        assert_eq!(
            decode_reply::<u8>(NODE, "g", bad, T).unwrap_err(),
            Error::BadRequest {
                node: NODE.into(),
                message: "unknown function `g`".into()
            }
        );
        let panicked = reply::encode_status(&ReplyStatus::Panicked("boom"));
        match decode_reply::<u8>(NODE, "f", panicked, T).unwrap_err() {
            Error::Remote {
                failure,
                message,
                node,
                function,
            } => {
                assert_eq!(
                    (failure, message.as_str(), node.as_str(), function.as_str()),
                    (RemoteFailure::Panicked, "boom", NODE, "f")
                );
            }
            other => panic!("{other:?}"),
        }
        let big = reply::encode_status(&ReplyStatus::PayloadTooLarge { size: 9, limit: 4 });
        assert_eq!(
            decode_reply::<u8>(NODE, "f", big, T).unwrap_err(),
            Error::PayloadTooLarge {
                direction: PayloadDirection::Reply,
                size: 9,
                limit: 4
            }
        );
    }

    #[test]
    fn a_reply_in_another_wire_version_is_a_typed_error() {
        let mut bytes = postcard::to_allocvec(&(WIRE_VERSION + 3)).unwrap();
        bytes.push(0);
        assert_eq!(
            decode_reply::<u8>(NODE, "f", bytes, T).unwrap_err(),
            Error::WireVersion {
                node: NODE.into(),
                local: WIRE_VERSION,
                remote: WIRE_VERSION + 3
            }
        );
        assert_eq!(
            decode_reply::<u8>(NODE, "f", Vec::new(), T)
                .unwrap_err()
                .kind(),
            "codec"
        );
    }

    #[test]
    fn payload_cap_is_inclusive() {
        assert!(check_payload(8, 8, PayloadDirection::Argument).is_ok());
        assert_eq!(
            check_payload(9, 8, PayloadDirection::Argument).unwrap_err(),
            Error::PayloadTooLarge {
                direction: PayloadDirection::Argument,
                size: 9,
                limit: 8
            }
        );
    }
}
