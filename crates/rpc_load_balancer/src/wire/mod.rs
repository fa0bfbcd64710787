//! The wire: one cluster message type with a few generic variants that never change, and
//! our own byte format inside them.
//!
//! ractor_cluster identifies a remote message by its enum variant name, so renaming a variant
//! breaks mixed-version clusters. [`RpcMessage`] therefore has three generic variants whose
//! payload is our own format. Every message **starts with the wire version** (a postcard
//! varint), in every version, so a peer of another version is always recognised; what follows
//! depends on the version. In version 2:
//!
//! * a **call** (or cast) is `[version][arguments][CallHeader][header length: u32 LE]`: the
//!   header names the function, the balancer (if routed), the caller's remaining time budget
//!   in ms and a call id;
//! * a **reply** is `[version][value if Ok][ReplyStatus][status length: u32 LE]`;
//! * a **control** request is `[version][ControlRequest]`, answered with a reply.
//!
//! The header, the status and the control request can grow within one version: a decoder
//! reads the fields it knows and skips the bytes after them, and a newer decoder gives fields
//! an older sender did not write their defaults ([`section`]).
//!
//! Arguments and values are postcard, except a [`Payload`](crate::Payload) that is a
//! function's whole `Args` or `Reply`: its bytes are the value, unframed. Headers and statuses
//! go *behind* the value so that a payload's own buffer can become the message (the header
//! appended to it) and a received message can become the function's argument (truncated), with
//! no copy. A member that refuses a call unrun because it is leaving sends the call's bytes
//! back as the value of its `Leaving` reply, so the caller can send them elsewhere without
//! keeping a copy.
//!
//! The version is decoded first and alone, so a peer of another version gets a typed
//! [`Error::WireVersion`](crate::Error::WireVersion) instead of a silent drop and a timeout.
//! Don't enable ractor's `blanket_serde` feature: it changes how `Vec<u8>` fields are encoded.

pub(crate) mod header;
#[cfg(feature = "test-hooks")]
pub(crate) mod newer_fields;
pub(crate) mod reply;
pub(crate) mod section;

pub(crate) use section::{decode_control, encode_control, push_trailer};

#[cfg(test)]
mod fuzz;

use std::sync::atomic::{AtomicU16, Ordering};

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;

/// Version of the byte format inside [`RpcMessage`]. Bumped on any incompatible change.
pub const WIRE_VERSION: u16 = 2;

/// The version this process speaks: [`WIRE_VERSION`] unless a test node set another
/// (`NodeConfig::wire_version`). Read once per message; a relaxed load costs nothing.
static LOCAL_VERSION: AtomicU16 = AtomicU16::new(WIRE_VERSION);

/// The wire version this process speaks.
pub(crate) fn local_version() -> u16 {
    LOCAL_VERSION.load(Ordering::Relaxed)
}

/// Sets the wire version this process speaks (at node start).
pub(crate) fn set_local_version(version: u16) {
    LOCAL_VERSION.store(version, Ordering::Relaxed);
}

/// The library's `ractor::pg` scope: balancer groups and node endpoints live here.
pub const SCOPE: &str = "rpc_load_balancer";

/// The pg group (in [`SCOPE`]) every node's rpc endpoint actor joins; the actor is named
/// `rpc_load_balancer/@endpoint/<node>`. Balancer names may not start with `@`, so this never
/// collides with a balancer's group.
pub const ENDPOINT_GROUP: &str = "@endpoints";

/// The pg group (in [`SCOPE`]) the endpoints of client nodes (`NodeConfig::client`) join too.
pub(crate) const CLIENT_GROUP: &str = "@clients";

/// Prefix of an endpoint actor's registered name; the node's full name follows it.
pub(crate) const ENDPOINT_NAME_PREFIX: &str = "rpc_load_balancer/@endpoint/";

/// The registered name of `node`'s endpoint actor.
pub(crate) fn endpoint_name(node: &str) -> String {
    format!("{ENDPOINT_NAME_PREFIX}{node}")
}

/// The node name inside an endpoint actor's registered name, if it is one.
pub(crate) fn node_of_endpoint(actor_name: &str) -> Option<&str> {
    actor_name.strip_prefix(ENDPOINT_NAME_PREFIX)
}

