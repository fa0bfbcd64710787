//! The node directory's wire form: what one node says of itself in the directory exchange of
//! sparse-mesh nodes ([`ControlRequest::Gossip`](super::ControlRequest::Gossip)), and how a
//! receiver bounds what it decodes.

use serde::{Deserialize, Serialize};

use super::bounded::first_of;

/// How many entries a decoded directory keeps (the first ones; the rest are read one at a
/// time and dropped, so a reply of many entries holds no more memory than this many).
pub const MAX_DIRECTORY_ENTRIES: usize = 1_024;

/// How many balancer names a decoded entry keeps in each of its two lists (the first ones).
pub const MAX_ENTRY_BALANCERS: usize = 32;

/// How many bytes a node's held directory may take encoded (its own entry included; bytes as
/// counted by [`DirectoryEntry::encoded_bound`], an upper bound of the wire encoding): 1 MiB.
/// [`MAX_DIRECTORY_ENTRIES`] entries of the longest names would take about 17 MB, over the
/// 16 MiB frame of a node session, and a reply that large would end the session; so a node
/// takes no new or grown entry that would bring its directory past this budget (about 10,000
/// entries of ordinary size fit, so the entry cap binds first in practice).
pub const MAX_DIRECTORY_BYTES: usize = 1 << 20;

/// Bytes [`DirectoryEntry::encoded_bound`] counts for an entry besides its strings: a length
/// prefix for each of its two names (at most 3 bytes each for names of up to 64 KiB), two
/// `u64` varints (at most 10 bytes each) and two list lengths (at most 5 bytes each).
const ENTRY_OVERHEAD_BYTES: usize = 3 + 3 + 10 + 10 + 5 + 5;

/// Bytes counted per balancer name besides its own: its length prefix (at most 3 bytes).
const NAME_OVERHEAD_BYTES: usize = 3;

/// One node's entry in the node directory (issue 21: deterministic subsetting on real nodes):
/// who it is, where to dial it, which balancers it is a member of and which it calls with
/// subsetting, and its heartbeat counter. Nodes in the sparse mesh
/// ([`NodeConfig::sparse_mesh`](crate::NodeConfig::sparse_mesh)) exchange their entries with
/// their connected peers and merge them by `(incarnation, counter)`: the larger pair is the
/// newer word of that node. An entry whose counter stops advancing is dropped after a TTL
/// (gossip failure detection, after van Renesse, Minsky and Hayden, "A Gossip-Style Failure
/// Detection Service", Middleware 1998).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryEntry {
    /// The node's full name (`name@host`).
    pub node: String,
    /// The `host:port` it advertises (where to dial it).
    pub addr: String,
    /// Set once per run of the node (ms since the Unix epoch at its start): a restarted node's
    /// word is newer than anything its previous run said.
    pub incarnation: u64,
    /// Bumped by the node once per exchange period while it runs.
    pub counter: u64,
    /// The balancers this node is a member of (matches their `node_match_list`), sorted; a
    /// receiver keeps the first [`MAX_ENTRY_BALANCERS`].
    #[serde(deserialize_with = "first_names")]
    pub serves: Vec<String>,
    /// The balancers this node calls with subsetting, sorted; a receiver keeps the first
    /// [`MAX_ENTRY_BALANCERS`].
    #[serde(deserialize_with = "first_names")]
    pub calls: Vec<String>,
}

impl DirectoryEntry {
    /// An upper bound of the entry's encoded size in bytes (the wire's varint-prefixed
    /// encoding): its strings' lengths plus fixed per-entry and per-name overheads. What
    /// [`MAX_DIRECTORY_BYTES`] counts.
    pub fn encoded_bound(&self) -> usize {
        let names: usize = self
            .serves
            .iter()
            .chain(&self.calls)
            .map(|b| b.len() + NAME_OVERHEAD_BYTES)
            .sum();
        self.node.len() + self.addr.len() + ENTRY_OVERHEAD_BYTES + names
    }

