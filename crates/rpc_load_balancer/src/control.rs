//! Control requests every node answers, whatever functions it serves: liveness, its view of
//! the cluster, counters and its CPU reading. Operators and tests use them through
//! [`Node::control`](crate::Node::control) (and the `rpclb` binary).
//!
//! Both enums only ever grow at the end, so older nodes keep decoding the variants they know.
//! Two requests are test hooks, hidden from these docs: they keep their wire indices in every
//! build, and a node built without the `test-hooks` feature answers them with
//! [`Error::BadRequest`](crate::Error::BadRequest) (docs/reference/wire-compatibility.md).

use serde::{Deserialize, Serialize};

use crate::load::LoadReport;

mod bounded;
mod directory_digest;
mod directory_entry;
mod drain_report;

pub use bounded::{MAX_MEMBERS, MAX_PEERS, MAX_PEER_NAME_BYTES};
pub use directory_digest::DigestItem;
pub use directory_entry::{
    DirectoryEntry, MAX_DIRECTORY_BYTES, MAX_DIRECTORY_ENTRIES, MAX_ENTRY_BALANCERS,
};
pub use drain_report::{DrainOutcome, DrainReport};

/// A control request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ControlRequest {
    /// Liveness: answered with [`ControlReply::Pong`].
    Ping,
    /// The nodes the target is connected to: [`ControlReply::Nodes`].
    Nodes,
    /// The functions the target serves: [`ControlReply::Functions`].
    Functions,
    /// Counters of calls the target serves: [`ControlReply::Stats`].
    Stats,
    /// The address the target has on record for the connected node with this full name:
    /// [`ControlReply::ConnectionOf`]. A joining node uses it to check that its name is not
    /// already taken.
    ConnectionOf(String),
    /// The target's connected peers with the addresses they advertise:
    /// [`ControlReply::Peers`]. Used to complete the mesh.
    Peers,
    /// The members of the named balancer as the target sees them: [`ControlReply::Members`].
    Members(String),
    /// The calls the target's balancer of this name has in flight to each member:
    /// [`ControlReply::InFlight`].
    InFlight(String),
    /// Start a balancer on the target: [`ControlReply::Done`], or a remote error saying why not.
    StartBalancer {
        /// The balancer's name.
        name: String,
        /// A built-in algorithm's name (see [`algorithm::by_name`](crate::algorithm::by_name)).
        algorithm: String,
        /// `node_match_list` substrings; `None` = every node is a member.
        node_match_list: Option<Vec<String>>,
    },
    /// Stop the named balancer on the target (draining, as
    /// [`Balancer::stop`](crate::Balancer::stop)): [`ControlReply::Done`] once stopped. Kept
    /// for older callers: [`ControlRequest::StopBalancerReport`] also says how the drain went.
    StopBalancer(String),
    /// Test hook (hidden from the docs; wire index 10 in every build): kill the named
    /// balancer's LoadBalancer actor on the target, as a crash would (for tests of
    /// supervision): [`ControlReply::Done`]. Admin-gated. A target built without the
    /// `test-hooks` feature answers [`Error::BadRequest`](crate::Error::BadRequest).
    #[doc(hidden)]
    KillLoadBalancer(String),
    /// The target's own CPU reading, with its age now: [`ControlReply::CpuReading`]. Every
    /// node answers it, whatever its balancers' algorithms and whether or not it allows
    /// remote admin; LeastCpu Pollers send it.
    CpuReading,
    /// Every CPU reading the target holds — its own and those its LeastCpu balancers polled —
    /// with their ages now: [`ControlReply::CpuReadings`]. For diagnostics; not admin-gated.
    CpuReadings,
    /// Test hook (hidden from the docs; wire index 13 in every build): make the named LeastCpu
    /// balancer's Poller fail, as a crash would (for tests of its restart):
    /// [`ControlReply::Done`]. Admin-gated; a remote error if no Poller of that balancer runs
    /// on the target. A target built without the `test-hooks` feature answers
    /// [`Error::BadRequest`](crate::Error::BadRequest).
    #[doc(hidden)]
    CrashPoller(String),
    /// The calls routed through the named balancer that the target is serving as a member
    /// now: [`ControlReply::Served`].
    Served(String),
    /// The sender (this full node name) is shutting down after draining: the target neither
    /// treats its going away as a failure nor redials it eagerly. Answered with
    /// [`ControlReply::Done`].
    Leaving(String),
    /// The caller of call `id` gave up on it (its timeout ran out): abort its handler if it
    /// still runs on the target. Answered with [`ControlReply::Done`] either way.
    Cancel(u64),
    /// What the target's LeastCpu balancers route by now: [`ControlReply::CpuSelection`]. For
    /// diagnostics beside [`ControlRequest::CpuReadings`] (which gives the raw readings and
    /// their ages); not admin-gated.
    CpuSelection,
    /// A join notice: the node `node`, advertising `addr` (`host:port`), has come up (started,
    /// or restarted under its name). A node that comes up sends it to one of its peers, which
    /// passes it on to each client node (see
    /// [`NodeConfig::client`](crate::NodeConfig::client)) connected to it, provided `node` is
    /// its peer at `addr`; a client node dials `addr` at once unless it is connected to `node`
    /// (even if `node` said it was leaving a moment ago: it is back). No peer lists a client
    /// node, so without it a client would find the new node only at its next peer-list
    /// refresh. Answered with [`ControlReply::Done`]; not admin-gated.
    Joined {
        /// Full name of the node that came up.
        node: String,
        /// The `host:port` it advertises.
        addr: String,
    },
    /// Stop the named balancer on the target, as [`ControlRequest::StopBalancer`], and answer
    /// with its [`DrainReport`]: [`ControlReply::Stopped`]. Admin-gated; a
    /// remote error ([`Error::UnknownBalancer`](crate::Error::UnknownBalancer)) if no such
    /// balancer runs on the target. A node older than this request answers
    /// [`Error::BadRequest`](crate::Error::BadRequest) and stops nothing: send it
    /// [`ControlRequest::StopBalancer`] then (as `rpclb control stop_balancer` does).
    StopBalancerReport(String),
    /// Test hook (hidden from the docs; wire index 20 in every build): end the parent actor of
    /// the named balancer's actor on the target — `stop(None)`, or a kill when `kill` is set —
    /// as an app's supervisor would that ends without stopping its balancer (for tests of the
    /// drain that follows): [`ControlReply::Done`]. Admin-gated; a remote error if no such
    /// balancer runs on the target or its actor has no parent. A target built without the
    /// `test-hooks` feature answers [`Error::BadRequest`](crate::Error::BadRequest).
    #[doc(hidden)]
    EndBalancerParent {
        /// The balancer's name.
        name: String,
        /// Kill the parent rather than stop it.
        kill: bool,
    },
    /// The target's labels ([`NodeConfig::label`](crate::NodeConfig::label)):
    /// [`ControlReply::Labels`]. Every node asks each peer when its session comes up; not
    /// admin-gated. A node older than labels answers
    /// [`Error::BadRequest`](crate::Error::BadRequest): it has none.
    Labels,
    /// The target's load now, as a reply to a call it served would report it:
    /// [`ControlReply::LoadReport`]. An [actor group](crate::group) whose algorithm reads load
    /// reports ([`Needs::reports`](crate::routing::Needs::reports)) asks each member's node,
    /// since its actors' replies carry none. Not admin-gated. A node older than this request
    /// answers [`Error::BadRequest`](crate::Error::BadRequest).
    LoadReport,
    /// A heartbeat from the sender (this full node name), answered with
    /// [`ControlReply::Pong`]: the target takes it as word that the sender is alive and does
    /// not ping it itself while these keep coming (one heartbeat per pair of nodes per
    /// interval, not two). A node older than it answers
    /// [`Error::BadRequest`](crate::Error::BadRequest), which is an answer all the same.
    Heartbeat(String),
    /// The sender's node directory (its own entry and those it knows; see [`DirectoryEntry`]),
    /// sent by a node in the sparse mesh
    /// ([`NodeConfig::sparse_mesh`](crate::NodeConfig::sparse_mesh)) to a connected peer once
    /// per exchange period. The target merges it into its own and answers with its directory
    /// as it is then: [`ControlReply::Directory`] (a push-pull exchange). Not admin-gated. A
    /// node older than it answers [`Error::BadRequest`](crate::Error::BadRequest), and a node
    /// outside the sparse mesh merges nothing and answers with no entries. The target keeps at
    /// most [`MAX_DIRECTORY_ENTRIES`] entries of it, already while decoding.
    Gossip(#[serde(deserialize_with = "directory_entry::first_entries")] Vec<DirectoryEntry>),
    /// The target's node directory as it is now, unchanged: [`ControlReply::Directory`]. For
    /// diagnostics and tests; not admin-gated.
    Directory,
    /// The sender's node directory in digest form: one [`DigestItem`] per entry it holds, its
    /// own included (Scuttlebutt-style anti-entropy; sent instead of
    /// [`ControlRequest::Gossip`] once per exchange period by a sparse-mesh node). The target
    /// takes each item's counter for the entries it holds alike but older, and answers
    /// [`ControlReply::GossipDelta`]: the entries the sender lacks or holds in another run or
    /// content, beats for those it holds alike but older, and the names whose whole entries
    /// it wants (the sender then sends them: [`ControlRequest::GossipEntries`]). Not
    /// admin-gated. A node older than it answers [`Error::BadRequest`](crate::Error::BadRequest)
    /// (the sender falls back to [`ControlRequest::Gossip`] for that peer); a node outside the
    /// sparse mesh takes nothing and answers an empty delta. The target keeps at most
    /// [`MAX_DIRECTORY_ENTRIES`] items of it, already while decoding.
    GossipDigest(#[serde(deserialize_with = "directory_digest::first_items")] Vec<DigestItem>),
    /// Whole directory entries the target asked for in its [`ControlReply::GossipDelta`]: it
    /// merges them as those of a [`ControlRequest::Gossip`] and answers
    /// [`ControlReply::Done`]. Not admin-gated; a node outside the sparse mesh merges nothing.
    /// The target keeps at most [`MAX_DIRECTORY_ENTRIES`] entries of it, already while
    /// decoding.
    GossipEntries(
        #[serde(deserialize_with = "directory_entry::first_entries")] Vec<DirectoryEntry>,
    ),
}

/// The answer to a [`ControlRequest`]. (Only `PartialEq`: CPU readings carry an `f64`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ControlReply {
    /// The target's full name and wire version.
    Pong {
        /// Full name (`name@host`).
        node: String,
        /// [`WIRE_VERSION`](crate::WIRE_VERSION) of the target.
        wire_version: u16,
    },
    /// Full names of the target's connected peers, sorted (the target itself not included).
    Nodes(Vec<String>),
    /// Names of the functions registered on the target, sorted.
    Functions(Vec<String>),
    /// Calls and casts the target serves.
    Stats {
        /// Calls and casts running now.
        served_in_flight: u64,
        /// Calls and casts started since the node started.
        served_total: u64,
    },
    /// The `host:port` the named node advertised, or `None` if it is not connected.
    ConnectionOf(Option<String>),
    /// Member nodes of the balancer, sorted; `None` if the balancer is not started there. A
    /// receiver keeps the first [`MAX_MEMBERS`] names, already while decoding.
    Members(#[serde(deserialize_with = "bounded::first_members")] Option<Vec<String>>),
    /// The request was carried out.
    Done,
    /// `(full name, host:port)` of each connected peer, sorted by name. A receiver keeps the
    /// first [`MAX_PEERS`] pairs whose name and address are at most [`MAX_PEER_NAME_BYTES`]
    /// bytes each — already while decoding: the others are read one at a time and dropped,
    /// so a long list holds no more memory than that many pairs.
    Peers(#[serde(deserialize_with = "bounded::first_peers")] Vec<(String, String)>),
    /// `(member node, calls in flight to it)` per member, sorted by node; `None` if the
    /// balancer is not started there. Counted only by algorithms that read the counts
    /// (LeastConnections, PowerOfTwo; see
    /// [`Needs::in_flight`](crate::routing::Needs::in_flight)),
    /// all 0 for the others.
    InFlight(Option<Vec<(String, u64)>>),
    /// The target's own CPU reading (% and age in ms at the moment it answered), or `None`
    /// while it has none (its first sample is withheld, or every sample failed so far).
    CpuReading(Option<CpuReading>),
    /// `(node, reading)` for every CPU reading the target holds, sorted by node, each with its
    /// age (ms) at the moment it answered.
    CpuReadings(Vec<(String, CpuReading)>),
    /// Calls the named balancer's member on the target serves now; `None` if the balancer is
    /// not started there.
    Served(Option<u64>),
    /// `(balancer, [(member node, value)])` for each LeastCpu balancer running on the target,
    /// sorted by balancer, its members sorted by node: the value (%) its selection gives each
    /// member at the moment it answered — the member's reading if it is at most that
    /// balancer's `cpu_cache_ttl` old at its source, else
    /// [`NEUTRAL_CPU`](crate::cpu::NEUTRAL_CPU) (50.0: missing or stale). Empty when no
    /// LeastCpu balancer runs there.
    CpuSelection(Vec<(String, Vec<(String, f64)>)>),
    /// How the stop of a balancer went ([`ControlRequest::StopBalancerReport`]).
    Stopped(DrainReport),
    /// The target's labels as `(key, value)` pairs, sorted by key
    /// ([`ControlRequest::Labels`]). A receiver keeps the valid pairs among the first
    /// [`MAX_LABELS`](crate::MAX_LABELS) and drops the rest — already while decoding: the
    /// pairs past the first [`MAX_LABELS`](crate::MAX_LABELS) are read one at a time and
    /// dropped, so a reply of many pairs holds no more memory than 32 of them.
    Labels(#[serde(deserialize_with = "first_label_pairs")] Vec<(String, String)>),
    /// The target's load ([`ControlRequest::LoadReport`]): `in_flight` and `node_in_flight`
    /// both count every call it is serving; `qps`, `eps`, `cpu` and `utilization` as in the
    /// report of a reply it sends now.
    LoadReport(#[serde(with = "crate::load::as_wire")] LoadReport),
    /// The target's node directory ([`ControlRequest::Gossip`], [`ControlRequest::Directory`]):
    /// its own entry first, then the live entries it knows, sorted by node. A receiver keeps
    /// the first [`MAX_DIRECTORY_ENTRIES`], already while decoding.
    Directory(#[serde(deserialize_with = "directory_entry::first_entries")] Vec<DirectoryEntry>),
    /// The answer to a [`ControlRequest::GossipDigest`]: what the target holds newer than the
    /// sender's digest said, and what it wants. A receiver keeps at most
    /// [`MAX_DIRECTORY_ENTRIES`] of each list, already while decoding.
    GossipDelta {
        /// Whole entries: those the sender's digest lacks, or holds in an older run or with
        /// other content (an older [`DirectoryEntry::content_hash`]).
        #[serde(deserialize_with = "directory_entry::first_entries")]
        entries: Vec<DirectoryEntry>,
        /// Newer counters of entries the sender holds alike (same run and content hash).
        #[serde(deserialize_with = "directory_digest::first_items")]
        beats: Vec<DigestItem>,
        /// Nodes whose whole entries the target wants (the sender's digest said newer, in a
        /// run or with content it does not hold): the sender sends them in a
        /// [`ControlRequest::GossipEntries`].
        #[serde(deserialize_with = "directory_digest::first_nodes")]
        wants: Vec<String>,
    },
}

/// How many label pairs a decoded [`ControlReply::Labels`] keeps (the node layer's
/// [`MAX_LABELS`](crate::MAX_LABELS); this layer cannot name it: a test checks they agree).
pub(crate) const LABEL_PAIRS_KEPT: usize = 32;

/// Decodes a sequence of label pairs, keeping the first [`LABEL_PAIRS_KEPT`]: each pair past
/// them is decoded (the format is not self-describing) and dropped at once.
fn first_label_pairs<'de, D>(deserializer: D) -> Result<Vec<(String, String)>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct FirstPairs;
    impl<'de> serde::de::Visitor<'de> for FirstPairs {
        type Value = Vec<(String, String)>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a sequence of (key, value) label pairs")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut kept = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(LABEL_PAIRS_KEPT));
            while let Some(pair) = seq.next_element::<(String, String)>()? {
                if kept.len() < LABEL_PAIRS_KEPT {
                    kept.push(pair);
                }
            }
            Ok(kept)
        }
    }
    deserializer.deserialize_seq(FirstPairs)
}

/// One node's CPU reading as held or reported (utilisation in percent and its age in ms):
/// the type `ControlReply::CpuReading` and `ControlReply::CpuReadings` carry.
pub use crate::load::CpuReading;

#[cfg(test)]
mod tests {
    use super::ControlRequest;

    /// The variant indices of docs/reference/wire-compatibility.md, in every build: the test
    /// hooks (10, 13, 20) are never behind `#[cfg]`, so no later index shifts between nodes built
    /// with and without the `test-hooks` feature.
    #[test]
    fn control_requests_keep_their_wire_indices_test_hooks_included() {
        let name = || "b".to_string();
        let requests = [
            (0, ControlRequest::Ping),
            (1, ControlRequest::Nodes),
            (2, ControlRequest::Functions),
            (3, ControlRequest::Stats),
            (4, ControlRequest::ConnectionOf(name())),
            (5, ControlRequest::Peers),
            (6, ControlRequest::Members(name())),
            (7, ControlRequest::InFlight(name())),
            (
                8,
                ControlRequest::StartBalancer {
                    name: name(),
                    algorithm: name(),
                    node_match_list: None,
                },
            ),
            (9, ControlRequest::StopBalancer(name())),
            (10, ControlRequest::KillLoadBalancer(name())),
            (11, ControlRequest::CpuReading),
            (12, ControlRequest::CpuReadings),
            (13, ControlRequest::CrashPoller(name())),
            (14, ControlRequest::Served(name())),
            (15, ControlRequest::Leaving(name())),
            (16, ControlRequest::Cancel(1)),
            (17, ControlRequest::CpuSelection),
            (
                18,
                ControlRequest::Joined {
                    node: name(),
                    addr: name(),
                },
            ),
            (19, ControlRequest::StopBalancerReport(name())),
            (
                20,
                ControlRequest::EndBalancerParent {
                    name: name(),
                    kill: true,
                },
            ),
            (21, ControlRequest::Labels),
            (22, ControlRequest::LoadReport),
            (23, ControlRequest::Heartbeat(name())),
            (24, ControlRequest::Gossip(Vec::new())),
            (25, ControlRequest::Directory),
            (26, ControlRequest::GossipDigest(Vec::new())),
            (27, ControlRequest::GossipEntries(Vec::new())),
        ];
        for (index, request) in requests {
            let bytes = postcard::to_allocvec(&request).unwrap();
            assert_eq!(bytes[0], index, "{request:?}");
            let back: ControlRequest = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back, request);
        }
    }
}
