//! [`Payload`]: a byte string that crosses the wire without being copied by this library
//! (docs/how-to/large-payloads.md).

use std::any::Any;
use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes kept free behind a payload built by [`Payload::with_capacity`] (and the other
/// constructors that allocate), for the call header appended to it on the way out: the
/// function's name, the balancer's name and ≈ 25 bytes more. A longer header grows the
/// buffer once (one copy).
pub const PAYLOAD_TAIL_ROOM: usize = 128;

/// A byte string sent without copies as a remote function's whole `Args` or `Reply`. Derefs
/// to `[u8]`.
///
/// A function whose whole `Args` or `Reply` is a `Payload` skips serde for it: the caller's
/// buffer becomes the message (the call's header appended behind the bytes, the wire version
/// written into a byte reserved in front of them), the serving node hands the received
/// message to the function as its argument, and an echoed or newly built reply goes back the
/// same way. The only copies left are ractor_cluster's, into and out of the socket — the same
/// as for a raw ractor_cluster RPC of a `Vec<u8>`. Inside another type (say `(u32, Payload)`)
/// a `Payload` is an ordinary serde byte string (postcard: a length, then the bytes). Both
/// sides must declare `Payload` itself: on the wire its bytes carry no length of their own.
///
/// ```
/// use rpc_load_balancer::{FunctionError, Payload, RemoteFunction};
///
/// /// Returns its input reversed, in place.
/// struct Reverse;
/// impl RemoteFunction for Reverse {
///     const NAME: &'static str = "bytes.reverse";
///     type Args = Payload;
///     type Reply = Payload;
///     async fn call(&self, mut bytes: Payload) -> Result<Payload, FunctionError> {
///         bytes.reverse();
///         Ok(bytes)
///     }
/// }
///
/// let mut payload = Payload::with_capacity(5);
/// payload.extend_from_slice(b"hello");
/// assert_eq!(&payload[..], b"hello");
/// assert_eq!(payload.into_vec(), b"hello".to_vec());
/// # let _ = Reverse;
/// ```
///
/// Build one with [`Payload::with_capacity`], [`Payload::from_slice`] or `extend`: these
/// leave room for the message framing, so sending them copies nothing.
/// `From<Vec<u8>>` has to move the bytes up by one (one `memmove`, and a reallocation when
/// the vector has no spare capacity); [`Payload::into_vec`] moves them down by one.
#[derive(Clone)]
pub struct Payload {
    /// Byte 0 is reserved (the wire version goes there); the payload is `buf[1..]`.
    buf: Vec<u8>,
}

impl Payload {
    /// An empty payload. Allocates nothing until bytes are added.
    pub fn new() -> Self {
        Self { buf: vec![0] }
    }

    /// An empty payload with room for `capacity` bytes (plus the framing a call adds:
    /// [`PAYLOAD_TAIL_ROOM`] bytes behind, 1 in front).
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.saturating_add(1 + PAYLOAD_TAIL_ROOM));
        buf.push(0);
        Self { buf }
    }

    /// A payload holding a copy of `bytes`, with room for the framing (one allocation).
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut payload = Self::with_capacity(bytes.len());
        payload.buf.extend_from_slice(bytes);
        payload
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[1..]
    }

    /// The bytes, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[1..]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.buf.len() - 1
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 1
    }

    /// Appends `bytes`.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends one byte.
    pub fn push(&mut self, byte: u8) {
        self.buf.push(byte);
    }

    /// Keeps the first `len` bytes (no effect if there are fewer).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len.saturating_add(1));
    }

    /// Removes every byte, keeping the allocation.
    pub fn clear(&mut self) {
        self.buf.truncate(1);
    }

    /// Makes room for at least `additional` more bytes.
    pub fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional);
    }

    /// The bytes as a `Vec<u8>` (moves them down by one byte in place: a `memmove`, no
    /// allocation).
    pub fn into_vec(self) -> Vec<u8> {
        let mut buf = self.buf;
        buf.remove(0);
        buf
    }

    /// Takes a whole message whose first byte is framing and whose payload is the rest.
    pub(crate) fn from_message(buf: Vec<u8>) -> Self {
        debug_assert!(!buf.is_empty());
        if buf.is_empty() {
            return Self::new();
        }
        Self { buf }
    }

    /// The buffer with its reserved first byte, to frame as a message.
    pub(crate) fn into_message(self) -> Vec<u8> {
        self.buf
    }
}

