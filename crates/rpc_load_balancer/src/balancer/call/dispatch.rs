//! The one dispatch path of calls and casts, whatever their target: check and resolve the
//! options ([`Route::new`]), then per attempt choose where it goes ([`Route::choose`]: the
//! one place that decides between a run here and a send, and the one retry loop while there
//! is nobody to send to), run or send it, and — only for a routed call that could not be
//! handed over (the member had just gone, is leaving, is at a concurrency cap, or speaks
//! another wire version) — choose again, at most [`MAX_RESELECTIONS`] times. A call that was
//! sent is never sent again, unless it is idempotent: then a failure of the retryable kind
//! ([`budget_retryable`](crate::retry::budget_retryable)) is retried on a member it has not
//! tried, as its balancer's retry budget allows, within its deadline (issue 22). One refused
//! unrun is chosen again whatever its function (it did not run). A refusal at a cap
//! (pushback) is never reported to the selector as a failure.

use std::sync::Arc;

use tracing::{Instrument, Span};

use super::options::CallOptions;
use super::target::{Attempt, Counted, Destination, Kind, Route, Target};
use super::telemetry::Telemetry;
use crate::balancer::Selection;
use crate::call::{self, Accounting, Sent};
use crate::function::RemoteFunction;
use crate::node::shared::NodeShared;
use crate::telemetry::TraceContext;
use crate::transport::Transport;
use crate::{Error, Unavailable};

/// How many members a routed call may skip because they could not take it without running
/// it.
pub(crate) const MAX_RESELECTIONS: usize = 3;

/// Runs a call of `F` from `node` to `target`: its reply and the node that served it.
///
/// Errors: those of [`Route::new`] and [`Route::choose`], then those of the run or the send
/// (see [`Node::call`](crate::Node::call)).
pub(crate) async fn call<F: RemoteFunction>(
    node: &Arc<NodeShared>,
    target: &Target,
    options: &CallOptions,
    args: F::Args,
) -> Result<(F::Reply, Arc<str>), Error> {
    call_reserved::<F>(node, target, options, args, None).await
}

/// As [`call`], with `reserved`: a selection of the routing balancer made beforehand (a tower
/// service's `poll_ready`), which its first attempt takes instead of selecting.
pub(crate) async fn call_reserved<F: RemoteFunction>(
    node: &Arc<NodeShared>,
    target: &Target,
    options: &CallOptions,
    args: F::Args,
    reserved: Option<Selection>,
) -> Result<(F::Reply, Arc<str>), Error> {
    let tracking = options.load_balancer.as_deref();
    let mut telemetry = Telemetry::new(Kind::Call, F::NAME, target, tracking);
    let span = telemetry.span();
    let outcome = route_call::<F>(node, target, options, args, reserved, &mut telemetry)
        .instrument(span)
        .await;
    telemetry.finish(&outcome);
    outcome
}

/// Sends a cast of `F` from `node` to `target`: the node it was handed to.
///
/// Errors: those of [`Route::new`] and [`Route::choose`], then those of the hand-over (see
/// [`Node::cast`](crate::Node::cast)).
pub(crate) async fn cast<F: RemoteFunction>(
    node: &Arc<NodeShared>,
    target: &Target,
    options: &CallOptions,
    args: F::Args,
) -> Result<Arc<str>, Error> {
    let tracking = options.load_balancer.as_deref();
    let mut telemetry = Telemetry::new(Kind::Cast, F::NAME, target, tracking);
    let span = telemetry.span();
    let outcome = route_cast::<F>(node, target, options, args, &mut telemetry)
        .instrument(span)
        .await;
    telemetry.finish(&outcome);
    outcome
}

