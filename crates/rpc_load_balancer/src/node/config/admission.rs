//! Who may connect, and what a connection costs before it authenticates: mutual TLS, the
//! limit on connections still in their handshake, and the largest frame before the cookie check.

use super::NodeConfig;
use crate::node::TlsConfig;
#[cfg(doc)]
use crate::Error;

impl NodeConfig {
    /// Mutual TLS on every session of this node (see [`TlsConfig`]): it
    /// accepts only TLS connections presenting a certificate signed by the CA, and dials its
    /// peers and the mesh over TLS. Every node of the cluster needs it (a plaintext node and a
    /// TLS node cannot connect); the cookie still applies. Default: none, plain TCP.
    ///
    /// The files are read at [`Node::start`](crate::Node::start), which fails with
    /// [`Error::InvalidConfig`] naming `tls.cert`, `tls.key`, `tls.ca` or `tls.server_name`.
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Most connections to this node's listen address at once that have not passed the
    /// handshake yet (TCP accepted, TLS handshake or cookie check under way); default 1,024
    /// ([`DEFAULT_MAX_HANDSHAKES`](crate::DEFAULT_MAX_HANDSHAKES)), from 1 to 65,536 (else
    /// [`Error::InvalidConfig`] naming `max_handshakes` at start). At the limit, a new
    /// connection closes the oldest waiting one: a legitimate handshake takes milliseconds, so
    /// stalled connections do not keep peers out (a flood of more new connections than the
    /// limit within a handshake's time still can). A waiting connection that has a session
    /// costs the node ~50 KiB (ractor_cluster's session actors; less before its first frame,
    /// see [`handshake_frame_limit`](Self::handshake_frame_limit)), so ~50 MiB at the default.
    /// A connection waits at most [`connect_timeout`](Self::connect_timeout) from its accept.
    /// Not applied by [`Node::attach`](crate::Node::attach) (the app's NodeServer accepts its
    /// connections).
    pub fn max_handshakes(mut self, connections: usize) -> Self {
        self.max_handshakes = connections;
        self
    }

    /// Largest frame, in bytes, that a connection to this node may send before its session
    /// has authenticated (passed the cookie check); default 16 KiB
    /// ([`DEFAULT_HANDSHAKE_FRAME_LIMIT`](crate::DEFAULT_HANDSHAKE_FRAME_LIMIT)), from 1,024 to
    /// 1,048,576 (else [`Error::InvalidConfig`] naming `handshake_frame_limit` at start). The
    /// handshake's own messages carry the peer's name and address, a few hundred bytes. A
    /// first frame announcing more closes the connection before it gets a session; a later
    /// one is left unread (in the kernel's socket buffer) until the session authenticates, or
    /// is closed with the connection at `connect_timeout`, so a stranger cannot make the node
    /// buffer more than this per connection. Once authenticated, frames up to
    /// ractor_cluster's 16 MiB pass. Not applied by [`Node::attach`](crate::Node::attach).
    pub fn handshake_frame_limit(mut self, bytes: usize) -> Self {
        self.handshake_frame_limit = bytes;
        self
    }

    /// Most dials of this node in their handshake at once (TCP connect, TLS, cookie check, up
    /// to the session's ready state); default 4
    /// ([`DEFAULT_MAX_DIALS_IN_FLIGHT`](crate::DEFAULT_MAX_DIALS_IN_FLIGHT)), from 1 to 1,024
    /// (else [`Error::InvalidConfig`] naming `max_dials_in_flight` at start). Further dials —
    /// of configured peers, of peers learnt through the mesh, redials, [`Node::connect`] —
    /// wait for a free slot (within their own bound). A dial whose handshake makes no progress
    /// for half its bound (`connect_timeout`; no TCP connect, TLS or session step) gives its
    /// slot back and finishes without it, so peers that accept connections and never answer
    /// cannot hold the slots for long. A node joining a large cluster learns of
    /// every member at once: dialling them all at once makes a burst of handshakes that,
    /// with every other node doing the same, starves the machine (slow handshakes time out and
    /// are dialled again, heartbeats go unanswered); a few at a time, the mesh forms faster.
    ///
    /// [`Node::connect`]: crate::Node::connect
    pub fn max_dials_in_flight(mut self, dials: usize) -> Self {
        self.max_dials_in_flight = dials;
        self
    }
}
