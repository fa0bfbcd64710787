//! The context of the call a function serves: its deadline, the time left, and whether
//! anyone still wants its reply.
//!
//! The library aborts a call's future when the call ends early (its deadline passes on the
//! serving node, its caller cancels it or drops its future, a drain gives up on it), but an
//! abort only stops a future at its next `.await`: a loop that never awaits, or work handed to
//! [`tokio::task::spawn_blocking`], runs on. Such work asks its [`CallContext`] instead:
//! [`CallContext::current`] inside the function gives a cheap handle that can be moved into a
//! blocking closure and polled there ([`CallContext::is_cancelled`]), or awaited
//! ([`CallContext::cancelled`]).
//!
//! The context is a tokio task-local set around the function's future, so the signature of
//! [`RemoteFunction::call`](super::RemoteFunction::call) stays `call(&self, args)` and simple
//! functions don't change.
//!
//! Cancellation is a flag and a [`tokio::sync::Notify`] of our own rather than tokio-util's
//! `CancellationToken`: polling it is one atomic load (the token locks a mutex), it needs no
//! dependency in the library, and no third-party type appears in the public API.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

tokio::task_local! {
    /// The context of the call the current task serves.
    static CURRENT: CallContext;
}

/// The context of one call, as the function serving it sees it: the call's deadline on this
/// node, the time left before it, and whether the call was cancelled.
///
/// Get it inside [`RemoteFunction::call`](crate::RemoteFunction::call) with
/// [`CallContext::current`]. It is a cheap handle (an `Arc` and an `Instant`): clone it and
/// move it into [`tokio::task::spawn_blocking`] or [`tokio::spawn`], where the task-local is
/// not set. Every clone sees the same cancellation.
///
/// A call is **cancelled** when nobody will use its reply any more:
///
/// * its deadline on this node passed (the caller's timeout, measured from when this node
///   began serving the call);
/// * its caller gave up first: the caller's timeout ran out or its future was dropped (a
///   remote caller sends a cancel request; a caller on this node drops the run);
/// * a drain gave up on it: [`Balancer::stop`](crate::Balancer::stop) past its
///   `drain_timeout` for calls routed through that balancer, [`Node::shutdown`](crate::Node::shutdown)
///   for calls made to this node directly;
/// * its future was dropped or panicked for any other reason.
///
/// What a function returns once its call is cancelled matters little, but is defined: past
/// the deadline the caller gets [`Error::RequestTimeout`](crate::Error::RequestTimeout)
/// whatever the function returned; a caller that gave up gets nothing more; after a drain gave
/// up, the reply is sent if the caller can still be reached, so return an error rather than a
/// partial result that looks complete.
///
/// A call that returned is not cancelled afterwards. Casts have no deadline
/// ([`deadline`](Self::deadline) is `None`) and are cancelled only by a drain that gives up.
/// Outside a call (a function called directly, e.g. in a unit test), `current()` is a context
/// with no deadline that is never cancelled.
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::{CallContext, FunctionError, RemoteFunction};
///
/// /// Counts up for `ms` ms on the blocking pool, unless the call is cancelled first.
/// struct Spin;
/// impl RemoteFunction for Spin {
///     const NAME: &'static str = "spin";
///     type Args = u64;
///     type Reply = u64;
///     async fn call(&self, ms: u64) -> Result<u64, FunctionError> {
///         let context = CallContext::current();
///         let until = std::time::Instant::now() + Duration::from_millis(ms);
///         let spin = tokio::task::spawn_blocking(move || {
///             let mut loops = 0u64;
///             while std::time::Instant::now() < until {
///                 if context.is_cancelled() {
///                     return Err(FunctionError::new("cancelled"));
///                 }
///                 loops += 1;
///             }
///             Ok(loops)
///         });
///         spin.await.map_err(|e| FunctionError::new(e.to_string()))?
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// // Outside a call: no deadline, never cancelled.
/// let context = CallContext::current();
/// assert_eq!(context.deadline(), None);
/// assert!(!context.is_cancelled());
/// // A context of its own, with a deadline 50 ms away, set around a future:
/// let deadline = std::time::Instant::now() + Duration::from_millis(50);
/// let context = CallContext::new(Some(deadline));
/// let cut_short = context.clone().scope(Spin.call(60_000)).await;
/// assert_eq!(cut_short.unwrap_err().message(), "cancelled");
/// assert!(context.is_cancelled(), "the deadline passed");
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct CallContext {
    deadline: Option<Instant>,
    /// Fired when this call is cancelled.
    own: Arc<Signal>,
    /// Fired when the drain of everything this call belongs to (its balancer, or its node)
    /// gives up on it.
    abandoned: Option<Arc<Signal>>,
}

