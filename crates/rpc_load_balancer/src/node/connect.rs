//! Dialling peers: one bounded `connect` (the background loop that keeps a configured peer
//! connected is in `keep_peer.rs`).
//!
//! `ractor_cluster::client_connect` returns as soon as the TCP socket is open; a wrong cookie
//! or a duplicate node name only shows later as a session that closes. So a connect succeeds
//! only when a session to the address reaches the **ready** state within the bound. A session
//! that closes early is not final either: the losing side of a simultaneous connect closes the
//! same way while the winner comes up.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use ractor::{ActorId, ActorRef};
use ractor_cluster::NodeServerMessage;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use ractor_cluster::NodeSessionMessage;

use super::event::{SessionEvent, SessionStage};
use super::shared::NodeShared;
use crate::call;
use crate::control::{ControlReply, ControlRequest};
use crate::Error;

/// How long a dial keeps its dial slot (`NodeConfig::max_dials_in_flight`) while its
/// handshake makes no progress — no TCP connect or TLS handshake done, no step of its session
/// (opened, authenticated, ready) — before it gives the slot back and goes on without one,
/// within its own bound: half the dial's bound (`connect_timeout`, 5 s by default), so a
/// peer that accepts connections and never answers holds a slot for half as long as before,
/// at most. (1 s was measured too: dials of a forming mesh of 64–96 nodes on 2 cores then
/// gave their slots up while their peers were only slow, and the mesh formed slower.)
fn slot_stall(bound: Duration) -> Duration {
    bound / 2
}

/// How long to wait after the peer closed our session during the handshake, in case the
/// other session of a simultaneous connect is about to win.
const REJECTION_GRACE: Duration = Duration::from_millis(300);

/// The addresses `addr` stands for, for matching sessions against it.
async fn resolve(addr: &str) -> Result<Vec<SocketAddr>, Error> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| Error::ConnectFailed {
            addr: addr.to_string(),
            reason: format!("cannot resolve: {e}"),
        })?
        .collect();
    Ok(resolved)
}

/// The reason given when a node is asked to dial itself.
pub(super) const OWN_ADDRESS: &str = "this is the node's own address";

/// Whether `resolved` includes the address this node listens on.
fn is_own_address(shared: &NodeShared, resolved: &[SocketAddr]) -> bool {
    let Ok(own) = shared.listen_addr.parse::<SocketAddr>() else {
        return false;
    };
    resolved.iter().any(|a| {
        *a == own || (own.ip().is_unspecified() && a.port() == own.port() && a.ip().is_loopback())
    })
}

/// Whether `connection_string` (a peer's advertised `host:port`) names `addr`.
fn names(connection_string: &str, addr: &str, resolved: &[SocketAddr]) -> bool {
    connection_string == addr
        || connection_string
            .parse::<SocketAddr>()
            .map(|a| resolved.contains(&a))
            .unwrap_or(false)
}

/// Whether `event` is a session to `addr`: our outgoing session to it, or any session whose
/// peer advertises it.
fn is_session_to(event: &SessionEvent, addr: &str, resolved: &[SocketAddr]) -> bool {
    let outgoing = !event.is_server
        && event
            .peer_addr
            .parse::<SocketAddr>()
            .map(|a| resolved.contains(&a))
            .unwrap_or(false);
    outgoing
        || event
            .connection_string
            .as_deref()
            .is_some_and(|c| names(c, addr, resolved))
}