/// `value` as a `Payload` when `A` is `Payload`, else `value` back.
pub(crate) fn downcast<A: 'static>(value: A) -> Result<Payload, A> {
    let mut slot = Some(value);
    if let Some(payload) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Payload>>() {
        // (`slot` is `Some` here: the empty payload is never used.)
        return Ok(payload.take().unwrap_or_default());
    }
    match slot {
        Some(value) => Err(value),
        // Not reachable: `slot` was only read above.
        None => Ok(Payload::new()),
    }
}

/// `payload` as an `A`, when `A` is `Payload`.
pub(crate) fn upcast<A: 'static>(payload: Payload) -> Option<A> {
    let mut slot = Some(payload);
    (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<A>>()
        .and_then(Option::take)
}

/// Whether `A` is `Payload` (a constant after monomorphization).
pub(crate) fn is_payload<A: 'static>() -> bool {
    std::any::TypeId::of::<A>() == std::any::TypeId::of::<Payload>()
}

/// The `&Payload` behind `value`, when `A` is `Payload`.
pub(crate) fn as_payload<A: 'static>(value: &A) -> Option<&Payload> {
    (value as &dyn Any).downcast_ref::<Payload>()
}

impl Default for Payload {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for Payload {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsRef<[u8]> for Payload {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Payload({} bytes)", self.len())
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Payload {}

impl PartialEq<[u8]> for Payload {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Self {
        Self::from_slice(bytes)
    }
}

impl From<Vec<u8>> for Payload {
    /// Moves the bytes up by one to reserve the framing byte (a `memmove`; a reallocation
    /// too when `bytes` has no spare capacity).
    fn from(mut bytes: Vec<u8>) -> Self {
        bytes.insert(0, 0);
        Self { buf: bytes }
    }
}

impl From<Payload> for Vec<u8> {
    fn from(payload: Payload) -> Self {
        payload.into_vec()
    }
}

impl Extend<u8> for Payload {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
        self.buf.extend(iter);
    }
}

impl std::io::Write for Payload {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.as_slice())
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_byte_buf(PayloadVisitor)
    }
}

/// Builds a [`Payload`] from whatever form the format gives the bytes in.
struct PayloadVisitor;

impl<'de> serde::de::Visitor<'de> for PayloadVisitor {
    type Value = Payload;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Payload, E> {
        Ok(Payload::from_slice(bytes))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Payload, A::Error> {
        let mut payload = Payload::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(byte) = seq.next_element()? {
            payload.push(byte);
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_bytes_out() {
        let mut p = Payload::new();
        assert!(p.is_empty());
        p.extend_from_slice(b"ab");
        p.push(b'c');
        p.extend(*b"de");
        assert_eq!(p.as_slice(), b"abcde");
        p[0] = b'A';
        assert_eq!(&p[..], b"Abcde");
        p.truncate(2);
        assert_eq!(p.len(), 2);
        assert_eq!(Vec::from(p.clone()), b"Ab".to_vec());
        p.clear();
        assert!(p.is_empty());
        assert_eq!(Payload::from(vec![1, 2, 3]).as_slice(), &[1, 2, 3]);
        assert_eq!(Payload::from(&[4u8][..]), Payload::from_slice(&[4]));
    }

    #[test]
    fn room_for_the_framing_is_reserved() {
        let p = Payload::from_slice(&[7; 1000]);
        assert!(p.buf.capacity() >= 1 + 1000 + PAYLOAD_TAIL_ROOM);
    }

    #[test]
    fn serde_is_a_byte_string() {
        let p = Payload::from_slice(b"xyz");
        let bytes = postcard::to_allocvec(&(5u8, &p)).unwrap();
        assert_eq!(bytes, [5, 3, b'x', b'y', b'z']);
        let (n, back): (u8, Payload) = postcard::from_bytes(&bytes).unwrap();
        assert_eq!((n, back), (5, p));
    }

    #[test]
    fn downcasts_only_payloads() {
        assert!(is_payload::<Payload>());
        assert!(!is_payload::<Vec<u8>>());
        assert_eq!(
            downcast(Payload::from_slice(b"a")).unwrap().as_slice(),
            b"a"
        );
        assert_eq!(downcast(7u32).unwrap_err(), 7);
        assert_eq!(
            upcast::<Payload>(Payload::from_slice(b"b"))
                .unwrap()
                .as_slice(),
            b"b"
        );
        assert!(upcast::<String>(Payload::new()).is_none());
        assert!(as_payload(&Payload::new()).is_some());
        assert!(as_payload(&1u8).is_none());
    }
}
