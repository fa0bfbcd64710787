//! Connections that have not authenticated yet: how many the node keeps, and how much each
//! can make it buffer.
//!
//! ractor_cluster reads a frame as an 8-byte length and then its payload, growing a buffer as
//! the payload arrives, up to its 16 MiB frame limit — before the peer has proved the cookie.
//! So a stranger announcing 16 MiB frames and sending them slowly made the node hold ~16 MiB
//! per connection. So the node's listener reads a connection's first frame itself
//! ([`first_frame`]): one announcing more than the handshake frame limit
//! ([`NodeConfig::handshake_frame_limit`](crate::NodeConfig::handshake_frame_limit)) gets no
//! session. After it, the session reads through a [`GatedRead`] until it authenticates: the
//! reader passes frames up to the limit and holds a larger one back, length prefix included,
//! until the session authenticates (the handshake's own messages are a few hundred bytes; a
//! legitimate peer's first big frame can race the authentication by a moment) or its handshake
//! deadline closes it. Once authenticated, the reader is a plain pass-through (plain TCP
//! through a read buffer, see `stream.rs`).
//!
//! [`Handshakes`] counts these connections, from accept to authentication (or until the
//! connection's session ends, refused or closed: its slot ends with it), and keeps at most
//! [`NodeConfig::max_handshakes`](crate::NodeConfig::max_handshakes) of them: a new one closes
//! the oldest. A legitimate handshake takes milliseconds, so stalled connections do not keep a
//! node or client out (a flood of more new connections than the limit within that time can).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use tokio::sync::Notify;

use super::listener::Throttle;

mod gate;

pub(crate) use gate::{first_frame, GatedRead};

/// Default of [`NodeConfig::max_handshakes`](crate::NodeConfig::max_handshakes): at most
/// 1,024 connections at once waiting for their handshake.
pub const DEFAULT_MAX_HANDSHAKES: usize = 1024;

/// Default of [`NodeConfig::handshake_frame_limit`](crate::NodeConfig::handshake_frame_limit),
/// bytes: 16 KiB.
pub const DEFAULT_HANDSHAKE_FRAME_LIMIT: usize = 16 << 10;

/// The connections of one node that have not authenticated yet.
pub(crate) struct Handshakes {
    limit: usize,
    frame_limit: u64,
    next: AtomicU64,
    pending: Mutex<Pending>,
    evicted: Throttle,
}

#[derive(Default)]
struct Pending {
    /// By admission order: the first is the oldest.
    by_age: BTreeMap<u64, Arc<Handshake>>,
    /// Admission number by the peer's `ip:port` (the session's peer label).
    by_peer: HashMap<String, u64>,
}

