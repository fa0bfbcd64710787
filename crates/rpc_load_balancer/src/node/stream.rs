//! Plain TCP sessions handed to ractor_cluster as an external transport whose read half is
//! buffered, and TLS sessions accepted by the node's own listener.
//!
//! ractor_cluster reads a frame as an 8-byte length, then the payload, straight from the
//! socket: three `recvfrom` calls per frame (the length, the payload, and the one that finds
//! the socket empty), whether frames arrive one by one or many per segment. Behind a read
//! buffer one call takes every frame that has arrived. The framing is unchanged, so a node
//! using this talks to any ractor_cluster node. TLS sessions are not buffered again: rustls
//! already buffers what it decrypts.
//!
//! A connection the node accepted is read through a [`GatedRead`] until its session
//! authenticates (see `preauth.rs`); the read buffer is allocated only then.
//!
//! Every such session notes when it last read bytes from its peer ([`Activity`], found by the
//! session's peer address with [`activity_of`]): whatever the peer sent — a reply, a call,
//! ractor_cluster's own session ping — shows it is alive, so the heartbeats (`heartbeat.rs`)
//! need not ask a peer that was heard from that way within the interval.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ractor_cluster::{BoxRead, BoxWrite, ClusterBidiStream};
use tokio::io::{AsyncRead, BufReader, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::preauth::{GatedRead, Ticket};

/// Read buffer per session, bytes: a 64 KiB payload's frame arrives in one or two reads.
const READ_BUFFER: usize = 64 * 1024;

/// When a session last read bytes from its peer.
#[derive(Default)]
pub(crate) struct Activity {
    /// Milliseconds since [`epoch`] at the last read with bytes, plus one (0: none yet).
    last: AtomicU64,
}

impl Activity {
    /// When bytes were last read, if ever.
    pub(crate) fn last(&self) -> Option<Instant> {
        match self.last.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(epoch() + Duration::from_millis(ms - 1)),
        }
    }

    fn note(&self) {
        let ms = epoch().elapsed().as_millis() as u64 + 1;
        self.last.store(ms, Ordering::Relaxed);
    }
}

/// The process's reference point for [`Activity`] times.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The sessions' activity records by the session's peer address (`ip:port`, the session's
/// `peer_addr`); process-wide, as a process runs one node. Entries of closed sessions are
/// dropped as new ones come. A peer address names one session only as long as no other open
/// session has it too (an accepted session's peer port is the peer's ephemeral port, which
/// on another host may equal a listening port this node dialled): so each address keeps
/// every open session's record.
type Records = HashMap<String, Vec<Weak<Activity>>>;

fn activities() -> &'static Mutex<Records> {
    static ACTIVITIES: OnceLock<Mutex<Records>> = OnceLock::new();
    ACTIVITIES.get_or_init(Default::default)
}

/// A new activity record for the session with peer address `peer`.
fn track(peer: SocketAddr) -> Arc<Activity> {
    let activity = Arc::new(Activity::default());
    let mut all = activities().lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|_, records| {
        records.retain(|a| a.strong_count() > 0);
        !records.is_empty()
    });
    all.entry(peer.to_string())
        .or_default()
        .push(Arc::downgrade(&activity));
    activity
}

/// The activity record of the open session whose peer address is `peer_addr`, if the node's
/// own stream carries it (not a TLS session this node dialled, nor one of an attached node)
/// and no other open session has that peer address (which of them read would be unknown).
pub(crate) fn activity_of(peer_addr: &str) -> Option<Arc<Activity>> {
    let all = activities().lock().unwrap_or_else(|p| p.into_inner());
    let mut open = all.get(peer_addr)?.iter().filter_map(Weak::upgrade);
    let only = open.next()?;
    open.next().is_none().then_some(only)
}

/// A read half that notes in its [`Activity`] when it reads bytes.
struct Tracked<R> {
    inner: R,
    activity: Arc<Activity>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Tracked<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.note();
        }
        polled
    }
}

/// A connected plain TCP session (Nagle off), labelled with its addresses for ractor_cluster's
/// session information (`peer_addr` is the peer's `ip:port`).
pub(crate) struct BufferedTcp {
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    /// Set for an accepted connection: read through a [`GatedRead`] until authenticated,
    /// after its first frame (read already).
    accepted: Option<(Ticket, Vec<u8>)>,
}

impl BufferedTcp {
    /// Wraps a connected `stream`. Errors: the socket has no address (it was closed).
    pub(crate) fn new(stream: TcpStream) -> std::io::Result<Self> {
        stream.set_nodelay(true)?;
        Ok(Self {
            peer: stream.peer_addr()?,
            local: stream.local_addr()?,
            stream,
            accepted: None,
        })
    }

