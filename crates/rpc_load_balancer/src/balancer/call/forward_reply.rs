//! Replies into mailboxes: a call whose outcome is delivered to an actor as one of its own
//! messages instead of being awaited (the shape of ractor's `call_and_forward`), so that an
//! actor's handler can start a call and return at once. [`ForwardedReply`] is the handle.
//!
//! The call runs on a task of its own. It is dropped — and so cancelled, on the serving node
//! too, as any call whose caller gives up — as soon as the receiving actor stops: nobody is
//! left to read its reply.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use ractor::{ActorRef, ActorStatus, Message};
use tokio::task::JoinHandle;

use crate::Error;

/// What became of a forwarded call, from [`ForwardedReply::outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardOutcome {
    /// The call ended (with its reply or its [`Error`]) and the mapped message was put in the
    /// receiving actor's mailbox.
    Delivered,
    /// The receiving actor stopped before the call ended: the call was dropped, which
    /// cancels it (a remote call is told to stop on its serving node); nothing was delivered.
    ReceiverStopped,
    /// The call ended but the receiving actor could not take the message (it stopped in the
    /// meantime): the outcome was dropped.
    Undelivered,
    /// The call or `map` panicked (a user's closure: a group call's message builder, or
    /// `map`): nothing was delivered; the panic is logged at ERROR.
    Panicked,
    /// The forwarding was [aborted](ForwardedReply::abort) before the call ended: the call
    /// was dropped (and so cancelled); nothing was delivered.
    Aborted,
}

/// A call whose outcome goes to an actor as a message: made by
/// [`BalancedCall::forward_to`](crate::BalancedCall::forward_to) and
/// [`Call::forward_to`](crate::Call::forward_to). The call runs on a tokio task; dropping this
/// handle lets it run on (detached), [`abort`](Self::abort) drops the call (cancelling it).
///
/// Exactly one of these happens to every forwarded call: its mapped outcome is delivered
/// once, or it is cancelled because the receiving actor stopped or the forwarding was
/// aborted; [`outcome`](Self::outcome) says which.
#[derive(Debug)]
pub struct ForwardedReply {
    task: Option<JoinHandle<ForwardOutcome>>,
}

impl ForwardedReply {
    /// Whether the forwarding has ended (delivered, or the call dropped).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Drops the call if it has not ended yet (cancelling it: a remote call is told to stop on
    /// its serving node); nothing is delivered then. Does nothing once the outcome was
    /// delivered.
    pub fn abort(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }

    /// Waits for the forwarding to end, and says how it ended.
    pub async fn outcome(mut self) -> ForwardOutcome {
        match self.task.take() {
            Some(task) => match task.await {
                Ok(outcome) => outcome,
                // Aborted (panics of the call and of `map` are caught inside the task).
                Err(_) => ForwardOutcome::Aborted,
            },
            // Delivered at once (no runtime to run a task on).
            None => ForwardOutcome::Delivered,
        }
    }
}

/// Runs `call` on a task and sends `map(outcome)` to `receiver`; drops the call when
/// `receiver` stops first. Without a tokio runtime (nothing can run the call) the receiver
/// gets `map(Err(Error::NodeNotRunning))` at once.
pub(crate) fn forward<R, T, C, M>(call: C, receiver: &ActorRef<T>, map: M) -> ForwardedReply
where
    R: Send + 'static,
    T: Message,
    C: Future<Output = Result<R, Error>> + Send + 'static,
    M: FnOnce(Result<R, Error>) -> T + Send + 'static,
{
    let receiver = receiver.clone();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        deliver(&receiver, map, Err(Error::NodeNotRunning));
        return ForwardedReply { task: None };
    };
    let task = runtime.spawn(async move {
        let cell = receiver.get_cell();
        // A receiver already draining or stopping gets no call sent on its behalf.
        if cell.get_status() >= ActorStatus::Draining {
            return ForwardOutcome::ReceiverStopped;
        }
        let call = AssertUnwindSafe(call).catch_unwind();
        tokio::select! {
            // The call first: an outcome ready when the receiver stops is still delivered
            // (its mailbox refuses it if the actor is gone).
            biased;
            outcome = call => match outcome {
                Ok(outcome) => deliver(&receiver, map, outcome),
                Err(panic) => {
                    let panic = crate::panic::panic_message(panic.as_ref());
                    tracing::error!(actor = %receiver.get_id(), %panic, "a forwarded call panicked: nothing was delivered");
                    ForwardOutcome::Panicked
                }
            },
            _ = cell.wait(None) => ForwardOutcome::ReceiverStopped,
        }
    });
    ForwardedReply { task: Some(task) }
}

/// Sends `map(outcome)` to `receiver`; a panic in `map` drops the outcome (logged at ERROR).
fn deliver<R, T: Message>(
    receiver: &ActorRef<T>,
    map: impl FnOnce(Result<R, Error>) -> T,
    outcome: Result<R, Error>,
) -> ForwardOutcome {
    let message = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| map(outcome))) {
        Ok(message) => message,
        Err(panic) => {
            let panic = crate::panic::panic_message(panic.as_ref());
            tracing::error!(actor = %receiver.get_id(), %panic, "a forwarded reply's map panicked: the outcome was dropped");
            return ForwardOutcome::Panicked;
        }
    };
    match receiver.send_message(message) {
        Ok(()) => ForwardOutcome::Delivered,
        Err(_) => ForwardOutcome::Undelivered,
    }
}

#[cfg(test)]
mod tests;