/// Dials `addr` and waits until a session to it is ready; returns the peer's full name.
///
/// Every dial of the node goes through here. Once a peer said this node's name is taken by
/// another process, no dial is made for a while (see
/// [`PeerTable::name_taken_for`](super::peer_table::PeerTable::name_taken_for)): each one could
/// make the cluster drop that other node for a moment.
pub(crate) async fn connect(
    shared: &NodeShared,
    server: &ActorRef<NodeServerMessage>,
    addr: &str,
    bound: Duration,
) -> Result<String, Error> {
    if let Some(wait) = shared.peers.name_taken_for() {
        return Err(Error::ConnectFailed {
            addr: addr.to_string(),
            reason: format!(
                "{NAME_TAKEN}: not dialling for another {} ms",
                wait.as_millis()
            ),
        });
    }
    let outcome = connect_once(shared, server, addr, bound).await;
    match &outcome {
        Ok(_) => shared.peers.name_free(),
        Err(Error::ConnectFailed { reason, .. }) if may_be_duplicate_name(reason) => {
            match name_taken_by(shared, addr, reason).await {
                Some(holder) => {
                    let wait = shared.peers.note_name_taken();
                    tracing::error!(%addr, %reason, %holder, retry_in_ms = wait.as_millis() as u64, "{NAME_TAKEN}");
                }
                None => {
                    tracing::debug!(%addr, %reason, "a peer closed this node's session, but no live node of this name answers for it");
                }
            }
        }
        Err(_) => {}
    }
    outcome
}

/// The address of the other node holding this node's name, when one is known to be live
/// after a dial failed for `reason` (which [`may_be_duplicate_name`]): a peer answered that
/// it records this node's name at another address — the peer dialled
/// ([`confirm_name`]), or, when the peer only closed the session (as it closes the losing
/// session of a simultaneous connect too), one of the connected peers asked now. `None`
/// when no peer answers so: the name is not taken as far as anyone can tell.
///
/// The peers asked are neither the one at the address dialled (the refusal being judged) nor
/// any whose answer names its own address (a peer claiming this node's name itself is no
/// witness). Known limit: a peer connected to this node records this node, so it can only
/// answer for another node of the name in the moment its session to this one was replaced —
/// a connected peer rarely gives the verdict; the dialled peer's own answer
/// ([`confirm_name`]) is what usually does.
async fn name_taken_by(shared: &NodeShared, dialled: &str, reason: &str) -> Option<String> {
    if let Some(holder) = reason.strip_prefix(DUPLICATE_NAME) {
        return Some(holder.rsplit(" at ").next().unwrap_or_default().to_string());
    }
    let own = shared.connection_string.as_deref()?;
    let request = ControlRequest::ConnectionOf(shared.name.clone());
    let witnesses: Vec<(String, String)> = shared
        .peers
        .addresses()
        .into_iter()
        .filter(|(_, at)| at != dialled)
        .take(3)
        .collect();
    // A few peers are enough: each would have had to accept the other node's session, and a
    // live one answers its heartbeats.
    for (peer, peer_addr) in witnesses {
        let answer = call::control(&shared.transport, &peer, &request, Duration::from_secs(1));
        if let Ok(ControlReply::ConnectionOf(Some(recorded))) = answer.await {
            if recorded != own && recorded != peer_addr {
                return Some(recorded);
            }
        }
    }
    None
}

/// How the reason starts when a peer said it has another node of this node's name.
const DUPLICATE_NAME: &str = "duplicate node name: ";

/// How the reason of a dial that never got one of the node's dial slots starts.
pub(super) const NO_DIAL_SLOT: &str = "no dial slot came free";

/// What a node whose name is taken reports.
const NAME_TAKEN: &str = "this node's name is taken in the cluster (duplicate node name)";

