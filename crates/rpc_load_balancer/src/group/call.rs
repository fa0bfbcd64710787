//! Calls and casts to an actor group's members: [`GroupCall`] (ractor's `call_t!` over the
//! group) and [`GroupCast`] (its `cast!`).

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{ActorRef, Message, MessagingErr, RpcReplyPort};

use super::ActorGroup;
use crate::balancer::call::forward_reply::forward;
use crate::balancer::call::wait::look_until_found;
use crate::balancer::{BalancerShared, Members, Selection};
use crate::routing::OutcomeKind;
use crate::{Error, ForwardedReply, Unavailable};

/// How many times a call or cast is sent to another member after a send that provably did not
/// reach its member (its actor had stopped).
const MAX_RESENDS: usize = 3;

/// A reply port dropped this close to the call's deadline is its timeout (ractor_cluster
/// drops a remote actor's port when the port's timeout runs out, racing the caller's timer).
const DEADLINE_SLACK: Duration = Duration::from_millis(20);

/// A call of an actor group's member: set [`timeout`](Self::timeout) and [`key`](Self::key),
/// then await it for the reply.
///
/// While the group has no member the call waits for one (as the group's `retry` allows,
/// within its timeout). The chosen member is counted in flight until the call ends, and the
/// call's outcome and latency (from the pick to the reply) go to the group's selector. A send
/// that provably did not reach its actor (it had stopped) goes to another member, at most 3
/// more times, within the timeout; a message that reached an actor is never sent again.
///
/// Errors: [`Error::NoMembers`] when nobody joined in time; [`Error::Overloaded`] when every
/// member is at `max_in_flight_per_member`; [`Error::RequestTimeout`] (the node of the actor
/// that did not reply in time — it may still handle the message);
/// [`Error::ServiceUnavailable`] with [`Unavailable::Disconnected`] (the actor had stopped,
/// and no other member could take the call) or [`Unavailable::ConnectionLost`] (the reply
/// port was dropped unanswered: the actor stopped or failed while handling it, or its node's
/// session closed); [`Error::BadRequest`] when the member does not take messages of type `M`
/// (checked for actors on this node only: ractor cannot check a remote actor's type, whose
/// node drops a message it cannot decode — the call then ends as a timeout);
/// [`Error::UnknownBalancer`] once the group is stopped; the algorithm's own errors.
#[must_use = "a call does nothing until awaited"]
pub struct GroupCall<'a, M: Message, R, B> {
    group: &'a ActorGroup<M>,
    build: B,
    timeout: Option<Duration>,
    key: Option<Vec<u8>>,
    _reply: std::marker::PhantomData<fn() -> R>,
}

