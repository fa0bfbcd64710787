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

use std::net::SocketAddr;

use ractor_cluster::{BoxRead, BoxWrite, ClusterBidiStream};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::preauth::{GatedRead, Ticket};

/// Read buffer per session, bytes: a 64 KiB payload's frame arrives in one or two reads.
const READ_BUFFER: usize = 64 * 1024;

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
        let read: BoxRead = match self.accepted {
            Some((ticket, first)) => Box::new(GatedRead::new(read, first, ticket, READ_BUFFER)),
            None => Box::new(BufReader::with_capacity(READ_BUFFER, read)),
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
        let read = GatedRead::new(read, self.first, self.ticket, 0);
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
        send.write_all(&frames).await.unwrap();
        for (i, len) in [0usize, 5, READ_BUFFER + 17, 3].into_iter().enumerate() {
            assert_eq!(read.read_u64().await.unwrap(), len as u64);
            let mut payload = vec![0xFF; len];
            read.read_exact(&mut payload).await.unwrap();
            assert!(payload.iter().all(|b| *b == i as u8), "frame {i}");
        }
    }
}