/// One dial of `addr` (see [`connect`]).
async fn connect_once(
    shared: &NodeShared,
    server: &ActorRef<NodeServerMessage>,
    addr: &str,
    bound: Duration,
) -> Result<String, Error> {
    let failed = |reason: String| Error::ConnectFailed {
        addr: addr.to_string(),
        reason,
    };
    let resolved = resolve(addr).await?;
    if is_own_address(shared, &resolved) {
        return Err(failed(OWN_ADDRESS.to_string()));
    }
    // Subscribe before dialling so the ready event cannot slip past.
    let mut sessions = shared.sessions.subscribe();
    if let Some(name) = shared.peers.peer_at(|c| names(c, addr, &resolved)) {
        return Ok(name);
    }
    if !shared.peers.begin_dial(addr) {
        if let Some(outcome) = join_dial(shared, addr, &resolved, bound).await {
            return outcome;
        }
    }
    // This task holds the address's dial slot now.
    let _dialing = DialGuard { shared, addr };
    // And one of the node's dials in flight, from the TCP connect to the ready state
    // (`NodeConfig::max_dials_in_flight`): waited for within the bound.
    let permit_by = Instant::now() + bound;
    let mut permit = match tokio::time::timeout_at(permit_by, shared.dial_permits.acquire()).await {
        Ok(Ok(permit)) => Some(permit),
        Ok(Err(_closed)) => return Err(failed("the local node stopped".into())),
        Err(_elapsed) => {
            return Err(failed(format!(
                "{NO_DIAL_SLOT} within {} ms (max_dials_in_flight {} dials of this node in \
                 their handshake)",
                bound.as_millis(),
                shared.config.max_dials_in_flight
            )))
        }
    };
    // Connected while this dial waited for its slot (the peer dialled us)?
    if let Some(name) = shared.peers.peer_at(|c| names(c, addr, &resolved)) {
        return Ok(name);
    }
    let dialling = super::tls::dial(shared, server, addr, bound);
    tokio::pin!(dialling);
    let opened = tokio::select! {
        opened = &mut dialling => opened,
        _ = tokio::time::sleep(slot_stall(bound)) => {
            // A TCP connect or TLS handshake that hangs gives its slot back (see slot_stall).
            permit = None;
            dialling.await
        }
    };
    opened.map_err(failed)?;
    let deadline = Instant::now() + bound;
    // When the dial last made progress (its TCP connect, then each step of a session to
    // `addr`): it keeps its slot for at most `slot_stall` past that.
    let mut progress_at = Instant::now();
    // Sessions to `addr` still in the handshake, and incoming sessions not yet named (the
    // winner of a simultaneous connect may be one). Once our session closed and none of these
    // is left, the answer is known: stop waiting after a short grace.
    let mut pending: HashSet<ActorId> = HashSet::new();
    // Our outgoing sessions to `addr`: closed if none is ready by the deadline, so a peer that
    // accepts TCP but never answers (a paused process) does not collect half-open sessions
    // from every redial, all completing at once when it resumes.
    let mut outgoing: HashMap<ActorId, ActorRef<NodeSessionMessage>> = HashMap::new();
    let mut unnamed_incoming: HashSet<ActorId> = HashSet::new();
    let (mut authenticated, mut closed_at) = (false, None::<Instant>);
    // The peer's name, once a session to `addr` told it.
    let mut peer_name: Option<String> = None;
    loop {
        let settled = pending.is_empty() && unnamed_incoming.is_empty();
        let wait_until = match closed_at {
            Some(at) if settled => deadline.min(at + REJECTION_GRACE),
            _ => deadline,
        };
        let stall_at = permit.as_ref().map(|_| progress_at + slot_stall(bound));
        let wake_at = stall_at.map_or(wait_until, |at| at.min(wait_until));
        let event = match tokio::time::timeout_at(wake_at, sessions.recv()).await {
            Err(_elapsed) if stall_at.is_some_and(|at| at <= Instant::now()) => {
                // No progress within `slot_stall`: the dial goes on without its slot, so that a
                // peer that accepts connections and never answers holds no slot for long.
                permit = None;
                tracing::debug!(%addr, "a dial's handshake made no progress; giving its dial slot back");
                continue;
            }
            Err(_elapsed) => {
                // Another session of that peer (one we did not see open: it opened before
                // this dial) authenticated and is on its way up: wait for it, within the bound.
                let other_coming = peer_name
                    .as_deref()
                    .is_some_and(|name| shared.peers.is_authenticating(name));
                if wait_until < deadline && other_coming {
                    closed_at = Some(Instant::now());
                    continue;
                }
                if let Some(name) = shared.peers.peer_at(|c| names(c, addr, &resolved)) {
                    return Ok(name);
                }
                break;
            }
            Ok(Err(RecvError::Lagged(_))) => {
                if let Some(name) = shared.peers.peer_at(|c| names(c, addr, &resolved)) {
                    return Ok(name);
                }
                continue;
            }
            Ok(Err(RecvError::Closed)) => return Err(failed("the local node stopped".into())),
            Ok(Ok(event)) => event,
        };
        if event.stage == SessionStage::Opened && event.is_server && event.name.is_none() {
            unnamed_incoming.insert(event.session_id);
        } else {
            unnamed_incoming.remove(&event.session_id);
        }
        if !is_session_to(&event, addr, &resolved) {
            continue;
        }
        if !event.is_server && event.stage == SessionStage::Opened {
            outgoing.insert(event.session_id, event.session.clone());
        }
        if peer_name.is_none() {
            peer_name.clone_from(&event.name);
        }
        progress_at = Instant::now();
        match (event.stage, event.name) {
            (SessionStage::Ready, Some(name)) => {
                drop(permit.take());
                return confirm_name(shared, addr, name, &event.session).await;
            }
            (SessionStage::Opened, _) => {
                pending.insert(event.session_id);
            }
            (SessionStage::Authenticated, _) => {
                authenticated = true;
                pending.insert(event.session_id);
            }
            (SessionStage::Disconnected, Some(name))
                if shared
                    .peers
                    .refused_within(&name, super::version::REFUSAL_KEPT) =>
            {
                return Err(shared.peers.refusal(&name).unwrap_or(Error::ConnectFailed {
                    addr: addr.to_string(),
                    reason: "refused".into(),
                }));
            }
            (SessionStage::Disconnected, _) => {
                outgoing.remove(&event.session_id);
                pending.remove(&event.session_id);
                closed_at = Some(Instant::now());
            }
            _ => {}
        }
    }
    for session in outgoing.values() {
        session.stop(Some(
            "connect timed out before the session was ready".into(),
        ));
    }
    let seen = match (authenticated, closed_at.is_some()) {
        (true, true) => {
            "the peer closed the session after authenticating it: a node with the same name may \
             be connected to it (duplicate node name)"
        }
        (true, false) => "a session authenticated but never became ready",
        (false, true) if shared.tls.is_some() => {
            "the peer closed the session during the handshake: it does not accept this node's \
             TLS certificate (signed by another CA, expired or not yet valid), wrong cookie, a \
             duplicate node name, or not an rpc_load_balancer node"
        }
        (false, true) => {
            "the peer closed the session during the handshake: wrong cookie, a duplicate node \
             name, the peer requires TLS (this node has none), the peer is overloaded (too \
             many connections waiting), or not an rpc_load_balancer node"
        }
        (false, false) => "the handshake did not finish",
    };
    let waited = bound.saturating_sub(deadline.saturating_duration_since(Instant::now()));
    Err(failed(format!(
        "no session became ready after {} ms: {seen}",
        waited.as_millis()
    )))
}