impl<'a, M, R, B> GroupCall<'a, M, R, B>
where
    M: Message,
    R: Send + 'static,
    B: Fn(RpcReplyPort<R>) -> M + Send + Sync + 'a,
{
    pub(super) fn new(group: &'a ActorGroup<M>, build: B) -> Self {
        Self {
            group,
            build,
            timeout: None,
            key: None,
            _reply: std::marker::PhantomData,
        }
    }

    /// The call's timeout, for waiting for a member and the reply together (default: the
    /// group's `call_timeout`, else the node's, 10 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The routing key (HashRing sends equal keys to the same member).
    pub fn key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.key = Some(key.as_ref().to_vec());
        self
    }

    /// Runs the call on a task of its own and delivers its outcome to `receiver` as the
    /// message `map(result)` (`result` as awaiting the call gives it), instead of being
    /// awaited: an actor's handler starts the call and returns at once, and the reply arrives
    /// as one of its next messages. The call is dropped — its member's selection released —
    /// if `receiver` stops before it ends (the member's actor may still handle the message:
    /// ractor has no cancellation). As
    /// [`BalancedCall::forward_to`](crate::BalancedCall::forward_to), whose notes on the
    /// returned [`ForwardedReply`] apply.
    pub fn forward_to<T, F>(self, receiver: &ActorRef<T>, map: F) -> ForwardedReply
    where
        B: 'static,
        T: Message,
        F: FnOnce(Result<R, Error>) -> T + Send + 'static,
    {
        let group = self.group.clone();
        let (build, timeout, key) = (self.build, self.timeout, self.key);
        let call = async move {
            let call = GroupCall {
                group: &group,
                build,
                timeout,
                key,
                _reply: std::marker::PhantomData,
            };
            call.run().await
        };
        forward(call, receiver, map)
    }

    async fn run(self) -> Result<R, Error> {
        let shared = self.group.shared();
        let timeout = self
            .timeout
            .or(shared.config.call_timeout)
            .unwrap_or(shared.node.config.call_timeout);
        let deadline = crate::deadline::after(timeout);
        let key = self.key.as_deref();
        // Members skipped (at the cap, or refusing the message), and the sends refused.
        let mut exclude: Vec<Arc<str>> = Vec::new();
        let mut refusals = 0;
        loop {
            let mut selection = pick(shared, key, &mut exclude, deadline, true).await?;
            let member = selection.member();
            let (cell, node, node_arc, id) = (
                member.cell().clone(),
                member.node().to_string(),
                Arc::clone(member.view().node_arc()),
                Arc::clone(member.view().id_arc()),
            );
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                selection.report(timeout, || OutcomeKind::Cancelled, None);
                return Err(Error::RequestTimeout { node, timeout });
            }
            let build = &self.build;
            let sent = tokio::time::Instant::now();
            let result = ractor::rpc::call::<M, R, _>(&cell, build, Some(left)).await;
            let outcome = match result {
                Ok(CallResult::Success(reply)) => Ok(reply),
                Ok(CallResult::Timeout) => Err(Error::RequestTimeout { node, timeout }),
                // A remote actor's reply port is dropped by ractor_cluster when the port's
                // timeout (the call's) runs out: at the deadline, that is a timeout.
                Ok(CallResult::SenderError) if sent.elapsed() + DEADLINE_SLACK >= left => {
                    Err(Error::RequestTimeout { node, timeout })
                }
                Ok(CallResult::SenderError) => Err(Error::ServiceUnavailable {
                    node,
                    reason: Unavailable::ConnectionLost,
                }),
                Err(MessagingErr::InvalidActorType) => Err(Error::BadRequest {
                    node,
                    message: format!("the actor does not take {}", std::any::type_name::<M>()),
                }),
                Err(MessagingErr::SendErr(_) | MessagingErr::ChannelClosed) => {
                    // Not delivered: the actor had stopped. Another member, if any.
                    let again = refused(
                        shared,
                        &mut selection,
                        timeout,
                        id,
                        &mut exclude,
                        &mut refusals,
                    );
                    if again && tokio::time::Instant::now() < deadline {
                        continue;
                    }
                    Err(Error::ServiceUnavailable {
                        node,
                        reason: Unavailable::Disconnected,
                    })
                }
            };
            selection.report(timeout, || OutcomeKind::of(&outcome), None);
            self.group.ended(&node_arc, outcome.is_ok());
            return outcome;
        }
    }
}

impl<'a, M, R, B> IntoFuture for GroupCall<'a, M, R, B>
where
    M: Message,
    R: Send + 'static,
    B: Fn(RpcReplyPort<R>) -> M + Send + Sync + 'a,
{
    type Output = Result<R, Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<R, Error>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// A cast to an actor group's member: set [`key`](Self::key), then await it; it resolves
/// once the message is handed to the actor's mailbox (or to its node's session).
///
/// Errors: [`Error::NoMembers`] when nobody joined within the group's `call_timeout`;
/// [`Error::ServiceUnavailable`] with [`Unavailable::Disconnected`] when the chosen actors had
/// stopped (the message is offered to up to 3 more members); [`Error::BadRequest`] when the
/// member does not take messages of type `M` (checked for actors on this node only: a remote
/// actor's node drops a message it cannot decode, and the cast still resolves `Ok`);
/// [`Error::UnknownBalancer`] once the group is stopped; the algorithm's own errors.
#[must_use = "a cast does nothing until awaited"]
pub struct GroupCast<'a, M: Message> {
    group: &'a ActorGroup<M>,
    message: M,
    key: Option<Vec<u8>>,
}

impl<'a, M: Message> GroupCast<'a, M> {
    pub(super) fn new(group: &'a ActorGroup<M>, message: M) -> Self {
        Self {
            group,
            message,
            key: None,
        }
    }

