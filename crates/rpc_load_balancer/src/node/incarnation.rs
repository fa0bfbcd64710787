//! A node's incarnation: a random 64-bit number drawn when the node starts, so that a peer
//! restarted under the same name and address is told apart from the process it replaces.
//!
//! ractor_cluster's handshake carries a node's name and address, nothing that changes when
//! the process restarts. So each node publishes its incarnation as the name of a pg group
//! (16 hex digits) that its rpc endpoint joins, in a scope of its own
//! ([`INCARNATION_SCOPE`]: nothing else reads it, and a node older than this publishes none).
//! ractor_cluster syncs a peer's pg groups before its session is ready, so the incarnation
//! of a new session's peer is known at its ready event without a round trip: the remote
//! endpoint in the incarnation group carries the session's number in its actor id
//! (`ActorId::Remote { node_id, .. }`).
//!
//! The ClusterManager (`cluster/sessions.rs`) keeps each connected peer's incarnation, and
//! a ready session whose peer has another one is that peer restarted: `Down`, then `Up`.

use ractor::pg;
use ractor::ActorCell;

/// The pg scope of the incarnation groups (see the module docs).
pub(crate) const INCARNATION_SCOPE: &str = "rpc_load_balancer/@incarnations";

/// A new incarnation: random, never 0.
pub(crate) fn draw() -> u64 {
    rand::random::<u64>().max(1)
}

/// Publishes `incarnation` for this node: its `endpoint` joins the incarnation's group.
pub(crate) fn publish(endpoint: &ActorCell, incarnation: u64) {
    pg::join_scoped(
        INCARNATION_SCOPE.to_string(),
        group_of(incarnation),
        vec![endpoint.clone()],
    );
}

/// The group name of `incarnation`: 16 hex digits.
fn group_of(incarnation: u64) -> String {
    format!("{incarnation:016x}")
}

/// The incarnation the peer of session number `node_id` published, if it did (a node older
/// than incarnations does not). Reads the incarnation groups: one per connected peer.
pub(crate) fn of_session(node_id: u64) -> Option<u64> {
    let scope = INCARNATION_SCOPE.to_string();
    pg::which_scoped_groups(&scope)
        .into_iter()
        .find(|group| {
            pg::get_scoped_members(&scope, group).iter().any(|cell| {
                let id = cell.get_id();
                !id.is_local() && id.node() == node_id
            })
        })
        .and_then(|group| parse(&group))
}

/// The incarnation a group name stands for, if it is one (16 hex digits, not 0).
fn parse(group: &str) -> Option<u64> {
    if group.len() != 16 {
        return None;
    }
    u64::from_str_radix(group, 16).ok().filter(|i| *i != 0)
}

/// Whether the peer `recorded` as one incarnation and now showing `seen` is another process:
/// both are known and differ (an older peer publishes none; it is then told by address
/// alone).
pub(crate) fn differs(recorded: Option<u64>, seen: Option<u64>) -> bool {
    matches!((recorded, seen), (Some(a), Some(b)) if a != b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incarnation_round_trips_through_its_group_name() {
        for incarnation in [1, 0xdead_beef, u64::MAX, draw()] {
            assert_eq!(parse(&group_of(incarnation)), Some(incarnation));
        }
        assert_eq!(parse("0000000000000000"), None, "never 0");
        assert_eq!(parse("@endpoints"), None);
        assert_eq!(parse("xyz0000000000000"), None);
    }

    #[test]
    fn only_two_known_and_different_incarnations_make_another_process() {
        assert!(differs(Some(1), Some(2)));
        assert!(!differs(Some(1), Some(1)));
        assert!(!differs(None, Some(2)), "an older peer: told by address");
        assert!(!differs(Some(1), None));
    }
}
