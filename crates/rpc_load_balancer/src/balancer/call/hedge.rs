//! A hedged attempt (issue 22): the first copy of a routed idempotent call runs; if it has no
//! reply after the balancer's hedge delay and the hedge budget allows, a second copy goes to
//! a member the call has not tried (the same re-selection as a retry's, [`Route::choose`]).
//! The first reply wins; a copy that fails while the other still runs waits for the other
//! (within the call's deadline). The copy that did not win is dropped: a sent one is
//! cancelled on its member (`ControlRequest::Cancel`), a run here is aborted, and its
//! selection ends as cancelled (not a failure of its member), releasing its in-flight count.
//!
//! Only calls whose balancer has a [`HedgePolicy`](crate::HedgePolicy) come here; other calls
//! never build any of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::dispatch::{run_or_send, Args};
use super::target::{Attempt, Kind, Route};
use super::telemetry::Telemetry;
use crate::balancer::shared::BalancerShared;
use crate::call::{self, Sent};
use crate::function::RemoteFunction;
use crate::retry::{Hedging, LatencyEstimate};
use crate::telemetry::TraceContext;
use crate::Error;

/// One copy's end: what run-or-send gave.
type Ended<T> = Result<Sent<T>, Error>;

/// Runs `attempt` (the call's first) with `args`, hedged as `hedging` (of `shared`) says; on
/// return `attempt` is the copy whose end is returned (the winner, or the copy that ended last
/// when neither replied), and `exclude` holds the member of a second copy. `trace` is the
/// call's trace context.
///
/// Errors: as [`run_or_send`]'s, of the copy returned.
pub(super) async fn run_hedged<'r, F: RemoteFunction>(
    (shared, hedging): (&'r Arc<BalancerShared>, &'r Hedging),
    route: &Route<'r>,
    attempt: &mut Attempt<'r, F>,
    args: &mut Args<F>,
    exclude: &mut Vec<Arc<str>>,
    telemetry: &mut Telemetry,
    trace: Option<TraceContext>,
) -> Ended<F::Reply> {
    let transport = &route.node.transport;
    hedging.budget.deposit(shared.budget_now());
    let estimate = hedging.estimate(F::NAME);
    let started = Instant::now();
    // No second copy before the percentile has samples, or if it would leave at the deadline
    // (or later than an instant can say: a delay of `Duration::MAX` means never).
    let due = hedging
        .delay(estimate.as_deref())
        .and_then(|delay| due_at(started, delay, attempt.deadline));
    // The second copy's bytes, made before the first copy takes the arguments.
    let spare = due.and_then(|_| spare::<F>(route, attempt, args, trace.as_ref()));
    let (Some(due), Some(spare)) = (due, spare) else {
        let ended = run_or_send(transport, attempt, args, true, trace.as_ref()).await;
        record(estimate.as_deref(), &ended, started);
        return ended;
    };
    let first_node = Arc::clone(&attempt.node);
    let mut second: Option<Attempt<'r, F>> = None;
    let mut second_args = Args::<F>::from_encoded(spare);
    // Which copy's end is the call's, that end, and the other copy's if it ended.
    let (call_is_first, call_end, other_end) = {
        let first = run_or_send(transport, attempt, args, true, trace.as_ref());
        tokio::pin!(first);
        tokio::select! {
            ended = &mut first => {
                record(estimate.as_deref(), &ended, started);
                return ended;
            }
            () = tokio::time::sleep_until(due) => {}
        }
        // Due: a member the call has not tried, as the budget allows.
        let mut tried = exclude.clone();
        tried.push(Arc::clone(&first_node));
        let chosen = if route.nobody_else(&tried) {
            None
        } else if !hedging.budget.withdraw(shared.budget_now()) {
            crate::telemetry::hedge_refused(&shared.name);
            None
        } else {
            // (The pick may wait for members: the first copy's reply ends that.)
            let mut none = None;
            tokio::select! {
                ended = &mut first => {
                    telemetry.target(&first_node);
                    record(estimate.as_deref(), &ended, started);
                    return ended;
                }
                chosen = route.choose::<F>(Kind::Call, &mut tried, true, &mut none, telemetry) => {
                    if chosen.is_err() {
                        // No member could take it: the token goes back.
                        hedging.budget.refund(shared.budget_now());
                    }
                    chosen.ok()
                }
            }
        };
        let Some(chosen) = chosen else {
            telemetry.target(&first_node);
            let ended = first.await;
            record(estimate.as_deref(), &ended, started);
            return ended;
        };
        crate::telemetry::hedged(&shared.name, &chosen.node);
        // Neither member is tried again by a retry that may follow.
        exclude.push(Arc::clone(&first_node));
        exclude.push(Arc::clone(&chosen.node));
        let second_copy = second.insert(chosen);
        let other = run_or_send(
            transport,
            second_copy,
            &mut second_args,
            true,
            trace.as_ref(),
        );
        tokio::pin!(other);
        // A copy that ends without the function's result waits for the other.
        let (mut first_end, mut second_end) = (None, None);
        loop {
            tokio::select! {
                ended = &mut first, if first_end.is_none() => {
                    if replied_ok(&ended) || second_end.is_some() {
                        break (true, ended, second_end.take());
                    }
                    first_end = Some(ended);
                }
                ended = &mut other, if second_end.is_none() => {
                    if replied_ok(&ended) || first_end.is_some() {
                        break (false, ended, first_end.take());
                    }
                    second_end = Some(ended);
                }
            }
        }
        // The copy still running, if any, is dropped here: cancelled.
    };
    record(estimate.as_deref(), &call_end, started);
    let Some(mut second) = second else {
        // (Not reached: the second copy ran.)
        return call_end;
    };
    if call_is_first {
        telemetry.target(&first_node);
        end_other(&mut second, other_end);
        // (The second copy's attempt drops: released, as cancelled unless it ended.)
    } else {
        end_other(attempt, other_end);
        if replied_ok(&call_end) {
            crate::telemetry::hedge_won(&shared.name, &second.node);
        }
        std::mem::swap(attempt, &mut second);
        // (The first copy's attempt, now `second`, drops.)
    }
    call_end
}