impl Handshakes {
    /// At most `limit` connections at once; frames up to `frame_limit` bytes before
    /// authentication.
    pub(crate) fn new(limit: usize, frame_limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit: limit.max(1),
            frame_limit: frame_limit as u64,
            next: AtomicU64::new(0),
            pending: Mutex::new(Pending::default()),
            evicted: Throttle::default(),
        })
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a connection just accepted from `peer`; at the limit, the oldest one is closed.
    /// The connection stops counting when it authenticates or when the ticket is dropped.
    pub(crate) fn admit(self: &Arc<Self>, peer: SocketAddr) -> Ticket {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let handshake = Arc::new(Handshake {
            peer,
            state: Mutex::new(GateState::default()),
            closed: Notify::new(),
        });
        let evicted = {
            let mut pending = self.pending();
            let evicted = if pending.by_age.len() >= self.limit {
                pending.by_age.pop_first().map(|(_, oldest)| {
                    pending.by_peer.remove(&oldest.peer.to_string());
                    oldest
                })
            } else {
                None
            };
            pending.by_age.insert(seq, Arc::clone(&handshake));
            pending.by_peer.insert(peer.to_string(), seq);
            evicted
        };
        if let Some(oldest) = evicted {
            let closed = oldest.close(format!(
                "{} connections were waiting for their handshake (max_handshakes); closed the \
                 oldest",
                self.limit
            ));
            if closed && self.evicted.hit() {
                tracing::warn!(
                    peer_addr = %oldest.peer,
                    limit = self.limit,
                    times = self.evicted.count(),
                    "too many connections waiting for their handshake; closing the oldest"
                );
            }
        }
        Ticket {
            handshakes: Arc::clone(self),
            seq,
            handshake,
        }
    }

    /// The connection from `peer_label` (`ip:port`) still waiting for its handshake.
    pub(crate) fn find(&self, peer_label: &str) -> Option<Arc<Handshake>> {
        let pending = self.pending();
        let seq = pending.by_peer.get(peer_label)?;
        pending.by_age.get(seq).cloned()
    }

    /// Lifts `handshake`'s frame limit (its session authenticated); it stops counting.
    pub(crate) fn authenticated(&self, handshake: &Handshake) {
        self.remove(handshake);
        let waker = {
            let mut state = handshake.state();
            state.authenticated = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Ends `handshake`: its session closed before authenticating (refused, or the peer hung
    /// up). It stops counting at once, and its listener task ends without logging a timeout.
    pub(crate) fn ended(&self, handshake: &Handshake) {
        self.remove(handshake);
        handshake.end();
    }

    /// Stops counting `handshake` (if it still counts).
    fn remove(&self, handshake: &Handshake) {
        let mut pending = self.pending();
        let label = handshake.peer.to_string();
        if let Some(seq) = pending.by_peer.get(&label).copied() {
            if pending
                .by_age
                .get(&seq)
                .is_some_and(|h| std::ptr::eq(Arc::as_ptr(h), handshake))
            {
                pending.by_age.remove(&seq);
                pending.by_peer.remove(&label);
            }
        }
    }

    /// Connections counted now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.pending().by_age.len()
    }

    fn forget(&self, seq: u64) {
        let mut pending = self.pending();
        if let Some(handshake) = pending.by_age.remove(&seq) {
            let label = handshake.peer.to_string();
            if pending.by_peer.get(&label) == Some(&seq) {
                pending.by_peer.remove(&label);
            }
        }
    }
}

/// One connection counted by [`Handshakes`]; it stops counting when this is dropped.
pub(crate) struct Ticket {
    handshakes: Arc<Handshakes>,
    seq: u64,
    handshake: Arc<Handshake>,
}

impl Ticket {
    /// The connection's handshake state.
    pub(crate) fn handshake(&self) -> &Arc<Handshake> {
        &self.handshake
    }

    /// Largest frame before authentication, bytes.
    pub(crate) fn frame_limit(&self) -> usize {
        self.handshakes.frame_limit as usize
    }
}

impl Drop for Ticket {
    /// The connection's reader is gone (its session ended, or it never got one).
    fn drop(&mut self) {
        self.handshakes.forget(self.seq);
        self.handshake.end();
    }
}

/// What is known of one connection's handshake.
pub(crate) struct Handshake {
    peer: SocketAddr,
    state: Mutex<GateState>,
    /// Signalled when the node closes the connection (see [`Handshake::close`]) or its
    /// session ends (see [`Handshakes::ended`]).
    closed: Notify,
}

#[derive(Default)]
struct GateState {
    authenticated: bool,
    /// Why the node closed the connection, if it did.
    closed: Option<String>,
    /// The peer closed its side before authenticating.
    peer_closed: bool,
    /// Its session (or its reader) ended before authenticating: nothing is left to close.
    ended: bool,
    /// A frame length over the limit that the peer announced before authenticating.
    announced: Option<u64>,
    /// The reader waiting on this connection.
    waker: Option<Waker>,
}

impl Handshake {
    fn state(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Closes the connection unless it has authenticated: its reader fails with `reason`.
    /// Whether it was closed now.
    pub(crate) fn close(&self, reason: String) -> bool {
        let waker = {
            let mut state = self.state();
            if state.authenticated || state.ended || state.closed.is_some() {
                return false;
            }
            state.closed = Some(reason);
            state.waker.take()
        };
        self.closed.notify_one();
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    /// Notes that the connection's session ended unauthenticated and wakes
    /// [`Handshake::closed`]; a later [`Handshake::close`] does nothing.
    fn end(&self) {
        {
            let mut state = self.state();
            if state.authenticated || state.ended {
                return;
            }
            state.ended = true;
        }
        self.closed.notify_one();
    }

    /// Resolves once [`Handshake::close`] was called or the session ended unauthenticated.
    pub(crate) async fn closed(&self) {
        self.closed.notified().await;
    }

    /// Why the connection ended before authenticating, as far as the node knows: the node
    /// closed it (and why), the peer hung up, or `None` when neither is known.
    pub(crate) fn outcome(&self) -> Option<String> {
        let state = self.state();
        let announced = state
            .announced
            .map(|len| format!(" after announcing a frame of {len} bytes"))
            .unwrap_or_default();
        if let Some(reason) = &state.closed {
            Some(format!("{reason}{announced}"))
        } else if state.peer_closed {
            Some(format!("the peer closed the connection{announced}"))
        } else {
            None
        }
    }

    /// Whether the peer hung up before authenticating.
    pub(crate) fn peer_closed(&self) -> bool {
        self.state().peer_closed
    }

    /// Whether the node closed the connection (and logged why).
    pub(crate) fn closed_by_node(&self) -> bool {
        self.state().closed.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn the_oldest_connection_is_closed_at_the_limit() {
        let handshakes = Handshakes::new(2, 1024);
        let first = handshakes.admit(addr(1));
        let second = handshakes.admit(addr(2));
        assert_eq!(handshakes.len(), 2);
        let third = handshakes.admit(addr(3));
        assert_eq!(handshakes.len(), 2);
        assert!(first
            .handshake()
            .outcome()
            .is_some_and(|o| o.contains("max_handshakes")));
        assert!(second.handshake().outcome().is_none());
        assert!(handshakes.find("127.0.0.1:1").is_none());
        let found = handshakes.find("127.0.0.1:3").unwrap();
        handshakes.authenticated(&found);
        assert_eq!(
            handshakes.len(),
            1,
            "an authenticated connection stops counting"
        );
        assert!(
            !found.close("late".into()),
            "an authenticated connection stays open"
        );
        assert!(found.outcome().is_none());
        drop(second);
        assert_eq!(handshakes.len(), 0);
        drop((first, third));
        assert_eq!(handshakes.len(), 0);
    }

    /// A session refused (or closed) before authenticating gives its slot back at once, and
    /// its handshake deadline closes nothing more (so nothing logs a timeout for it).
    #[tokio::test]
    async fn a_session_ending_unauthenticated_frees_its_slot_at_once() {
        let handshakes = Handshakes::new(8, 100);
        let (_peer, node) = tokio::io::duplex(64);
        let ticket = handshakes.admit(addr(9));
        let handshake = Arc::clone(ticket.handshake());
        let read = GatedRead::new(node, Vec::new(), ticket, 0);
        assert_eq!(handshakes.len(), 1);
        handshakes.ended(&handshake);
        assert_eq!(handshakes.len(), 0);
        tokio::time::timeout(Duration::from_secs(5), handshake.closed())
            .await
            .expect("the listener's wait ends with the session");
        assert!(!handshake.close("no handshake within 5000 ms".into()));
        assert!(!handshake.closed_by_node());
        drop(read);
        assert_eq!(handshakes.len(), 0);

        // Its reader dropped (the session's stream gone) ends it the same way.
        let (_peer, node) = tokio::io::duplex(64);
        let ticket = handshakes.admit(addr(10));
        let handshake = Arc::clone(ticket.handshake());
        drop(GatedRead::new(node, Vec::new(), ticket, 0));
        assert_eq!(handshakes.len(), 0);
        tokio::time::timeout(Duration::from_secs(5), handshake.closed())
            .await
            .expect("the listener's wait ends with the reader");
        assert!(!handshake.close("no handshake within 5000 ms".into()));
    }
}