impl CallContext {
    /// A context with this deadline (`None`: none) that is not cancelled, for running a
    /// function outside a call, e.g. in a test with [`scope`](Self::scope). The library makes
    /// the contexts of real calls.
    pub fn new(deadline: Option<Instant>) -> Self {
        Self {
            deadline,
            ..Self::default()
        }
    }

    /// A call's context: `deadline`, cancelled also when `abandoned` fires.
    pub(crate) fn serving(deadline: Option<Instant>, abandoned: Arc<Signal>) -> Self {
        Self {
            deadline,
            own: Arc::default(),
            abandoned: Some(abandoned),
        }
    }

    /// The context of the call the current task serves: set for the future of
    /// [`RemoteFunction::call`](crate::RemoteFunction::call) (and in futures run with
    /// [`scope`](Self::scope)). Elsewhere — in a task the function spawned, in a blocking
    /// closure, outside any call — a context with no deadline that is never cancelled: take
    /// the context before spawning and move the clone in.
    pub fn current() -> Self {
        CURRENT.try_with(Self::clone).unwrap_or_default()
    }

    /// The call's deadline on this node, or `None` when it has none (a cast). It is the
    /// caller's timeout counted from when this node began serving the call (the time in
    /// transit is not deducted, so the caller may give up a little earlier).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The time left before the deadline (zero once it passed), or `None` when the call has
    /// no deadline.
    pub fn time_left(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// Whether the call is cancelled (see [`CallContext`] for when): its deadline passed, or
    /// a cancellation fired. Cheap enough to poll in a busy loop (an atomic load or two and,
    /// with a deadline, a read of the monotonic clock).
    pub fn is_cancelled(&self) -> bool {
        self.own.is_fired()
            || self.abandoned.as_ref().is_some_and(|a| a.is_fired())
            || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Completes once the call is cancelled (at once if it already is). For `select!`-style
    /// code that should stop early; a future that simply awaits is aborted by the library
    /// without it.
    pub async fn cancelled(&self) {
        let at_deadline = async {
            match self.deadline {
                Some(deadline) => {
                    tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)).await
                }
                None => std::future::pending().await,
            }
        };
        let abandoned = async {
            match &self.abandoned {
                Some(abandoned) => abandoned.fired().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.own.fired() => {}
            () = abandoned => {}
            () = at_deadline => {}
        }
    }

    /// Cancels the call: [`is_cancelled`](Self::is_cancelled) is `true` from now on, for
    /// every clone, and [`cancelled`](Self::cancelled) completes. The library does this; a
    /// test may too.
    pub fn cancel(&self) {
        self.own.fire();
    }

    /// Runs `future` with this context as [`current`](Self::current): for a task a function
    /// spawns (`tokio::spawn(CallContext::current().scope(work))`), or to run a function
    /// under a context of your own in a test.
    pub fn scope<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self, future)
    }

    /// Runs the future of one call with this context as current. If it is dropped before it
    /// completes (aborted, timed out, cancelled by its caller, panicked), the context is
    /// cancelled, so work it handed elsewhere sees it.
    pub(crate) async fn run<F: Future>(self, future: F) -> F::Output {
        let cancel_if_dropped = CancelOnDrop(Some(Arc::clone(&self.own)));
        let output = self.scope(future).await;
        cancel_if_dropped.disarm();
        output
    }
}