    /// A hash of what the entry says besides its node, run and counter — its address and
    /// its two balancer lists — that every node computes alike (64-bit FNV-1a over each
    /// string's length as 8 little-endian bytes and then its bytes: `addr`, the number of
    /// `serves` names and each, the number of `calls` names and each). Two nodes holding the
    /// same node's entry in the same run with the same hash hold the same entry but for the
    /// counter ([`DigestItem`](super::DigestItem)).
    pub fn content_hash(&self) -> u64 {
        let mut hash = Fnv1a::default();
        hash.str(&self.addr);
        for list in [&self.serves, &self.calls] {
            hash.bytes(&(list.len() as u64).to_le_bytes());
            for name in list {
                hash.str(name);
            }
        }
        hash.0
    }
}

/// 64-bit FNV-1a (Fowler, Noll and Vo): a fixed function, the same on every platform and
/// build.
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn str(&mut self, s: &str) {
        self.bytes(&(s.len() as u64).to_le_bytes());
        self.bytes(s.as_bytes());
    }
}

/// Decodes a list of balancer names, keeping the first [`MAX_ENTRY_BALANCERS`].
fn first_names<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    first_of(
        deserializer,
        MAX_ENTRY_BALANCERS,
        |_| true,
        "a sequence of balancer names",
    )
}

/// Decodes a list of directory entries, keeping the first [`MAX_DIRECTORY_ENTRIES`].
pub(crate) fn first_entries<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<DirectoryEntry>, D::Error> {
    first_of(
        deserializer,
        MAX_DIRECTORY_ENTRIES,
        |_| true,
        "a sequence of directory entries",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{ControlReply, ControlRequest};

    fn entry(i: usize, balancers: usize) -> DirectoryEntry {
        DirectoryEntry {
            node: format!("n{i}@h"),
            addr: format!("h:{i}"),
            incarnation: 1,
            counter: i as u64,
            serves: (0..balancers).map(|b| format!("b{b}")).collect(),
            calls: vec!["c".into()],
        }
    }

    #[test]
    fn a_decoded_directory_keeps_the_first_entries_and_balancer_names() {
        let many: Vec<DirectoryEntry> = (0..MAX_DIRECTORY_ENTRIES + 50)
            .map(|i| entry(i, 40))
            .collect();
        let bytes = postcard::to_allocvec(&ControlReply::Directory(many)).unwrap();
        let ControlReply::Directory(back) = postcard::from_bytes(&bytes).unwrap() else {
            panic!("not a directory");
        };
        assert_eq!(back.len(), MAX_DIRECTORY_ENTRIES);
        assert_eq!(back[0].serves.len(), MAX_ENTRY_BALANCERS);
        assert_eq!(back[0].serves[31], "b31");
        assert_eq!(back[MAX_DIRECTORY_ENTRIES - 1].node, "n1023@h");
        let request = ControlRequest::Gossip(vec![entry(7, 2)]);
        let bytes = postcard::to_allocvec(&request).unwrap();
        assert_eq!(
            postcard::from_bytes::<ControlRequest>(&bytes).unwrap(),
            request
        );
    }

    #[test]
    fn the_encoded_bound_is_never_below_the_wire_size() {
        let long = "x".repeat(300);
        let mut big = entry(u32::MAX as usize, MAX_ENTRY_BALANCERS);
        big.node = long.clone();
        big.incarnation = u64::MAX;
        big.counter = u64::MAX;
        big.calls = vec![long; MAX_ENTRY_BALANCERS];
        for e in [entry(0, 0), entry(5, 3), big] {
            let wire = postcard::to_allocvec(&e).unwrap().len();
            assert!(e.encoded_bound() >= wire, "{} < {wire}", e.encoded_bound());
        }
    }

    #[test]
    fn a_directory_claiming_more_entries_than_its_bytes_hold_fails_to_decode() {
        // Variant 16 (Directory), then a length of 2^32 entries, then nothing.
        let bytes = [16u8, 0x80, 0x80, 0x80, 0x80, 0x10];
        assert!(postcard::from_bytes::<ControlReply>(&bytes).is_err());
    }
}
