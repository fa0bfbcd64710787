//! The reader of a connection that has not authenticated yet ([`GatedRead`]), and the read
//! of its first frame ([`first_frame`]): frames up to the handshake frame limit pass, a larger
//! one is held unread, length prefix included, until the session authenticates or its
//! handshake is closed (see the parent module's docs).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, BufReader, ReadBuf};

use super::Ticket;

/// The read half of an accepted connection, limited to handshake-sized frames until its
/// session authenticates (see the module docs). Holds the connection's [`Ticket`].
pub(crate) struct GatedRead<R> {
    /// Bytes to pass on before reading more: the first frame, read before the session
    /// existed (see [`first_frame`]), then each length prefix once it is within the limit.
    prefix: Vec<u8>,
    prefix_at: usize,
    read: Option<Read<R>>,
    ticket: Ticket,
    frame_limit: u64,
    /// Read buffer once authenticated, bytes (0: none).
    buffer: usize,
}

enum Read<R> {
    Gated {
        inner: R,
        /// The current frame's length prefix, as far as read.
        header: [u8; 8],
        header_read: usize,
        /// Payload bytes of the current frame still to pass.
        payload_left: u64,
    },
    Open(BufReader<R>),
    Direct(R),
}

impl<R: AsyncRead + Unpin> GatedRead<R> {
    /// Reads `inner` for the connection of `ticket`, after passing on `first` (a whole
    /// frame, as [`first_frame`] returns it, or nothing); once authenticated, through a read
    /// buffer of `buffer` bytes (0 for none).
    pub(crate) fn new(inner: R, first: Vec<u8>, ticket: Ticket, buffer: usize) -> Self {
        Self {
            prefix: first,
            prefix_at: 0,
            frame_limit: ticket.handshakes.frame_limit,
            read: Some(Read::Gated {
                inner,
                header: [0; 8],
                header_read: 0,
                payload_left: 0,
            }),
            ticket,
            buffer,
        }
    }
}

/// Pre-authentication reads go through a stack buffer of this many bytes at most.
const GATED_CHUNK: usize = 4096;

impl<R: AsyncRead + Unpin> AsyncRead for GatedRead<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let handshake = Arc::clone(&this.ticket.handshake);
        loop {
            if this.prefix_at < this.prefix.len() {
                let rest = &this.prefix[this.prefix_at..];
                let n = rest.len().min(buf.remaining());
                buf.put_slice(&rest[..n]);
                this.prefix_at += n;
                if this.prefix_at == this.prefix.len() {
                    this.prefix = Vec::new();
                    this.prefix_at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            match &mut this.read {
                Some(Read::Open(open)) => return Pin::new(open).poll_read(cx, buf),
                Some(Read::Direct(inner)) => return Pin::new(inner).poll_read(cx, buf),
                _ => {}
            }
            {
                let mut state = handshake.state();
                if let Some(reason) = &state.closed {
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        reason.clone(),
                    )));
                }
                if state.authenticated {
                    drop(state);
                    if let Some(Read::Gated {
                        inner,
                        header,
                        header_read,
                        ..
                    }) = this.read.take()
                    {
                        // A length prefix held back (or partly read) is passed on first.
                        this.prefix = header[..header_read].to_vec();
                        this.read = Some(match this.buffer {
                            0 => Read::Direct(inner),
                            buffer => Read::Open(BufReader::with_capacity(buffer, inner)),
                        });
                    }
                    continue;
                }
                // Woken by `close` or `authenticated` as well as by the socket.
                match &state.waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => state.waker = Some(cx.waker().clone()),
                }
            }
            let Some(Read::Gated {
                inner,
                header,
                header_read,
                payload_left,
            }) = &mut this.read
            else {
                return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
            };
            if *payload_left > 0 {
                let want = usize::try_from(*payload_left)
                    .unwrap_or(usize::MAX)
                    .min(buf.remaining())
                    .min(GATED_CHUNK);
                if want == 0 {
                    return Poll::Ready(Ok(()));
                }
                let mut chunk = [0u8; GATED_CHUNK];
                let mut read = ReadBuf::new(&mut chunk[..want]);
                std::task::ready!(Pin::new(inner).poll_read(cx, &mut read))?;
                let data = read.filled();
                if data.is_empty() {
                    handshake.state().peer_closed = true;
                } else {
                    *payload_left -= data.len() as u64;
                    buf.put_slice(data);
                }
                return Poll::Ready(Ok(()));
            }
            if *header_read < header.len() {
                // The length prefix is kept here until it is known to be within the limit:
                // the caller (ractor_cluster) then never starts on a frame that is held.
                let mut read = ReadBuf::new(&mut header[*header_read..]);
                std::task::ready!(Pin::new(&mut *inner).poll_read(cx, &mut read))?;
                let n = read.filled().len();
                if n == 0 {
                    handshake.state().peer_closed = true;
                    return Poll::Ready(Ok(()));
                }
                *header_read += n;
                continue;
            }
            let len = u64::from_be_bytes(*header);
            if len > this.frame_limit {
                handshake.state().announced = Some(len);
                // Held unread until authenticated (a wake-up) or closed.
                return Poll::Pending;
            }
            this.prefix = header.to_vec();
            *header_read = 0;
            *payload_left = len;
        }
    }
}