/// Cancels its signal when dropped, unless disarmed.
struct CancelOnDrop(Option<Arc<Signal>>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(signal) = self.0.take() {
            signal.fire();
        }
    }
}

/// A one-way flag that can be polled and awaited: a call's cancellation, or the giving up of
/// a drain.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    fired: AtomicBool,
    notify: Notify,
}

impl Signal {
    /// Sets the flag and wakes every waiter (once; later calls do nothing).
    pub(crate) fn fire(&self) {
        if !self.fired.swap(true, Ordering::AcqRel) {
            self.notify.notify_waiters();
        }
    }

    /// Whether [`fire`](Self::fire) was called.
    pub(crate) fn is_fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }

    /// Completes once the flag is set.
    async fn fired(&self) {
        loop {
            let mut notified = pin!(self.notify.notified());
            // Registered before the check, so a fire in between wakes it.
            notified.as_mut().enable();
            if self.is_fired() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outside_a_call_there_is_no_deadline_and_no_cancellation() {
        let context = CallContext::current();
        assert_eq!(context.deadline(), None);
        assert_eq!(context.time_left(), None);
        assert!(!context.is_cancelled());
    }

    #[tokio::test]
    async fn the_deadline_and_time_left_are_the_calls() {
        let deadline = Instant::now() + Duration::from_secs(30);
        let context = CallContext::new(Some(deadline));
        let seen = context
            .clone()
            .scope(async { CallContext::current() })
            .await;
        assert_eq!(seen.deadline(), Some(deadline));
        let left = seen.time_left().unwrap();
        assert!(left <= Duration::from_secs(30), "{left:?}");
        assert!(left > Duration::from_secs(20), "{left:?}");
        assert!(!seen.is_cancelled());
        let past = CallContext::new(Some(Instant::now() - Duration::from_millis(1)));
        assert_eq!(past.time_left(), Some(Duration::ZERO));
    }

    #[tokio::test]
    async fn a_passed_deadline_cancels() {
        let context = CallContext::new(Some(Instant::now() + Duration::from_millis(20)));
        assert!(!context.is_cancelled());
        tokio::time::timeout(Duration::from_secs(10), context.cancelled())
            .await
            .expect("cancelled at the deadline");
        assert!(context.is_cancelled());
    }

    #[tokio::test]
    async fn cancelling_wakes_every_clone() {
        let context = CallContext::new(None);
        let waiter = {
            let context = context.clone();
            tokio::spawn(async move { context.cancelled().await })
        };
        tokio::task::yield_now().await;
        context.clone().cancel();
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert!(context.is_cancelled());
        // Already cancelled: completes at once.
        context.cancelled().await;
    }

    #[tokio::test]
    async fn an_abandoned_drain_cancels_its_calls() {
        let drain = Arc::new(Signal::default());
        let context = CallContext::serving(None, Arc::clone(&drain));
        assert!(!context.is_cancelled());
        drain.fire();
        assert!(context.is_cancelled());
        context.cancelled().await;
    }

    #[tokio::test]
    async fn a_run_dropped_before_it_ends_is_cancelled_and_a_finished_one_is_not() {
        let context = CallContext::new(None);
        let run = tokio::spawn(context.clone().run(std::future::pending::<()>()));
        tokio::task::yield_now().await;
        assert!(!context.is_cancelled());
        run.abort();
        assert!(run.await.unwrap_err().is_cancelled());
        assert!(context.is_cancelled(), "an aborted run cancels its context");

        let context = CallContext::new(None);
        let seen = context
            .clone()
            .run(async { CallContext::current().deadline() })
            .await;
        assert_eq!(seen, None);
        assert!(!context.is_cancelled(), "a finished run is not cancelled");
    }

    #[tokio::test]
    async fn a_panicking_run_is_cancelled() {
        use futures_util::FutureExt;
        let context = CallContext::new(None);
        let run = context.clone().run(async { panic!("boom") });
        let caught = std::panic::AssertUnwindSafe(run).catch_unwind().await;
        assert!(caught.is_err());
        assert!(context.is_cancelled());
    }
}
