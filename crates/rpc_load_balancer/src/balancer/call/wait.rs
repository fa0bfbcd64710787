//! The one retry loop of the call pipeline: while there is nobody to send to — a balancer with
//! no member to pick, no connected node matching a random-node call's filter — wait as the
//! call's [`Retry`] allows (asynchronously, jittered, ending early when what is looked at
//! changes, never past the call's deadline) and look again.

use std::future::Future;

use futures_util::future::Either;

use tokio::time::Instant;

use crate::retry::retryable;
use crate::{Error, Retry};

/// Looks with `look` until it finds somebody: `look` returns what it found, or the error of
/// finding nobody, and a future that ends when what it looked at changes (subscribed before
/// looking, so a change in between ends the wait at once). While the error says nobody could
/// be found ([`retryable`], or no matching node) and `retry` allows another look before
/// `deadline`, tells `waiting` (the attempt number, from 1, and the error: it logs the wait),
/// waits for the jittered retry interval or the change, whichever comes first, then runs
/// `recheck` (which may end the call) and looks again.
///
/// The first look happens here, before the future is polled: a look that finds somebody (or
/// fails for good) is a ready future, and only a call that must wait builds the retry loop,
/// boxed — so every other call's future does not carry the loop and its timer.
///
/// Returns what was found and whether it waited; or the last error of `look` or `recheck`.
pub(crate) fn look_until_found<'a, T, C>(
    retry: Retry,
    deadline: Instant,
    mut look: impl FnMut() -> (Result<T, Error>, C) + Send + 'a,
    waiting: impl Fn(u32, &Error) + Send + 'a,
    recheck: impl Fn() -> Result<(), Error> + Send + 'a,
) -> impl Future<Output = Result<(T, bool), Error>> + Send + 'a
where
    T: Send + 'a,
    C: Future + Send + 'a,
{
    let (found, changed) = look();
    match found {
        Err(error) if waits(&error, retry, 0, deadline) => Either::Right(Box::pin(wait_and_look(
            (retry, deadline),
            look,
            waiting,
            recheck,
            (error, changed),
        ))),
        outcome => Either::Left(std::future::ready(outcome.map(|found| (found, false)))),
    }
}

/// Whether a look that failed with `error` after `attempt` waits may wait and look again.
fn waits(error: &Error, retry: Retry, attempt: u32, deadline: Instant) -> bool {
    waits_for(error) && retry.allows_after(attempt) && Instant::now() < deadline
}

/// The retry loop of [`look_until_found`], from a first look that failed with `error` while
/// watching `changed`.
async fn wait_and_look<T, C: Future>(
    (retry, deadline): (Retry, Instant),
    mut look: impl FnMut() -> (Result<T, Error>, C),
    waiting: impl Fn(u32, &Error),
    recheck: impl Fn() -> Result<(), Error>,
    (mut error, mut changed): (Error, C),
) -> Result<(T, bool), Error> {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let wake = deadline.min(crate::deadline::after(retry.jittered()));
        waiting(attempt, &error);
        let _ = tokio::time::timeout_at(wake, changed).await;
        recheck()?;
        let (found, next) = look();
        match found {
            Err(again) if waits(&again, retry, attempt, deadline) => {
                (error, changed) = (again, next)
            }
            outcome => return outcome.map(|found| (found, true)),
        }
    }
}

/// Whether `error` says there was nobody to send to (so waiting may help).
fn waits_for(error: &Error) -> bool {
    retryable(error) || matches!(error, Error::NoMatchingNodes { .. })
}
