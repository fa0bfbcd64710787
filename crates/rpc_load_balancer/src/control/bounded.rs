//! Bounded decoding of the lists a peer sends: a visitor that keeps the first elements of a
//! sequence (those `keep` accepts) and decodes the rest one at a time only to drop them — the
//! wire format is not self-describing, so they must be read — so that a long list holds no
//! more memory than the kept elements. A claimed length beyond the bytes left fails to decode
//! (postcard checks each element's bytes as it reads them).

use std::marker::PhantomData;

use serde::{Deserialize, Deserializer};

/// How many `(name, address)` pairs a decoded [`ControlReply::Peers`](super::ControlReply::Peers)
/// keeps: the first this many whose name and address are at most [`MAX_PEER_NAME_BYTES`]
/// bytes each; the others are read and dropped.
pub const MAX_PEERS: usize = 4_096;

/// The longest node name or `host:port` a decoded
/// [`ControlReply::Peers`](super::ControlReply::Peers) pair may carry (bytes; the node
/// directory's bound): a longer pair is dropped.
pub const MAX_PEER_NAME_BYTES: usize = 255;

/// How many member names a decoded [`ControlReply::Members`](super::ControlReply::Members)
/// keeps: the first this many; the others are read and dropped. (Far above any balancer's
/// member count: the node directory holds at most 1,024 nodes.)
pub const MAX_MEMBERS: usize = 65_536;

/// A visitor keeping the first `keep` elements that `accept` takes, and reading the rest only
/// to drop them.
struct FirstOf<T> {
    keep: usize,
    accept: fn(&T) -> bool,
    what: &'static str,
    elements: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for FirstOf<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(self.keep));
        while let Some(element) = seq.next_element::<T>()? {
            if kept.len() < self.keep && (self.accept)(&element) {
                kept.push(element);
            }
        }
        Ok(kept)
    }
}

/// Decodes a sequence of `T` ("`what`" in an error), keeping the first `keep` elements that
/// `accept` takes.
pub(crate) fn first_of<'de, D, T>(
    deserializer: D,
    keep: usize,
    accept: fn(&T) -> bool,
    what: &'static str,
) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_seq(FirstOf {
        keep,
        accept,
        what,
        elements: PhantomData,
    })
}

/// Decodes a peer list, keeping the first [`MAX_PEERS`] pairs whose name and address are at
/// most [`MAX_PEER_NAME_BYTES`] bytes.
pub(crate) fn first_peers<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<(String, String)>, D::Error> {
    first_of(
        deserializer,
        MAX_PEERS,
        |(name, addr): &(String, String)| {
            name.len() <= MAX_PEER_NAME_BYTES && addr.len() <= MAX_PEER_NAME_BYTES
        },
        "a sequence of (node name, host:port) pairs",
    )
}

#[cfg(test)]
mod tests;

/// Decodes a member list (`None`: no such balancer there), keeping the first [`MAX_MEMBERS`]
/// names.
pub(crate) fn first_members<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    struct MaybeMembers;
    impl<'de> serde::de::Visitor<'de> for MaybeMembers {
        type Value = Option<Vec<String>>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an optional sequence of member node names")
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(
            self,
            deserializer: D,
        ) -> Result<Self::Value, D::Error> {
            first_of(
                deserializer,
                MAX_MEMBERS,
                |_| true,
                "a sequence of member node names",
            )
            .map(Some)
        }
    }
    deserializer.deserialize_option(MaybeMembers)
}