/// Ends a dial when dropped, however `connect` returns.
struct DialGuard<'a> {
    shared: &'a NodeShared,
    addr: &'a str,
}

impl Drop for DialGuard<'_> {
    fn drop(&mut self) {
        self.shared.peers.end_dial(self.addr);
    }
}

/// Waits for a dial another task has in flight to `addr` (one dial per address at a time, so
/// the peer never sees two sessions from us). `Some(Ok(name))` once connected; `None` when
/// the other dial ended without a session and this task now holds the dial slot (it should
/// dial itself, to report its own error); `Some(Err)` if the other dial outlasts `bound`.
async fn join_dial(
    shared: &NodeShared,
    addr: &str,
    resolved: &[SocketAddr],
    bound: Duration,
) -> Option<Result<String, Error>> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(name) = shared.peers.peer_at(|c| names(c, addr, resolved)) {
            return Some(Ok(name));
        }
        if shared.peers.begin_dial(addr) {
            if let Some(name) = shared.peers.peer_at(|c| names(c, addr, resolved)) {
                shared.peers.end_dial(addr);
                return Some(Ok(name));
            }
            return None;
        }
        if Instant::now() >= deadline {
            return Some(Err(Error::ConnectFailed {
                addr: addr.to_string(),
                reason: format!(
                    "another dial to this address did not finish within {} ms",
                    bound.as_millis()
                ),
            }));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Checks with the peer that it records *us* under our name, not another process with the
/// same name (see `cluster.rs` on duplicate names); on a clash, closes our session to it.
async fn confirm_name(
    shared: &NodeShared,
    addr: &str,
    peer: String,
    session: &ActorRef<NodeSessionMessage>,
) -> Result<String, Error> {
    let Some(own) = &shared.connection_string else {
        return Ok(peer);
    };
    let failed = |reason: String| Error::ConnectFailed {
        addr: addr.to_string(),
        reason,
    };
    let request = ControlRequest::ConnectionOf(shared.name.clone());
    // The peer may not have processed our session's ready event yet: give it a moment.
    for _ in 0..50 {
        match call::control(&shared.transport, &peer, &request, Duration::from_secs(1)).await {
            Ok(ControlReply::ConnectionOf(Some(recorded))) if recorded != *own => {
                session.stop(Some("duplicate node name".to_string()));
                return Err(failed(format!(
                    "{DUPLICATE_NAME}{peer} already has a node named {} at {recorded}",
                    shared.name
                )));
            }
            Ok(ControlReply::ConnectionOf(None)) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(_) => return Ok(peer),
            // The version check (`version.rs`) refuses it and closes the session.
            Err(error @ Error::WireVersion { .. }) => return Err(error),
            Err(_) if shared.peers.refusal(&peer).is_some() => {
                return Err(shared.peers.refusal(&peer).unwrap_or(Error::ConnectFailed {
                    addr: addr.to_string(),
                    reason: "refused".into(),
                }))
            }
            // A peer busy with a forming mesh may answer late: the session is up, ask again.
            Err(Error::RequestTimeout { .. }) if shared.peers.is_connected(&peer) => {}
            Err(error) => {
                return Err(failed(format!(
                    "the session closed right after the handshake ({error}); \
                                           a duplicate node name is the usual cause"
                )))
            }
        }
    }
    Ok(peer)
}

/// Whether a connect failure's `reason` says that the peer has, or may well have, a node of
/// this node's name: it said so, or it closed the session after authenticating it (not
/// merely a closed handshake, which a wrong cookie gives too).
fn may_be_duplicate_name(reason: &str) -> bool {
    reason.starts_with(DUPLICATE_NAME) || reason.ends_with("(duplicate node name)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sure_duplicate_name_reasons_count() {
        assert!(may_be_duplicate_name(
            "duplicate node name: a@h already has a node named b@h at h:1"
        ));
        assert!(may_be_duplicate_name(
            "no session became ready after 10 ms: the peer closed the session after \
             authenticating it: a node with the same name may be connected to it \
             (duplicate node name)"
        ));
        assert!(!may_be_duplicate_name(
            "no session became ready after 10 ms: the peer closed the session during the \
             handshake: wrong cookie, a duplicate node name, or not an rpc_load_balancer node"
        ));
    }

    #[tokio::test]
    async fn a_name_is_taken_only_when_a_peer_answers_for_another_node() {
        let config = crate::NodeConfig::new("me", "127.0.0.1:0");
        let node = NodeShared::new(
            "me@127.0.0.1".into(),
            "127.0.0.1:4100".into(),
            Some("127.0.0.1:4100".into()),
            &config,
        );
        // The peer dialled said it records this name at another address.
        let said = format!("{DUPLICATE_NAME}a@h already has a node named me@127.0.0.1 at h:1");
        assert_eq!(
            name_taken_by(&node, "h:2", &said).await.as_deref(),
            Some("h:1")
        );
        // It only closed the session after authenticating it (as it closes the losing session
        // of a simultaneous connect), and no connected peer answers for another node: not
        // taken.
        let closed = "no session became ready after 10 ms: the peer closed the session after \
                      authenticating it: a node with the same name may be connected to it \
                      (duplicate node name)";
        assert!(may_be_duplicate_name(closed));
        assert_eq!(name_taken_by(&node, "h:2", closed).await, None);
    }

    #[test]
    fn advertised_names_match_by_string_or_address() {
        let resolved = vec!["127.0.0.1:4100".parse().unwrap()];
        assert!(names("127.0.0.1:4100", "localhost:4100", &resolved));
        assert!(names("localhost:4100", "localhost:4100", &resolved));
        assert!(!names("127.0.0.1:4101", "localhost:4100", &resolved));
        assert!(!names("box:4100", "localhost:4100", &resolved));
    }
}
