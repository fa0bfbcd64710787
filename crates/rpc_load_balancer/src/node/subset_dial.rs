//! Whom a sparse-mesh node keeps sessions to beyond its seeds: the members of its subsetting
//! balancers' subsets, which the balancer layer hands over by name ([`WantedPeers::want`]),
//! dialled at the address the node directory holds for each, redialled while still wanted,
//! and, once no balancer wants them for [`PRUNE_GRACE`], closed (only the sessions this node
//! dialled for a subset: a session a peer dialled is the peer's to keep).
//!
//! A member that cannot be dialled (a wrong advertised address, a refused wire version) is
//! redialled with a backoff doubling from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`]; after
//! [`SHUN_AFTER`] failed dials in a row it is left out of the subset computation
//! ([`WantedPeers::is_shunned`]) until its backoff ends or it connects, so the next member on
//! the ring takes its slot.
//!
//! Not closed either, whatever the grace:
//! - a session to a node that left a balancer's subset (or whose balancer stopped) less than
//!   that balancer's hold ago — its call timeout or the longest a call of it was given of its
//!   own (at most a day), or when it stops the longer of that and its drain timeout: calls
//!   picked before the change may still be in flight to the node, and a call ends by its
//!   timeout. (Neither the node nor every algorithm counts calls in flight by node, so the
//!   bound is by time.)
//! - a session to a peer whose directory entry says it calls, with subsetting, a balancer
//!   this node is a member of: that peer may want this node in its own subset, and would see
//!   the session close as this node going down (dropping it from its directory and its
//!   subset). So nodes that both call and serve keep the sessions they dialled to one another.
//!
//! A dial may answer with a session the peer opened a moment before (simultaneous connect):
//! it is then recorded as dialled here, and may be pruned. That is harmless: a peer dials a
//! node as its seed (which it redials) or for its own subset, and then it calls a balancer
//! this node serves, and such a session is not pruned (above).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ractor::ActorRef;
use ractor_cluster::NodeServerMessage;

use super::connect;
use super::shared::NodeShared;

/// How often the wanted peers are checked (dialled if not connected, closed if no longer
/// wanted), besides right after a change of what is wanted.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// How long a session this node dialled for a subset stays after no balancer wants its peer
/// any more: subsets settle while the directory fills, so a member dropped a moment ago may be
/// wanted again at once.
pub(crate) const PRUNE_GRACE: Duration = Duration::from_secs(2);

/// The wait before redialling a member after its first failed dial; doubled each failure.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// The longest wait between dials of a member that keeps failing.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// After how many failed dials in a row a member is left out of subsets while its backoff
/// runs.
pub(crate) const SHUN_AFTER: u32 = 3;

/// The peers the node's subsetting balancers want, and the sessions dialled for them.
#[derive(Default)]
pub(crate) struct WantedPeers {
    state: Mutex<Wanted>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct Wanted {
    /// By balancer instance (its name and the token of its start, [`WantedPeers::token`]): the
    /// nodes of its subset. Keyed by instance, not name: a balancer restarted under the same
    /// name wants while the old one's task has yet to notice it stopped and unwant.
    by_balancer: HashMap<(String, u64), Vec<String>>,
    /// The last token handed out.
    tokens: u64,
    /// Nodes that left a subset whose calls may still be in flight to them, with until when
    /// their sessions are kept.
    held: HashMap<String, Instant>,
    /// Peers this node dialled for a subset, with when no balancer wanted them any more
    /// (`None` while one does).
    dialled: HashMap<String, Option<Instant>>,
    /// Members whose dials failed: how many times in a row, and when the next may start.
    failures: HashMap<String, (u32, Instant)>,
}

impl WantedPeers {
    fn lock(&self) -> MutexGuard<'_, Wanted> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A token for one start of a balancer, distinct from every other this node handed out:
    /// what [`want`](Self::want) and [`unwant`](Self::unwant) name the instance by.
    pub(crate) fn token(&self) -> u64 {
        let mut state = self.lock();
        state.tokens += 1;
        state.tokens
    }