async fn route_call<F: RemoteFunction>(
    node: &Arc<NodeShared>,
    target: &Target,
    options: &CallOptions,
    args: F::Args,
    mut reserved: Option<Selection>,
    telemetry: &mut Telemetry,
) -> Result<(F::Reply, Arc<str>), Error> {
    let route = Route::new(node, target, options)?;
    // A random-node call's span starts once it has its node.
    let late_span = !telemetry.is_started();
    let mut args = Args::<F>::new(args);
    // Nodes that turned out unable to take the call without running it, at the in-flight
    // cap, or that failed it in a way a retry of an idempotent call may follow.
    let mut exclude: Vec<Arc<str>> = Vec::new();
    let mut reselections = 0;
    // The balancer whose retry budget this call may use: an idempotent routed call's (it
    // deposits its share now).
    let idempotent = options.idempotent.unwrap_or(F::IDEMPOTENT);
    let budget = route.retry_budget(idempotent);
    if let Some(shared) = budget {
        shared.retry_budget.deposit(shared.budget_now());
    }
    // Issue 22: whether its first attempt is hedged (most calls: no, and nothing is built).
    let mut hedging = route.hedging(idempotent, options.hedge);
    let mut retries = 0u32;
    // The failure the last retry followed: what the call returns if the retry finds nobody.
    let mut retried: Option<Error> = None;
    // A timeout says the call's own timeout: an attempt re-sent after a failure had only
    // what was left of it.
    let outcome: Result<(F::Reply, Arc<str>), Error> = async {
        loop {
            let again = reselections > 0 || retries > 0;
            let chosen = route
                .choose::<F>(Kind::Call, &mut exclude, again, &mut reserved, telemetry)
                .await;
            let mut attempt = match (chosen, retried.take()) {
                (Ok(attempt), _) => attempt,
                (Err(_), Some(failure)) => return Err(failure),
                (Err(error), None) => return Err(error),
            };
            let span = if late_span {
                telemetry.span()
            } else {
                Span::none()
            };
            // A call run here is not encoded: no trace context to make.
            let trace = match attempt.destination {
                Destination::Here(_) => None,
                _ => telemetry.trace(),
            };
            let keep = route.reselects();
            let sent = match hedging.take() {
                Some(hedge) if !again => {
                    let trace = trace.cloned();
                    // Boxed: the two copies' state stays out of every other call's future.
                    let hedged = Box::pin(super::hedge::run_hedged(
                        hedge,
                        &route,
                        &mut attempt,
                        &mut args,
                        &mut exclude,
                        telemetry,
                        trace,
                    ));
                    hedged.instrument(span).await?
                }
                _ => {
                    run_or_send(&node.transport, &mut attempt, &mut args, keep, trace)
                        .instrument(span)
                        .await?
                }
            };
            let may_reselect = route.reselects() && reselections < MAX_RESELECTIONS;
            let failure = match sent {
                Sent::Replied(result) => {
                    attempt.report(&result);
                    match result {
                        Ok(reply) => return Ok((reply, attempt.node)),
                        Err(error) => error,
                    }
                }
                Sent::Unsent((bytes, _id)) if may_reselect => {
                    // The member went away before the call left: pick another.
                    reselections += 1;
                    exclude.push(attempt.node);
                    args.encoded = Some(bytes);
                    continue;
                }
                Sent::Refused(error, handed_back)
                    if may_reselect && (handed_back.is_some() || args.args.is_some()) =>
                {
                    // The member is leaving (draining), at a concurrency cap, or of another wire
                    // version, and did not run it: pick another. (The attempt's selection ends
                    // as cancelled: a refusal is not the member's failure.)
                    reselections += 1;
                    let overloaded = pushback(&error, &attempt);
                    exclude.push(attempt.node);
                    if overloaded && route.nobody_else(&exclude) {
                        // Every member is at its cap: say so now, not at the deadline.
                        return Err(error);
                    }
                    args.encoded = handed_back;
                    continue;
                }
                // The call may have run (the node went away, or the member actor stopped while
                // serving it): sent again only if it is idempotent (below).
                Sent::Dropped => attempt.fail(unavailable(&attempt, Unavailable::ConnectionLost)),
                Sent::Unsent((bytes, _id)) => {
                    args.encoded = Some(bytes);
                    attempt.fail(unavailable(&attempt, Unavailable::Disconnected))
                }
                // At a concurrency cap: a load signal, not a failure of the member.
                Sent::Refused(error, handed_back) if pushback(&error, &attempt) => {
                    args.encoded = handed_back;
                    error
                }
                Sent::Refused(error, handed_back) => {
                    args.encoded = handed_back;
                    attempt.fail(error)
                }
            };
            // Issue 22: an idempotent call goes to another member, as the budget allows.
            let Some(shared) = budget else {
                return Err(failure);
            };
            if !crate::retry::budget_retryable(&failure)
                || retries >= shared.retry_budget.max_per_call
                || (args.args.is_none() && args.encoded.is_none())
            {
                return Err(failure);
            }
            exclude.push(Arc::clone(&attempt.node));
            if route.nobody_else(&exclude) || route.time_left(&attempt.node).is_err() {
                return Err(failure);
            }
            if !shared.retry_budget.withdraw(shared.budget_now()) {
                crate::telemetry::retry_refused(&shared.name, &failure);
                return Err(failure);
            }
            retries += 1;
            crate::telemetry::retried(&shared.name, &attempt.node, &failure);
            retried = Some(failure);
        }
    }
    .await;
    outcome.map_err(|error| route.callers_timeout(error))
}