    /// Wraps an accepted `stream` whose `first` frame was read already (see
    /// `preauth::first_frame`), counted by `ticket` until its session authenticates.
    /// Errors: as [`BufferedTcp::new`].
    pub(crate) fn accepted(
        stream: TcpStream,
        first: Vec<u8>,
        ticket: Ticket,
    ) -> std::io::Result<Self> {
        let mut this = Self::new(stream)?;
        this.accepted = Some((ticket, first));
        Ok(this)
    }
}

impl ClusterBidiStream for BufferedTcp {
    fn split(self: Box<Self>) -> (BoxRead, BoxWrite) {
        let (read, write) = self.stream.into_split();
        let activity = track(self.peer);
        let read: BoxRead = match self.accepted {
            Some((ticket, first)) => Box::new(Tracked {
                inner: GatedRead::new(read, first, ticket, READ_BUFFER),
                activity,
            }),
            None => Box::new(Tracked {
                inner: BufReader::with_capacity(READ_BUFFER, read),
                activity,
            }),
        };
        (read, Box::new(write))
    }

    fn peer_label(&self) -> Option<String> {
        Some(self.peer.to_string())
    }

    fn local_label(&self) -> Option<String> {
        Some(self.local.to_string())
    }
}

/// A TLS session the node accepted (handshake done, `first` frame read), read through a
/// [`GatedRead`] until its session authenticates.
pub(crate) struct AcceptedTls {
    pub(crate) stream: TlsStream<TcpStream>,
    pub(crate) first: Vec<u8>,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) ticket: Ticket,
}

impl ClusterBidiStream for AcceptedTls {
    fn split(self: Box<Self>) -> (BoxRead, BoxWrite) {
        let (read, write) = tokio::io::split(self.stream);
        let read = Tracked {
            inner: GatedRead::new(read, self.first, self.ticket, 0),
            activity: track(self.peer),
        };
        (Box::new(read), Box::new(write))
    }

    fn peer_label(&self) -> Option<String> {
        Some(self.peer.to_string())
    }

    fn local_label(&self) -> Option<String> {
        Some(self.local.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Frames written back to back come out whole, in order, through the buffered half.
    #[tokio::test]
    async fn frames_pass_through_the_buffer_unchanged() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dialled = tokio::spawn(async move { TcpStream::connect(addr).await.unwrap() });
        let (accepted, _) = listener.accept().await.unwrap();
        let dialled = dialled.await.unwrap();
        let dialled_addr = dialled.local_addr().unwrap();
        let session = Box::new(BufferedTcp::new(accepted).unwrap());
        assert_eq!(
            session.peer_label(),
            Some(dialled.local_addr().unwrap().to_string())
        );
        assert_eq!(session.local_label(), Some(addr.to_string()));
        let (mut read, _write) = session.split();
        let (_, mut send) = dialled.into_split();
        let mut frames = Vec::new();
        for (i, len) in [0usize, 5, READ_BUFFER + 17, 3].into_iter().enumerate() {
            frames.extend_from_slice(&(len as u64).to_be_bytes());
            frames.extend(std::iter::repeat_n(i as u8, len));
        }
        let peer = dialled_addr.to_string();
        assert!(
            activity_of(&peer).is_some_and(|a| a.last().is_none()),
            "nothing read yet"
        );
        send.write_all(&frames).await.unwrap();
        for (i, len) in [0usize, 5, READ_BUFFER + 17, 3].into_iter().enumerate() {
            assert_eq!(read.read_u64().await.unwrap(), len as u64);
            let mut payload = vec![0xFF; len];
            read.read_exact(&mut payload).await.unwrap();
            assert!(payload.iter().all(|b| *b == i as u8), "frame {i}");
        }
        assert!(
            activity_of(&peer).is_some_and(|a| a.last().is_some()),
            "bytes read"
        );
        drop(read);
        assert!(
            activity_of(&peer).is_none(),
            "the session's record goes with it"
        );
    }

    /// Two open sessions with the same peer address: neither record is taken for it.
    #[test]
    fn a_peer_address_of_two_open_sessions_has_no_record() {
        let peer: SocketAddr = "10.9.8.7:4100".parse().unwrap();
        let one = track(peer);
        assert!(activity_of(&peer.to_string()).is_some_and(|a| Arc::ptr_eq(&a, &one)));
        let two = track(peer);
        assert!(activity_of(&peer.to_string()).is_none(), "ambiguous");
        drop(one);
        assert!(activity_of(&peer.to_string()).is_some_and(|a| Arc::ptr_eq(&a, &two)));
    }
}