    /// The subset of `balancer`'s instance `token` is now `nodes` (full names): they are
    /// dialled if not connected. The sessions to the nodes that left its subset are kept for
    /// `hold` at least (its calls to them may still be in flight).
    pub(crate) fn want(&self, balancer: &str, token: u64, nodes: Vec<String>, hold: Duration) {
        let mut state = self.lock();
        let left = state
            .by_balancer
            .insert((balancer.to_string(), token), nodes.clone())
            .unwrap_or_default();
        state.hold(left.into_iter().filter(|n| !nodes.contains(n)), hold);
        drop(state);
        self.changed.notify_one();
    }

    /// `balancer`'s instance `token` wants nobody any more (it stopped); another instance of
    /// the same name keeps its wants. The sessions to its subset are kept for `hold` at least.
    pub(crate) fn unwant(&self, balancer: &str, token: u64, hold: Duration) {
        let mut state = self.lock();
        let left = state
            .by_balancer
            .remove(&(balancer.to_string(), token))
            .unwrap_or_default();
        state.hold(left.into_iter(), hold);
        drop(state);
        self.changed.notify_one();
    }

    /// Whether a balancer of this node wants a session to `node`.
    pub(crate) fn is_wanted(&self, node: &str) -> bool {
        self.lock()
            .by_balancer
            .values()
            .any(|nodes| nodes.iter().any(|n| n == node))
    }

    /// Every wanted node, once.
    fn all(&self) -> HashSet<String> {
        self.lock()
            .by_balancer
            .values()
            .flatten()
            .cloned()
            .collect()
    }

    fn note_dialled(&self, node: &str) {
        let mut state = self.lock();
        state.failures.remove(node);
        state.dialled.insert(node.to_string(), None);
    }

    /// A dial of `node` failed at `now`: the next waits [`FIRST_BACKOFF`] doubled per failure
    /// in a row, at most [`MAX_BACKOFF`].
    fn dial_failed(&self, node: &str, now: Instant) {
        let mut state = self.lock();
        let (failed, next) = state.failures.entry(node.to_string()).or_insert((0, now));
        *failed = failed.saturating_add(1);
        let doublings = (*failed - 1).min(16);
        *next = now + (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF);
    }

    /// Whether `node` may be dialled at `now` (its backoff, if any, has ended).
    fn may_dial(&self, node: &str, now: Instant) -> bool {
        self.lock()
            .failures
            .get(node)
            .is_none_or(|(_, next)| now >= *next)
    }

    /// `node` answered (a session to it is up): its failures are forgotten.
    pub(crate) fn answered(&self, node: &str) {
        self.lock().failures.remove(node);
    }

    /// Whether `node` failed [`SHUN_AFTER`] dials in a row and its backoff runs at `now`: a
    /// subset leaves it out meanwhile.
    pub(crate) fn is_shunned(&self, node: &str, now: Instant) -> bool {
        self.lock()
            .failures
            .get(node)
            .is_some_and(|(failed, next)| *failed >= SHUN_AFTER && now < *next)
    }