/// Whether `error` is a refusal at a serving node's concurrency cap
/// ([`Unavailable::Overloaded`]); if so it is counted (`pushback.count`) for the attempt's
/// balancer and node.
fn pushback<F>(error: &Error, attempt: &Attempt<'_, F>) -> bool {
    let overloaded = matches!(
        error,
        Error::ServiceUnavailable {
            reason: Unavailable::Overloaded,
            ..
        }
    );
    if overloaded {
        crate::telemetry::pushback_seen(attempt.balancer.unwrap_or(""), &attempt.node);
    }
    overloaded
}

/// The error of an attempt whose node is unavailable for `reason`.
fn unavailable<F>(attempt: &Attempt<'_, F>, reason: Unavailable) -> Error {
    Error::ServiceUnavailable {
        node: attempt.node.to_string(),
        reason,
    }
}

/// Runs the attempt here (a task that holds the attempt's count until the run has ended), or
/// sends it carrying `trace`; `keep`: the call may go to another node, so keep arguments that
/// are not moved into their call.
///
/// Errors (before anything ran or was sent): the arguments cannot be encoded, or are gone.
pub(super) async fn run_or_send<F: RemoteFunction>(
    transport: &Arc<Transport>,
    attempt: &mut Attempt<'_, F>,
    args: &mut Args<F>,
    keep: bool,
    trace: Option<&TraceContext>,
) -> Result<Sent<F::Reply>, Error> {
    if let Destination::Here(function) = &attempt.destination {
        // Served here: under this node's concurrency caps, as a call from another node is.
        let permit = match transport.admission.admit(F::NAME) {
            Ok(permit) => permit,
            Err(refused) => {
                crate::telemetry::pushback_sent(F::NAME, refused.cap(), refused.limit());
                let error = Error::ServiceUnavailable {
                    node: attempt.node.to_string(),
                    reason: Unavailable::Overloaded,
                };
                return Ok(Sent::Refused(error, args.encoded.take()));
            }
        };
        let function = Arc::clone(function);
        let abandoned = Arc::clone(attempt.counted.abandoned(&transport.abandoned));
        let accounting = Accounting {
            counted: (
                std::mem::replace(&mut attempt.counted, Counted::Nothing),
                permit,
            ),
            abandoned,
        };
        let args = args.take()?;
        let (balancer, time) = (attempt.balancer, (attempt.timeout, attempt.deadline));
        let reply = call::run_local(transport, balancer, function, args, time, accounting);
        return Ok(Sent::Replied(reply.await));
    }
    let bytes = args.encode(transport, (attempt.balancer, attempt.timeout), keep, trace)?;
    let Some(actor) = attempt.actor() else {
        return Err(no_endpoint(&attempt.node));
    };
    let (deadlines, time) = (&transport.deadlines, (attempt.timeout, attempt.deadline));
    let mut load = None;
    let sent = call::send_encoded::<F>(deadlines, actor, &attempt.node, bytes, time, &mut load);
    let sent = sent.await;
    if let (Some(report), Some(selection)) = (&load, &attempt.selection) {
        selection.keep_report(report);
    }
    attempt.load = load;
    Ok(sent)
}

/// (Not reached: an attempt that does not run here has an actor.)
fn no_endpoint(node: &str) -> Error {
    Error::ServiceUnavailable {
        node: node.to_string(),
        reason: Unavailable::NoEndpoint,
    }
}

