//! The wire-version check when a peer comes up. Calls carry the wire version in their first
//! bytes, so a peer of another version would fail every call with
//! [`Error::WireVersion`](crate::Error::WireVersion) while still listed as a member. Instead,
//! as soon as a session is ready each side pings the other; an answer in (or about) another
//! version refuses the peer on the spot: an ERROR event naming both versions, a
//! [`NodeEvent::Refused`], and its session closed, so its members leave every snapshot. Both
//! sides run the check, so both report it. [`Node::connect`](crate::Node::connect) to such a
//! peer returns the typed error. For [`REFUSAL_KEPT`] after that, its new sessions are closed
//! as soon as they authenticate and neither the mesh nor the reconnect logic dials it; a
//! configured peer is dialled again after that time, and checked again.

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorCell;

use super::event::NodeEvent;
use super::shared::NodeShared;
use crate::control::ControlRequest;
use crate::Error;

/// Pings the newly ready peer `name`; refuses it (see the module docs) if it speaks another
/// wire version. Returns whether the peer may stay. A peer that serves no rpc endpoint, or
/// does not answer, is left to the heartbeats.
pub(crate) async fn check(shared: &Arc<NodeShared>, name: &str, session: &ActorCell) -> bool {
    let answer = crate::call::control(
        &shared.transport,
        name,
        &ControlRequest::Ping,
        shared.config.connect_timeout,
    )
    .await;
    match answer {
        Err(error @ Error::WireVersion { .. }) => {
            refuse(shared, name, session, &error);
            false
        }
        _ => {
            shared.peers.clear_refusal(name);
            true
        }
    }
}

/// How long a refused peer stays refused without a new check: its new sessions are closed as
/// soon as they authenticate, and a configured peer's dial loop waits this long before dialling
/// it again (it may have been upgraded by then).
pub(crate) const REFUSAL_KEPT: Duration = Duration::from_secs(30);

/// How long a refused peer's session stays open: long enough for the peer's own check (and a
/// `connect` waiting on it) to get its answer, so both sides report the refusal. Calls routed
/// to it meanwhile are refused unrun and go to other members.
const CLOSE_GRACE: Duration = Duration::from_millis(300);

/// Records `name` as refused, reports it and closes its session after [`CLOSE_GRACE`].
pub(crate) fn refuse(shared: &NodeShared, name: &str, session: &ActorCell, error: &Error) {
    tracing::error!(node = %name, %error, "refusing a peer of another wire version; closing its session");
    shared.peers.refuse(name, error);
    let _ = shared.events.send(NodeEvent::Refused {
        node: name.to_string(),
        reason: error.to_string(),
    });
    let (session, reason) = (session.clone(), format!("refused: {error}"));
    tokio::spawn(async move {
        tokio::time::sleep(CLOSE_GRACE).await;
        session.stop(Some(reason));
    });
}
