//! The one retry loop of the call pipeline: while there is nobody to send to — a balancer with
//! no member to pick, no connected node matching a random-node call's filter — wait as the
//! call's [`Retry`] allows (asynchronously, jittered, ending early when what is looked at
//! changes, never past the call's deadline) and look again.

use std::future::Future;

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
/// Returns what was found and whether it waited; or the last error of `look` or `recheck`.
pub(super) async fn look_until_found<T, C: Future>(
    retry: Retry,
    deadline: Instant,
    mut look: impl FnMut() -> (Result<T, Error>, C),
    waiting: impl Fn(u32, &Error),
    recheck: impl Fn() -> Result<(), Error>,
) -> Result<(T, bool), Error> {
    let mut attempt = 0u32;
    loop {
        let (found, changed) = look();
        match found {
            Err(error)
                if nobody(&error) && retry.allows_after(attempt) && Instant::now() < deadline =>
            {
                attempt += 1;
                let wake = deadline.min(crate::deadline::after(retry.jittered()));
                waiting(attempt, &error);
                let _ = tokio::time::timeout_at(wake, changed).await;
                recheck()?;
            }
            outcome => return outcome.map(|found| (found, attempt > 0)),
        }
    }
}

/// Whether `error` says there was nobody to send to (so waiting may help).
fn nobody(error: &Error) -> bool {
    retryable(error) || matches!(error, Error::NoMatchingNodes { .. })
}