async fn route_cast<F: RemoteFunction>(
    node: &Arc<NodeShared>,
    target: &Target,
    options: &CallOptions,
    args: F::Args,
    telemetry: &mut Telemetry,
) -> Result<Arc<str>, Error> {
    let route = Route::new(node, target, options)?;
    let late_span = !telemetry.is_started();
    let mut exclude: Vec<Arc<str>> = Vec::new();
    loop {
        let again = !exclude.is_empty();
        let mut attempt = route
            .choose::<F>(Kind::Cast, &mut exclude, again, &mut None, telemetry)
            .await?;
        let span = if late_span {
            telemetry.span()
        } else {
            Span::none()
        };
        // A cast run here that a drain counts (`call_directly`, `CallDirect`, a tracked
        // random-node cast): served in-process, holding its count until its function has
        // ended (the endpoint would serve it uncounted).
        let here = matches!(attempt.counted, Counted::InFlight(_)) && *attempt.node == *node.name;
        // Every cast is encoded, so every cast carries the trace context (one served here
        // runs on a task of the endpoint's, outside the cast's span).
        let trace = telemetry.trace();
        let sent = span.in_scope(|| match attempt.actor() {
            Some(_) if here => {
                let counted = std::mem::replace(&mut attempt.counted, Counted::Nothing);
                cast_here::<F>(node, attempt.balancer, &args, counted, trace)
            }
            Some(actor) => {
                let to = (&*attempt.node, attempt.balancer);
                call::cast_endpoint::<F>(&node.transport, actor, to, &args, trace)
            }
            None => Err(no_endpoint(&attempt.node)),
        });
        match sent {
            Err(Error::ServiceUnavailable {
                reason: Unavailable::Disconnected,
                ..
            }) if route.reselects() && exclude.len() < MAX_RESELECTIONS => {
                exclude.push(Arc::clone(&attempt.node));
            }
            handed_over => {
                // (The latency of a cast: from the pick to its hand-over.)
                attempt.report(&handed_over);
                return handed_over.map(|()| attempt.node.clone());
            }
        }
    }
}

/// Serves a cast of `F` carrying `trace` on this node in a task of its own that holds
/// `counted` until the function has ended.
///
/// Errors: the arguments cannot be encoded.
fn cast_here<F: RemoteFunction>(
    node: &Arc<NodeShared>,
    balancer: Option<&str>,
    args: &F::Args,
    counted: Counted,
    trace: Option<&TraceContext>,
) -> Result<(), Error> {
    let transport = &node.transport;
    let zero = std::time::Duration::ZERO;
    let (bytes, _id) = call::encode::<F>(transport, balancer, args, zero, trace)?;
    let abandoned = Arc::clone(counted.abandoned(&transport.abandoned));
    crate::endpoint::dispatch_with(
        node,
        crate::wire::RpcMessage::Cast(bytes),
        counted,
        abandoned,
    );
    Ok(())
}

/// A call's arguments until they are encoded — a `Payload` is moved into its call, other
/// types are encoded by reference and kept while the call may go elsewhere — and a call
/// readied earlier: one that never left, or that a leaving member handed back.
pub(super) struct Args<F: RemoteFunction> {
    pub(super) args: Option<F::Args>,
    pub(super) encoded: Option<Vec<u8>>,
}

impl<F: RemoteFunction> Args<F> {
    fn new(args: F::Args) -> Self {
        Self {
            args: Some(args),
            encoded: None,
        }
    }

    /// A call encoded already (a hedged call's second copy).
    pub(super) fn from_encoded(bytes: Vec<u8>) -> Self {
        Self {
            args: None,
            encoded: Some(bytes),
        }
    }

    /// The arguments, for a run here.
    fn take(&mut self) -> Result<F::Args, Error> {
        match (self.args.take(), self.encoded.take()) {
            (Some(args), _) => Ok(args),
            (None, Some(bytes)) => call::decode_args::<F>(bytes),
            (None, None) => Err(call::args_gone::<F>()),
        }
    }

    /// The call encoded for `balancer` with `timeout`, carrying `trace` (see [`run_or_send`]
    /// for `keep`).
    fn encode(
        &mut self,
        transport: &Transport,
        (balancer, timeout): (Option<&str>, std::time::Duration),
        keep: bool,
        trace: Option<&TraceContext>,
    ) -> Result<(Vec<u8>, u64), Error> {
        if let Some(bytes) = self.encoded.take() {
            return call::reencode::<F>(transport, balancer, bytes, timeout, trace);
        }
        if keep && !crate::payload::is_payload::<F::Args>() {
            return match &self.args {
                Some(kept) => call::encode::<F>(transport, balancer, kept, timeout, trace),
                None => Err(call::args_gone::<F>()),
            };
        }
        match self.args.take() {
            Some(owned) => call::encode_owned::<F>(transport, balancer, owned, timeout, trace),
            None => Err(call::args_gone::<F>()),
        }
    }
}