/// Reads the first frame of a connection, which must be a handshake message: its length
/// prefix and payload (the payload grows as it arrives). Errors: the frame announces more
/// than `limit` bytes (the connection is not worth a session), or the connection fails.
pub(crate) async fn first_frame<R: AsyncRead + Unpin>(
    read: &mut R,
    limit: usize,
) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let len = read.read_u64().await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => "closed before sending a whole frame".to_string(),
        _ => e.to_string(),
    })?;
    if len > limit as u64 {
        return Err(format!(
            "its first frame announces {len} bytes, over handshake_frame_limit ({limit} \
             bytes): not a node"
        ));
    }
    let mut frame = len.to_be_bytes().to_vec();
    let read_len = read
        .take(len)
        .read_to_end(&mut frame)
        .await
        .map_err(|e| format!("no whole frame: {e}"))?;
    if (read_len as u64) < len {
        return Err("closed in its first frame".into());
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::super::Handshakes;
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn frame(len: usize, byte: u8) -> Vec<u8> {
        let mut frame = (len as u64).to_be_bytes().to_vec();
        frame.extend(std::iter::repeat_n(byte, len));
        frame
    }

    /// Small frames pass whole and in order; a frame over the limit is held unread until
    /// the session authenticates, then everything passes.
    #[tokio::test]
    async fn a_frame_over_the_limit_waits_for_authentication() {
        let handshakes = Handshakes::new(8, 100);
        let (mut peer, node) = tokio::io::duplex(1 << 20);
        let ticket = handshakes.admit(addr(9));
        let handshake = Arc::clone(ticket.handshake());
        let mut read = GatedRead::new(node, Vec::new(), ticket, 64);
        let mut sent = frame(0, 0);
        sent.extend(frame(100, 1));
        sent.extend(frame(3, 2));
        peer.write_all(&sent).await.unwrap();
        let mut got = vec![0u8; sent.len()];
        read.read_exact(&mut got).await.unwrap();
        assert_eq!(got, sent);

        let big = frame(5_000, 3);
        peer.write_all(&big).await.unwrap();
        // Not even its length prefix passes before authentication.
        let mut byte = [0u8; 1];
        let held = tokio::time::timeout(Duration::from_millis(100), read.read(&mut byte)).await;
        assert!(held.is_err(), "the frame passed before authentication");
        assert!(handshake.outcome().is_none());
        handshakes.authenticated(&handshake);
        let mut got = vec![0u8; big.len()];
        read.read_exact(&mut got).await.unwrap();
        assert_eq!(got, big);
        // Authenticated: no limit any more.
        let bigger = frame(50_000, 4);
        peer.write_all(&bigger).await.unwrap();
        let mut got = vec![0u8; bigger.len()];
        read.read_exact(&mut got).await.unwrap();
        assert_eq!(got, bigger);
    }

    #[tokio::test]
    async fn closing_fails_a_held_read_and_says_why() {
        let handshakes = Handshakes::new(8, 100);
        let (mut peer, node) = tokio::io::duplex(1 << 20);
        let ticket = handshakes.admit(addr(9));
        let handshake = Arc::clone(ticket.handshake());
        let mut read = GatedRead::new(node, Vec::new(), ticket, 0);
        peer.write_all(&(16u64 << 20).to_be_bytes()).await.unwrap();
        let closer = Arc::clone(&handshake);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            closer.close("handshake timeout".into());
        });
        let mut byte = [0u8; 1];
        let error = read.read_exact(&mut byte).await.unwrap_err();
        assert_eq!(error.to_string(), "handshake timeout");
        assert_eq!(
            handshake.outcome().as_deref(),
            Some("handshake timeout after announcing a frame of 16777216 bytes")
        );
        drop(read);
        assert_eq!(handshakes.len(), 0);
    }

    #[tokio::test]
    async fn the_first_frame_is_read_whole_and_passed_on_first() {
        let handshakes = Handshakes::new(8, 100);
        let (mut peer, mut node) = tokio::io::duplex(1 << 16);
        let mut sent = frame(100, 1);
        sent.extend(frame(2, 2));
        peer.write_all(&sent).await.unwrap();
        let first = first_frame(&mut node, 100).await.unwrap();
        assert_eq!(first, frame(100, 1));
        let ticket = handshakes.admit(addr(9));
        let mut read = GatedRead::new(node, first, ticket, 0);
        let mut got = vec![0u8; sent.len()];
        read.read_exact(&mut got).await.unwrap();
        assert_eq!(got, sent);

        let (mut peer, mut node) = tokio::io::duplex(64);
        peer.write_all(&101u64.to_be_bytes()).await.unwrap();
        let refused = first_frame(&mut node, 100).await.unwrap_err();
        assert!(refused.contains("announces 101 bytes"), "{refused}");
        peer.write_all(&[1, 2]).await.unwrap();
        let (mut peer, mut node) = tokio::io::duplex(64);
        peer.write_all(&frame(10, 1)[..12]).await.unwrap();
        drop(peer);
        assert!(first_frame(&mut node, 100).await.is_err());
    }

    /// Length-prefix bytes read before the authentication are passed on after it.
    #[tokio::test]
    async fn a_prefix_split_by_the_authentication_arrives_whole() {
        let handshakes = Handshakes::new(8, 100);
        let (mut peer, node) = tokio::io::duplex(1 << 16);
        let ticket = handshakes.admit(addr(9));
        let handshake = Arc::clone(ticket.handshake());
        let mut read = GatedRead::new(node, Vec::new(), ticket, 16);
        let sent = frame(300, 5);
        peer.write_all(&sent[..3]).await.unwrap();
        let mut byte = [0u8; 1];
        let held = tokio::time::timeout(Duration::from_millis(50), read.read(&mut byte)).await;
        assert!(held.is_err(), "part of a prefix passed");
        handshakes.authenticated(&handshake);
        peer.write_all(&sent[3..]).await.unwrap();
        let mut got = vec![0u8; sent.len()];
        read.read_exact(&mut got).await.unwrap();
        assert_eq!(got, sent);
    }

    /// Without a read buffer, the authenticated reader passes reads straight through.
    #[tokio::test]
    async fn no_buffer_once_authenticated_without_one() {
        let handshakes = Handshakes::new(8, 100);
        let (mut peer, node) = tokio::io::duplex(1 << 16);
        let ticket = handshakes.admit(addr(9));
        let handshake = Arc::clone(ticket.handshake());
        let mut read = GatedRead::new(node, Vec::new(), ticket, 0);
        handshakes.authenticated(&handshake);
        let big = frame(5_000, 7);
        peer.write_all(&big).await.unwrap();
        let mut got = vec![0u8; big.len()];
        read.read_exact(&mut got).await.unwrap();
        assert_eq!(got, big);
    }

    #[tokio::test]
    async fn a_peer_hanging_up_is_noted() {
        let handshakes = Handshakes::new(8, 100);
        let (peer, node) = tokio::io::duplex(64);
        let ticket = handshakes.admit(addr(9));
        let handshake = Arc::clone(ticket.handshake());
        let mut read = GatedRead::new(node, Vec::new(), ticket, 0);
        drop(peer);
        assert_eq!(read.read(&mut [0u8; 8]).await.unwrap(), 0);
        assert!(handshake.peer_closed());
        assert_eq!(
            handshake.outcome().as_deref(),
            Some("the peer closed the connection")
        );
    }
}