/// Whether a copy's end is a reply with the function's result.
fn replied_ok<T>(ended: &Ended<T>) -> bool {
    matches!(ended, Ok(Sent::Replied(Ok(_))))
}

/// Reports the end of the copy that is not the call's, if it ended (a copy still running was
/// dropped, cancelled: its selection ends as cancelled when `attempt` drops): a reply is
/// reported as its outcome, a lost connection as a failure; a copy refused unrun or never
/// sent is not its member's failure.
fn end_other<F>(attempt: &mut Attempt<'_, F>, ended: Option<Ended<F::Reply>>)
where
    F: RemoteFunction,
{
    match ended {
        Some(Ok(Sent::Replied(result))) => attempt.report(&result),
        Some(Ok(Sent::Dropped)) => {
            let error = Error::ServiceUnavailable {
                node: attempt.node.to_string(),
                reason: crate::Unavailable::ConnectionLost,
            };
            let _ = attempt.fail(error);
        }
        _ => {}
    }
}

/// Counts a reply's latency (from the first copy's start) in the function's estimate.
fn record<T>(estimate: Option<&LatencyEstimate>, ended: &Ended<T>, started: Instant) {
    if let (Some(estimate), true) = (estimate, replied_ok(ended)) {
        estimate.record(started.elapsed());
    }
}

/// The call encoded once more for a second copy (`None`: it cannot be, then it is not
/// hedged): from the kept arguments, or a copy of the bytes readied earlier.
fn spare<F: RemoteFunction>(
    route: &Route<'_>,
    attempt: &Attempt<'_, F>,
    args: &Args<F>,
    trace: Option<&TraceContext>,
) -> Option<Vec<u8>> {
    let transport = &route.node.transport;
    match (&args.args, &args.encoded) {
        (Some(kept), _) => {
            let timeout: Duration = attempt.timeout;
            call::encode::<F>(transport, attempt.balancer, kept, timeout, trace)
                .ok()
                .map(|(bytes, _id)| bytes)
        }
        (None, Some(bytes)) => Some(bytes.clone()),
        (None, None) => None,
    }
}

/// When a call started at `started` sends its second copy after `delay`: `None` if that is at
/// or past its `deadline`, or later than an [`Instant`] can say (a delay of `Duration::MAX`
/// means never, not a panic).
fn due_at(started: Instant, delay: std::time::Duration, deadline: Instant) -> Option<Instant> {
    started.checked_add(delay).filter(|due| *due < deadline)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn a_delay_past_the_deadline_or_past_what_an_instant_holds_sends_no_second_copy() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(1);
        let ms = Duration::from_millis;
        assert_eq!(super::due_at(now, ms(10), deadline), Some(now + ms(10)));
        assert_eq!(super::due_at(now, ms(1_000), deadline), None);
        assert_eq!(super::due_at(now, Duration::MAX, deadline), None);
    }
}
