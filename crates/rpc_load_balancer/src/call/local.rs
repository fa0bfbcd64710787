//! A call run in this process — sent to this node's own name, on a local member, by
//! `CallDirect` or `call_directly` — with the remote call's contract, so that a call gets the
//! same outcome whoever serves it: the same errors, timeout and payload cap.
//!
//! The run is a task of its own that **owns its drain accounting**: the count that tracks it
//! (a balancer's in-flight or served token, and the node's served-call count) lives in the
//! task, so it is released only when the run has really ended, and the run's
//! [`CallContext`] is cancelled when the abandon signal of that count fires (its drain gave
//! up). The task is aborted when its caller stops waiting: at the deadline, or when the
//! caller's future is dropped.
//!
//! The payload cap: a call to another node is refused before it is sent when its encoded
//! message (wire version, arguments, header and header length) is over this node's
//! `max_payload_bytes`, and the serving node answers `PayloadTooLarge` instead of a reply
//! whose encoding (version, value, status and status length) is over its cap. A local run
//! encodes neither, so it measures both: the same bytes, computed without encoding
//! (postcard's size flavor, a [`Payload`](crate::Payload)'s length), and refused with the same
//! error values.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::encode::{check_payload, header};
use crate::error::{PayloadDirection, RemoteFailure};
use crate::function::{CallContext, RemoteFunction, Signal};
use crate::transport::Transport;
use crate::wire::header::call_len;
use crate::wire::reply::ok_len;
use crate::{Error, Unavailable};

/// What a local run holds until it has really ended, and what cancels it.
pub(crate) struct Accounting<G> {
    /// The count that tracks the run (a balancer's token; `()` for none), dropped with the
    /// run's task.
    pub(crate) counted: G,
    /// Fired when the drain of that count (or the node's) gives up: the run's
    /// [`CallContext`] is cancelled.
    pub(crate) abandoned: Arc<Signal>,
}

/// Runs `function` in this process on its own task until `deadline` (the call's `timeout`
/// from its start, watched by the node's deadlines), under the payload cap a call of `F`
/// routed by `balancer` (`None`: direct) meets when another node serves it, holding
/// `accounting` until the run has ended (see the module docs).
///
/// Errors: [`Error::InvalidConfig`] for a zero timeout; [`Error::PayloadTooLarge`]
/// (`Argument`, the function not run) when the call as it would be encoded is over
/// `max_payload_bytes`, [`Error::Codec`] when the arguments cannot be encoded; a returned
/// error or a panic as [`Error::Remote`] (or [`Error::BadRequest`] for
/// [`FunctionError::bad_request`](crate::FunctionError::bad_request)), the deadline as
/// [`Error::RequestTimeout`], an aborted run as [`Error::ServiceUnavailable`]
/// (`NodeStopped`); then [`Error::PayloadTooLarge`] (`Reply`) when the reply as it would be
/// encoded is over the cap, [`Error::Remote`] (`Failed`) when it cannot be encoded.
pub(crate) async fn run_local<F: RemoteFunction, G: Send + 'static>(
    transport: &Arc<Transport>,
    balancer: Option<&str>,
    function: Arc<F>,
    args: F::Args,
    (timeout, deadline): (Duration, Instant),
    accounting: Accounting<G>,
) -> Result<F::Reply, Error> {
    super::check_timeout(timeout)?;
    check_args::<F>(transport, balancer, &args, timeout)?;
    let reply = run(transport, function, args, (timeout, deadline), accounting).await?;
    check_reply::<F>(transport, &reply)?;
    Ok(reply)
}

/// The run itself, with the remote call's error contract and timeout.
async fn run<F: RemoteFunction, G: Send + 'static>(
    transport: &Arc<Transport>,
    function: Arc<F>,
    args: F::Args,
    (timeout, deadline): (Duration, Instant),
    accounting: Accounting<G>,
) -> Result<F::Reply, Error> {
    let in_task = Arc::clone(transport);
    let deadline_std = deadline.into_std();
    let context = CallContext::serving(Some(deadline_std), accounting.abandoned);
    let counted = accounting.counted;
    // Boxed: tokio moves a task's future several times while it makes the task, and this one
    // (the function's future, its context and counts) is large; a box is moved in one word.
    let run = Box::pin(async move {
        let _counted = counted;
        let _serving = in_task.served.enter();
        let result = context.run(function.call(args)).await;
        // Counted in the node's rates as a call served from another node is.
        in_task.serving_load.finished(result.is_ok());
        result
    });
    let task = AbortOnDrop::new(tokio::spawn(run));
    let node = || transport.name.clone();
    let remote = |failure, message: String| Error::Remote {
        node: node(),
        function: F::NAME.to_string(),
        failure,
        message,
    };
    // On the deadline the task is dropped here, which aborts it.
    match transport.deadlines.timeout(deadline, task).await {
        // (Ended at its deadline, a hair before the timer, e.g. work polling its context.)
        Ok(Ok(_)) if std::time::Instant::now() >= deadline_std => Err(Error::RequestTimeout {
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
/// deadline, or its future dropped), unless it has ended (its output read).
struct AbortOnDrop<T> {
    task: tokio::task::JoinHandle<T>,
    ended: bool,
}

impl<T> AbortOnDrop<T> {
    fn new(task: tokio::task::JoinHandle<T>) -> Self {
        Self { task, ended: false }
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let output = Pin::new(&mut self.task).poll(cx);
        self.ended |= output.is_ready();
        output
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        if !self.ended {
            self.task.abort();
        }
    }
}

/// The argument cap, measured as the caller of a remote call measures it (the header with a
/// fresh call id, as the call would carry).
fn check_args<F: RemoteFunction>(
    transport: &Transport,
    balancer: Option<&str>,
    args: &F::Args,
    timeout: Duration,
) -> Result<(), Error> {
    // (A run here carries no trace context: it is not encoded.)
    let header = header::<F>(transport, balancer, timeout, None);
    let size = call_len(&header, args).map_err(|e| Error::Codec {
        function: F::NAME.to_string(),
        message: e.to_string(),
    })?;
    check_payload(
        size,
        transport.config.max_payload_bytes,
        PayloadDirection::Argument,
    )
}

/// The reply cap, measured as the serving node of a remote call measures it.
fn check_reply<F: RemoteFunction>(transport: &Transport, reply: &F::Reply) -> Result<(), Error> {
    match ok_len(reply) {
        Ok(size) => check_payload(
            size,
            transport.config.max_payload_bytes,
            PayloadDirection::Reply,
        ),
        Err(e) => Err(Error::Remote {
            node: transport.name.clone(),
            function: F::NAME.to_string(),
            failure: RemoteFailure::Failed,
            message: format!("reply could not be encoded: {e}"),
        }),
    }
}