    /// The routing key (HashRing sends equal keys to the same member).
    pub fn key(mut self, key: impl AsRef<[u8]>) -> Self {
        self.key = Some(key.as_ref().to_vec());
        self
    }

    async fn run(self) -> Result<(), Error> {
        let shared = self.group.shared();
        let timeout = shared
            .config
            .call_timeout
            .unwrap_or(shared.node.config.call_timeout);
        let deadline = crate::deadline::after(timeout);
        let key = self.key.as_deref();
        let mut exclude: Vec<Arc<str>> = Vec::new();
        let mut refusals = 0;
        let mut message = self.message;
        loop {
            let mut selection = pick(shared, key, &mut exclude, deadline, false).await?;
            let member = selection.member();
            let (node, node_arc, id) = (
                member.node().to_string(),
                Arc::clone(member.view().node_arc()),
                Arc::clone(member.view().id_arc()),
            );
            let outcome = match member.cell().send_message::<M>(message) {
                Ok(()) => Ok(()),
                Err(MessagingErr::SendErr(back)) => {
                    if refused(
                        shared,
                        &mut selection,
                        timeout,
                        id,
                        &mut exclude,
                        &mut refusals,
                    ) {
                        message = back;
                        continue;
                    }
                    Err(Error::ServiceUnavailable {
                        node,
                        reason: Unavailable::Disconnected,
                    })
                }
                Err(MessagingErr::InvalidActorType) => Err(Error::BadRequest {
                    node,
                    message: format!("the actor does not take {}", std::any::type_name::<M>()),
                }),
                Err(_) => Err(Error::ServiceUnavailable {
                    node,
                    reason: Unavailable::Disconnected,
                }),
            };
            selection.report(timeout, || OutcomeKind::of(&outcome), None);
            self.group.ended(&node_arc, outcome.is_ok());
            return outcome;
        }
    }
}

impl<'a, M: Message> IntoFuture for GroupCast<'a, M> {
    type Output = Result<(), Error>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

/// A send to member `id` of `selection` that did not reach its actor (it had stopped): reported
/// to the selector as the member's failure, the member skipped from now on (`exclude` keeps
/// the skipped members, at the cap or refusing; `refusals` counts the refusals). Whether to
/// send to another member: at most [`MAX_RESENDS`] refusals, and a member not in `exclude`
/// left now — else the refusal is the answer, at once.
fn refused(
    shared: &BalancerShared,
    selection: &mut Selection,
    timeout: Duration,
    id: Arc<str>,
    exclude: &mut Vec<Arc<str>>,
    refusals: &mut usize,
) -> bool {
    selection.report(
        timeout,
        || OutcomeKind::Error(crate::ErrorCode::ServiceUnavailable),
        None,
    );
    exclude.push(id);
    *refusals += 1;
    *refusals <= MAX_RESENDS
        && shared
            .members()
            .views()
            .iter()
            .any(|m| !exclude.iter().any(|id| **id == *m.id()))
}

/// A counted selection for a call (`call`: with the group's per-member cap) or a cast, skipping
/// the members in `exclude` (by member id), waiting while the group has no member as its
/// `retry` allows, until `deadline`.
async fn pick(
    shared: &Arc<BalancerShared>,
    key: Option<&[u8]>,
    exclude: &mut Vec<Arc<str>>,
    deadline: tokio::time::Instant,
    call: bool,
) -> Result<Selection, Error> {
    let retry = shared.config.retry.unwrap_or(shared.node.config.retry);
    loop {
        let excluded: &[Arc<str>] = exclude;
        let ((members, index), _) = look_until_found(
            retry,
            deadline,
            || {
                let mut members = shared.watch();
                let changed = async move {
                    let _ = members.changed().await;
                };
                (shared.choose(key, excluded), changed)
            },
            |attempt, error| {
                tracing::debug!(group = %shared.name, attempt, %error, "no member; waiting to select again");
            },
            || shared.check_running(),
        )
        .await?;
        let members: arc_swap::Guard<Arc<Members>> =
            arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
        let limit = shared.config.max_in_flight_per_member.filter(|_| call);
        let Some(selection) = shared.count_capped(members, index, limit, exclude)? else {
            continue;
        };
        shared.check_running()?;
        return Ok(selection);
    }
}