    /// The peers dialled for a subset that no balancer has wanted for [`PRUNE_GRACE`] at
    /// `now` (forgotten here: the caller closes their sessions).
    fn to_prune(&self, now: Instant) -> Vec<String> {
        let mut state = self.lock();
        state.held.retain(|_, until| *until > now);
        // Failures of nodes no longer dialled (long past their backoff) are forgotten.
        state
            .failures
            .retain(|_, (_, next)| now < *next + MAX_BACKOFF * 2);
        let wanted: HashSet<String> = state
            .by_balancer
            .values()
            .flatten()
            .chain(state.held.keys())
            .cloned()
            .collect();
        let mut pruned = Vec::new();
        state.dialled.retain(|node, unwanted_since| {
            if wanted.contains(node) {
                *unwanted_since = None;
                return true;
            }
            let since = *unwanted_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= PRUNE_GRACE {
                pruned.push(node.clone());
                return false;
            }
            true
        });
        pruned
    }
}

impl Wanted {
    /// Keeps the sessions to `nodes` for `hold` from now at least.
    fn hold(&mut self, nodes: impl Iterator<Item = String>, hold: Duration) {
        let until = Instant::now() + hold;
        for node in nodes {
            let at = self.held.entry(node).or_insert(until);
            *at = (*at).max(until);
        }
    }
}

/// Keeps the wanted peers connected and closes the sessions dialled for subsets that are no
/// longer wanted, until the node stops.
pub(crate) async fn run(shared: Arc<NodeShared>, server: ActorRef<NodeServerMessage>) {
    while !shared.transport.is_stopped() {
        check(&shared, &server);
        let _ = tokio::time::timeout(CHECK_INTERVAL, shared.wanted.changed.notified()).await;
    }
}

/// One check: dials each wanted node that is neither connected nor being dialled, at its
/// directory address; closes the sessions to peers pruned from the subsets (unless the peer
/// is a seed, or wanted again).
fn check(shared: &Arc<NodeShared>, server: &ActorRef<NodeServerMessage>) {
    for node in shared.wanted.all() {
        if node == shared.name {
            continue;
        }
        if shared.peers.is_connected(&node) {
            shared.wanted.answered(&node);
            continue;
        }
        if !shared.wanted.may_dial(&node, Instant::now()) {
            continue;
        }
        let Some(addr) = shared.directory.addr_of(&node) else {
            continue;
        };
        if shared.peers.refusal(&node).is_some() || !shared.peers.begin_mesh_dial(&node) {
            continue;
        }
        let (shared, server) = (Arc::clone(shared), server.clone());
        tokio::spawn(async move {
            let bound = shared.config.connect_timeout;
            match connect::connect(&shared, &server, &addr, bound).await {
                Ok(name) if name == node => shared.wanted.note_dialled(&node),
                Ok(other) => {
                    shared.wanted.dial_failed(&node, Instant::now());
                    tracing::debug!(%node, %addr, %other, "a subset member's address answered for another node")
                }
                Err(error) => {
                    shared.wanted.dial_failed(&node, Instant::now());
                    tracing::debug!(%node, %addr, %error, "subset dial failed")
                }
            }
            shared.peers.end_mesh_dial(&node);
        });
    }
    for node in shared.wanted.to_prune(Instant::now()) {
        let peers = shared.peers.load();
        let Some(peer) = peers.get(&node) else {
            continue;
        };
        if shared.is_configured(&peer.connection_string)
            || shared.wanted.is_wanted(&node)
            || shared.directory.calls_a_balancer_served_here(&node)
        {
            continue;
        }
        tracing::debug!(%node, "closing a session no subset needs any more");
        peer.session
            .stop(Some("sparse mesh: no subset needs this session".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dialled_peer_is_pruned_only_after_the_grace_unwanted() {
        let wanted = WantedPeers::default();
        let start = Instant::now();
        let b = wanted.token();
        wanted.want("b", b, vec!["m1@h".into(), "m2@h".into()], Duration::ZERO);
        wanted.note_dialled("m1@h");
        wanted.note_dialled("m2@h");
        assert!(wanted.to_prune(start).is_empty());
        wanted.want("b", b, vec!["m2@h".into()], Duration::ZERO);
        assert!(!wanted.is_wanted("m1@h"));
        assert!(wanted.to_prune(start).is_empty(), "within the grace");
        // Wanted again within the grace: its clock restarts.
        wanted.want("b", b, vec!["m1@h".into()], Duration::ZERO);
        assert!(wanted.to_prune(start + PRUNE_GRACE / 2).is_empty());
        wanted.unwant("b", b, Duration::ZERO);
        assert!(wanted.to_prune(start + PRUNE_GRACE).is_empty());
        let mut pruned = wanted.to_prune(start + PRUNE_GRACE * 2);
        pruned.sort();
        assert_eq!(pruned, ["m1@h", "m2@h"]);
        assert!(
            wanted.to_prune(start + PRUNE_GRACE * 3).is_empty(),
            "pruned once"
        );
    }

    #[test]
    fn a_stopped_balancer_unwanting_late_leaves_the_wants_of_its_restart_under_the_same_name() {
        let wanted = WantedPeers::default();
        let old = wanted.token();
        wanted.want("b", old, vec!["m1@h".into()], Duration::ZERO);
        // Restarted under the same name with the same subset; the old task unwants later.
        let new = wanted.token();
        assert_ne!(old, new);
        wanted.want("b", new, vec!["m1@h".into()], Duration::ZERO);
        wanted.unwant("b", old, Duration::ZERO);
        assert!(wanted.is_wanted("m1@h"));
        assert_eq!(wanted.all(), HashSet::from(["m1@h".to_string()]));
        wanted.unwant("b", new, Duration::ZERO);
        assert!(!wanted.is_wanted("m1@h"));
    }

    #[test]
    fn a_node_that_left_a_subset_or_whose_balancer_stopped_is_kept_for_the_hold() {
        let wanted = WantedPeers::default();
        let start = Instant::now();
        let hold = Duration::from_secs(10);
        let b = wanted.token();
        wanted.want("b", b, vec!["m1@h".into(), "m2@h".into()], hold);
        wanted.note_dialled("m1@h");
        wanted.note_dialled("m2@h");
        // m1 leaves the subset (calls to it may be in flight), then the balancer stops (a
        // drain under way).
        wanted.want("b", b, vec!["m2@h".into()], hold);
        wanted.unwant("b", b, hold);
        assert!(!wanted.is_wanted("m1@h") && !wanted.is_wanted("m2@h"));
        assert!(wanted.to_prune(start + PRUNE_GRACE * 2).is_empty());
        assert!(
            wanted.to_prune(start + hold / 2).is_empty(),
            "within the hold"
        );
        let later = Instant::now() + hold;
        assert!(wanted.to_prune(later).is_empty(), "the grace starts now");
        let mut pruned = wanted.to_prune(later + PRUNE_GRACE);
        pruned.sort();
        assert_eq!(pruned, ["m1@h", "m2@h"]);
    }

    #[test]
    fn failed_dials_back_off_doubling_and_a_member_failing_three_is_shunned_until_it_ends() {
        let wanted = WantedPeers::default();
        let t0 = Instant::now();
        assert!(wanted.may_dial("m@h", t0) && !wanted.is_shunned("m@h", t0));
        wanted.dial_failed("m@h", t0);
        assert!(!wanted.may_dial("m@h", t0 + FIRST_BACKOFF / 2));
        assert!(wanted.may_dial("m@h", t0 + FIRST_BACKOFF));
        let t1 = t0 + FIRST_BACKOFF;
        wanted.dial_failed("m@h", t1);
        assert!(!wanted.may_dial("m@h", t1 + FIRST_BACKOFF), "doubled");
        assert!(
            !wanted.is_shunned("m@h", t1),
            "two failures: still a member"
        );
        let t2 = t1 + FIRST_BACKOFF * 2;
        wanted.dial_failed("m@h", t2);
        assert!(wanted.is_shunned("m@h", t2));
        assert!(wanted.may_dial("m@h", t2 + FIRST_BACKOFF * 4));
        assert!(
            !wanted.is_shunned("m@h", t2 + FIRST_BACKOFF * 4),
            "its backoff ended"
        );
        let mut at = t2;
        for _ in 0..20 {
            wanted.dial_failed("m@h", at);
            at += MAX_BACKOFF;
        }
        assert!(
            !wanted.may_dial("m@h", at - MAX_BACKOFF / 2),
            "capped, not past"
        );
        assert!(wanted.may_dial("m@h", at));
        wanted.answered("m@h");
        assert!(wanted.may_dial("m@h", t0) && !wanted.is_shunned("m@h", t0));
    }
}
