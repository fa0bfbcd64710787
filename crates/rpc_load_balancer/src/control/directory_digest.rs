//! The digest form of the node directory exchange (Scuttlebutt-style anti-entropy, van
//! Renesse, Dumitriu, Gough and Singh, "Efficient Reconciliation and Flow Control for
//! Anti-Entropy Protocols", LADIS 2008): instead of its whole directory, a node sends one
//! short [`DigestItem`] per entry it holds — who, which run, how far its counter is, and a
//! hash of the rest — and its peer answers with only what the sender lacks or holds older
//! ([`ControlReply::GossipDelta`](super::ControlReply::GossipDelta)).
//!
//! A heartbeat counter moves every period while an entry's address and balancer lists
//! almost never do, so most of what two nodes tell each other is "node X's counter is now
//! c": a digest item says it, where a whole entry did (and only for the entries the other
//! side holds older).

use serde::{Deserialize, Serialize};

use super::bounded::first_of;
use super::directory_entry::{DirectoryEntry, MAX_DIRECTORY_ENTRIES};

/// One entry of a node directory in digest form: the node, its run and counter, and
/// [`DirectoryEntry::content_hash`] of its address and balancer lists. Sent for every entry
/// the sender holds ([`ControlRequest::GossipDigest`](super::ControlRequest::GossipDigest)),
/// and as a heartbeat ("beat") for an entry whose content the receiver already holds
/// ([`ControlReply::GossipDelta`](super::ControlReply::GossipDelta)): a receiver holding
/// `node` in the same `incarnation` with the same `content` takes the counter when it is
/// larger than its own; for anything else it needs the whole entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestItem {
    /// The node's full name (`name@host`).
    pub node: String,
    /// Its run ([`DirectoryEntry::incarnation`]).
    pub incarnation: u64,
    /// Its heartbeat counter as the sender holds it ([`DirectoryEntry::counter`]).
    pub counter: u64,
    /// [`DirectoryEntry::content_hash`] of the entry the sender holds.
    pub content: u64,
}

impl DigestItem {
    /// The digest item of `entry`.
    pub fn of(entry: &DirectoryEntry) -> Self {
        Self {
            node: entry.node.clone(),
            incarnation: entry.incarnation,
            counter: entry.counter,
            content: entry.content_hash(),
        }
    }
}

/// Decodes a list of digest items, keeping the first [`MAX_DIRECTORY_ENTRIES`].
pub(crate) fn first_items<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<DigestItem>, D::Error> {
    first_of(
        deserializer,
        MAX_DIRECTORY_ENTRIES,
        |_| true,
        "a sequence of directory digest items",
    )
}

/// Decodes a list of node names, keeping the first [`MAX_DIRECTORY_ENTRIES`].
pub(crate) fn first_nodes<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    first_of(
        deserializer,
        MAX_DIRECTORY_ENTRIES,
        |_| true,
        "a sequence of node names",
    )
}

#[cfg(test)]
mod tests;