/// The message every rpc endpoint and balancer member actor receives.
///
/// Public only because ractor needs the type to address remote actors; build requests through
/// [`Node`](crate::Node), not by hand. Variant names are the wire contract and never change.
#[derive(RactorClusterMessage)]
pub enum RpcMessage {
    /// A call: encoded header and arguments; the reply port gets an encoded reply.
    #[rpc]
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
    /// A cast: encoded header and arguments; nothing is answered.
    Cast(Vec<u8>),
    /// A control request (ping, admin queries); the reply port gets an encoded reply.
    #[rpc]
    Control(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

impl std::fmt::Debug for RpcMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Call(bytes, _) => write!(f, "Call({} bytes)", bytes.len()),
            Self::Cast(bytes) => write!(f, "Cast({} bytes)", bytes.len()),
            Self::Control(bytes, _) => write!(f, "Control({} bytes)", bytes.len()),
        }
    }
}

/// Why incoming bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The bytes carry another wire version.
    Version(u16),
    /// The bytes are truncated or not our format.
    Malformed(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Version(v) => write!(f, "wire version {v}, expected {}", local_version()),
            Self::Malformed(why) => write!(f, "malformed message: {why}"),
        }
    }
}

/// Reads the leading wire version and checks it; returns the rest.
pub(crate) fn split_version(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    let (version, rest) = postcard::take_from_bytes::<u16>(bytes)
        .map_err(|e| DecodeError::Malformed(format!("no wire version: {e}")))?;
    if version != local_version() {
        return Err(DecodeError::Version(version));
    }
    Ok(rest)
}

/// The bytes postcard needs for `value` (0 if it cannot be encoded: encoding then fails with
/// the real error), so a message is allocated once at its final size.
pub(crate) fn encoded_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default()).unwrap_or(0)
}

/// The bytes of `value` in a message without encoding it: a [`Payload`](crate::Payload)'s
/// length (its bytes are the value), else what postcard needs; postcard's error when the
/// value cannot be encoded.
pub(crate) fn value_len<T: serde::Serialize + 'static>(
    value: &T,
) -> Result<usize, postcard::Error> {
    match crate::payload::as_payload(value) {
        Some(payload) => Ok(payload.len()),
        None => postcard::serialize_with_flavor(value, postcard::ser_flavors::Size::default()),
    }
}

/// Bytes the wire version this process speaks takes at the start of a message.
pub(crate) fn version_len() -> usize {
    encoded_len(&local_version())
}

/// Bytes the wire version takes at most (a u16 varint).
pub(crate) const VERSION_LEN: usize = 3;

/// Bytes of the length behind a header or status.
pub(crate) const TRAILER_LEN: usize = 4;

/// Starts an encoded message with the wire version.
pub(crate) fn start_message(capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    // A u16 varint is at most 3 bytes; extending a Vec cannot fail.
    out = postcard::to_extend(&local_version(), out).unwrap_or_default();
    out
}

/// Writes the wire version into `message[0]`, the byte a [`Payload`](crate::Payload) reserves
/// for it, when the version takes one byte (any version below 128); otherwise builds the
/// message anew (a copy).
pub(crate) fn stamp_version(mut message: Vec<u8>) -> Vec<u8> {
    let version = local_version();
    match (u8::try_from(version), message.first_mut()) {
        (Ok(byte @ 0..=0x7f), Some(first)) => {
            *first = byte;
            message
        }
        _ => {
            let body = message.get(1..).unwrap_or_default();
            let mut out = start_message(VERSION_LEN + body.len() + 64);
            out.extend_from_slice(body);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_names_round_trip() {
        let name = endpoint_name("a@127.0.0.1");
        assert_eq!(node_of_endpoint(&name), Some("a@127.0.0.1"));
        assert_eq!(node_of_endpoint("rpc_load_balancer/reports/a@h"), None);
    }

    #[test]
    fn version_is_checked_first() {
        let msg = start_message(8);
        assert_eq!(split_version(&msg), Ok(&[][..]));
        let other = postcard::to_allocvec(&(WIRE_VERSION + 1)).unwrap();
        assert_eq!(
            split_version(&other),
            Err(DecodeError::Version(WIRE_VERSION + 1))
        );
        assert!(matches!(split_version(&[]), Err(DecodeError::Malformed(_))));
        assert!(matches!(
            split_version(&[0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::Malformed(_))
        ));
    }
}
