//! Deterministic subsetting on real nodes (issue 21): a balancer with
//! [`BalancerConfig::subsetting`] reads its full member list and its caller list from the node
//! directory of the sparse mesh, runs the [`Subsetting`] scheme (pure, `routing::subset`) for
//! its own index, hands the subset's nodes to the node to dial, and balances over the members
//! of its pg group that are in the subset ([`BalancerShared::in_subset`]).
//!
//! Selection stays on the balancer's pg group: the directory only decides whom to dial. A
//! member of the subset that is not connected (yet, or any more) is simply not a member of the
//! snapshot; when it leaves the directory (its session closed while wanted, or it stopped
//! advancing), the subset is recomputed and a replacement dialled.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorCell;

use super::members::Member;
use super::shared::{BalancerShared, Source};
use super::BalancerConfig;
use crate::node::shared::NodeShared;
use crate::routing::Subsetting;
use crate::Error;

/// How often the subset is recomputed besides on a change of the directory's shape (it also
/// notices the balancer stopping then).
const RECHECK: Duration = Duration::from_secs(1);

/// The longest a session to a node that left a subset is kept for calls that may still be in
/// flight to it: a call given a longer timeout of its own than this may lose its session.
const MAX_HOLD: Duration = Duration::from_secs(24 * 60 * 60);

/// The hold of a balancer whose configured call timeout is `configured` and whose calls were
/// given at most `longest_own_ms` of their own: the longer, at most [`MAX_HOLD`].
fn hold_of(configured: Duration, longest_own_ms: u64) -> Duration {
    configured
        .max(Duration::from_millis(longest_own_ms))
        .min(MAX_HOLD)
}

/// Checks `subsetting` for a balancer with `config` started on `node` over `source`.
///
/// Errors: [`Error::InvalidConfig`] naming `subset_size` for a size of 0, `subsetting` for
/// HashRing or CallDirect ([`Subsetting::check`]), an actor group, or a node without
/// [`NodeConfig::sparse_mesh`](crate::NodeConfig::sparse_mesh).
pub(crate) fn check(
    subsetting: &Subsetting,
    config: &BalancerConfig,
    node: &NodeShared,
    source: &Source,
) -> Result<(), Error> {
    subsetting.check(&*config.algorithm)?;
    let refuse = |reason: &str| {
        Err(Error::InvalidConfig {
            option: "subsetting",
            reason: reason.to_string(),
        })
    };
    if !matches!(source, Source::OwnGroup) {
        return refuse("not for actor groups: their members are the group's actors");
    }
    if !node.config.sparse_mesh {
        return refuse(
            "needs the node's sparse_mesh (NodeConfig::sparse_mesh, rpclb node --sparse-mesh): \
             the caller and member lists come from its node directory, and a full mesh dials \
             every member anyway",
        );
    }
    Ok(())
}

/// The nodes of `balancer`'s subset for the node `own`, from the sorted `members` and
/// `callers` lists (`own` counts as a caller even before the directory says so).
fn subset_of(
    subsetting: &Subsetting,
    own: &str,
    members: &[String],
    callers: &[String],
) -> Vec<String> {
    let mut callers = callers.to_vec();
    if let Err(at) = callers.binary_search_by(|c| c.as_str().cmp(own)) {
        callers.insert(at, own.to_string());
    }
    let index = callers.iter().position(|c| c == own).unwrap_or(0);
    subsetting
        .subset(members, index, callers.len())
        .into_iter()
        .map(|i| members[i].clone())
        .collect()
}

impl BalancerShared {
    /// With subsetting: `cells` (the balancer's pg group) kept to the members on the nodes of
    /// this caller's subset (none before the first subset); without, `cells`.
    pub(crate) fn in_subset(&self, mut cells: Vec<ActorCell>) -> Vec<ActorCell> {
        if self.config.subsetting.is_none() {
            return cells;
        }
        let subset = self.subset.load();
        let Some(subset) = subset.as_deref() else {
            return Vec::new();
        };
        cells.retain(|cell| {
            Member::from_cell(&self.name, cell).is_some_and(|m| {
                subset
                    .binary_search_by(|n| n.as_str().cmp(m.node()))
                    .is_ok()
            })
        });
        cells
    }

    /// With subsetting: starts (once) the task that recomputes the subset from the node
    /// directory whenever its shape changes, until the balancer stops; then the node wants
    /// none of its members any more.
    pub(crate) fn watch_subset(self: &Arc<Self>) {
        let Some(subsetting) = self.config.subsetting else {
            return;
        };
        if self.subset_watched.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut shape = self.node.directory.watch();
        let shared = Arc::downgrade(self);
        let (node, name) = (Arc::clone(&self.node), self.name.clone());
        // This start's own wants: a restart under the same name has its own token, which this
        // task's late unwant leaves alone.
        let token = node.wanted.token();
        let (configured, drain_timeout) = (self.configured_hold(), self.config.drain_timeout);
        let longest_own = Arc::clone(&self.longest_call_timeout_ms);
        tokio::spawn(async move {
            // Whether the last subset computed was every member (`None` before any member).
            let mut told = None;
            loop {
                match shared.upgrade() {
                    Some(shared) if !shared.is_stopping() => {
                        let members = shared.update_subset(&subsetting, token);
                        let covers = covers_all(subsetting.size(), members);
                        if covers.is_some() && covers != told {
                            tell_coverage(&shared.name, subsetting.size(), members);
                            told = covers;
                        }
                    }
                    _ => break,
                }
                tokio::select! {
                    changed = shape.changed() => if changed.is_err() { break },
                    () = tokio::time::sleep(RECHECK) => {}
                }
            }
            // Its drain may still have calls in flight to the subset: kept for as long as
            // they can last.
            let hold = hold_of(configured, longest_own.load(Ordering::Relaxed));
            node.wanted.unwant(&name, token, hold.max(drain_timeout));
        });
    }

    /// How long a call of this balancer can last — its call timeout (else the node's), or
    /// the longest a call of it was given of its own ([`note_call_timeout`](Self::note_call_timeout)),
    /// at most [`MAX_HOLD`]: how long the session to a node that left its subset is kept.
    fn call_hold(&self) -> Duration {
        hold_of(
            self.configured_hold(),
            self.longest_call_timeout_ms.load(Ordering::Relaxed),
        )
    }

    /// The balancer's call timeout, else the node's.
    fn configured_hold(&self) -> Duration {
        self.config
            .call_timeout
            .unwrap_or(self.node.config.call_timeout)
    }

    /// Notes that a call of this balancer was given `timeout` of its own (with subsetting
    /// only: others keep no record). One relaxed load per call; a write only when it is the
    /// longest yet.
    pub(crate) fn note_call_timeout(&self, timeout: Duration) {
        if self.config.subsetting.is_none() {
            return;
        }
        let ms = u64::try_from(timeout.min(MAX_HOLD).as_millis()).unwrap_or(u64::MAX);
        if ms > self.longest_call_timeout_ms.load(Ordering::Relaxed) {
            self.longest_call_timeout_ms
                .fetch_max(ms, Ordering::Relaxed);
        }
    }

    /// Recomputes the subset; on a change, hands it to the node to dial (as the wants of
    /// this balancer's start `token`) and re-reads the members. Returns how many members the
    /// subset was drawn from.
    fn update_subset(&self, subsetting: &Subsetting, token: u64) -> usize {
        let directory = &self.node.directory;
        let now = std::time::Instant::now();
        // A member that keeps failing its dials (or was refused) is left out while its
        // backoff runs: the next member on the ring takes its slot.
        let mut members = directory.serving(&self.name);
        members.retain(|m| {
            *m == self.node.name
                || self.node.peers.is_connected(m)
                || !(self.node.wanted.is_shunned(m, now) || self.node.peers.refusal(m).is_some())
        });
        let callers = directory.calling(&self.name);
        let chosen = subset_of(subsetting, &self.node.name, &members, &callers);
        if self.subset.load().as_deref() == Some(&chosen) {
            return members.len();
        }
        tracing::debug!(balancer = %self.name, subset = ?chosen, members = members.len(), callers = callers.len(), "subset changed");
        self.node
            .wanted
            .want(&self.name, token, chosen.clone(), self.call_hold());
        self.subset.store(Some(Arc::new(chosen)));
        self.refresh_unless_stopping();
        members.len()
    }
}

/// Whether a subset of `size` drawn from `members` members is all of them (so subsetting
/// spreads nothing: [`Subsetting::subset`] takes every member when there are at most `size`);
/// `None` while there is no member.
fn covers_all(size: usize, members: usize) -> Option<bool> {
    (members > 0).then_some(members <= size)
}

/// Logs (INFO) whether balancer `name`'s subset of `size` is every one of its `members`
/// members: once when the first members are known, and again each time that flips (members
/// come and go, so it is no error).
fn tell_coverage(name: &str, size: usize, members: usize) {
    if members <= size {
        tracing::info!(
            balancer = %name,
            subset_size = size,
            members,
            "subset_size is at least the member count: the subset is every member"
        );
    } else {
        tracing::info!(
            balancer = %name,
            subset_size = size,
            members,
            "the subset is subset_size of the members"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subset_covers_every_member_when_there_are_at_most_its_size() {
        assert_eq!(covers_all(5, 0), None);
        assert_eq!(covers_all(5, 3), Some(true));
        assert_eq!(covers_all(5, 5), Some(true));
        assert_eq!(covers_all(5, 6), Some(false));
        // What the scheme does, which the log line reports.
        let members: Vec<String> = (0..3).map(|i| format!("m{i}")).collect();
        assert_eq!(Subsetting::new(5).subset(&members, 0, 2), [0, 1, 2]);
    }

    #[test]
    fn a_caller_counts_itself_before_the_directory_names_it() {
        let members: Vec<String> = (0..6).map(|i| format!("m{i}@h")).collect();
        let subsetting = Subsetting::new(2);
        let callers = vec!["a@h".to_string(), "c@h".to_string()];
        // b@h is not listed yet: it takes index 1 of 3 (a, b, c).
        assert_eq!(
            subset_of(&subsetting, "b@h", &members, &callers),
            ["m2@h", "m3@h"]
        );
        // Listed: the same.
        let listed = vec!["a@h".into(), "b@h".into(), "c@h".into()];
        assert_eq!(
            subset_of(&subsetting, "b@h", &members, &listed),
            ["m2@h", "m3@h"]
        );
        assert!(subset_of(&subsetting, "b@h", &[], &listed).is_empty());
    }

    fn node(sparse: bool) -> Arc<NodeShared> {
        let config = crate::NodeConfig::new("me", "127.0.0.1:0").sparse_mesh(sparse);
        Arc::new(NodeShared::new(
            "me@127.0.0.1".into(),
            String::new(),
            Some("127.0.0.1:4100".into()),
            &config,
        ))
    }

    #[tokio::test]
    async fn a_call_given_a_longer_timeout_of_its_own_lengthens_the_hold_of_left_nodes() {
        use crate::balancer::call::options::CallOptions;
        use crate::balancer::call::target::Target;
        let node = node(true);
        let config = BalancerConfig::new("b")
            .subsetting(Subsetting::new(2))
            .call_timeout(Duration::from_secs(2));
        let shared = Arc::new(BalancerShared::new(config, Arc::clone(&node)).unwrap());
        let target = Target::Balancer(Arc::clone(&shared));
        let call = |timeout: Option<Duration>| CallOptions {
            timeout,
            ..CallOptions::default()
        };
        assert_eq!(
            shared.call_hold(),
            Duration::from_secs(2),
            "the configured timeout"
        );
        call(Some(Duration::from_secs(600))).resolve(&node, &target);
        assert_eq!(
            shared.call_hold(),
            Duration::from_secs(600),
            "a call's own, longer"
        );
        call(Some(Duration::from_secs(5))).resolve(&node, &target);
        call(None).resolve(&node, &target);
        assert_eq!(
            shared.call_hold(),
            Duration::from_secs(600),
            "the longest is kept"
        );
        call(Some(Duration::MAX)).resolve(&node, &target);
        assert_eq!(shared.call_hold(), MAX_HOLD, "bounded");

        // Without subsetting nothing is recorded.
        let plain =
            Arc::new(BalancerShared::new(BalancerConfig::new("p"), Arc::clone(&node)).unwrap());
        call(Some(Duration::from_secs(600))).resolve(&node, &Target::Balancer(Arc::clone(&plain)));
        assert_eq!(plain.longest_call_timeout_ms.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn subsetting_is_refused_where_it_cannot_work_naming_the_option() {
        let refused = |config: BalancerConfig, sparse: bool| match BalancerShared::new(
            config,
            node(sparse),
        ) {
            Err(Error::InvalidConfig { option, .. }) => option,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("accepted"),
        };
        let with = |k| BalancerConfig::new("b").subsetting(Subsetting::new(k));
        assert_eq!(refused(with(2), false), "subsetting", "a full mesh");
        assert_eq!(refused(with(0), true), "subset_size");
        let ring = with(2).algorithm(crate::HashRing::new());
        assert_eq!(refused(ring, true), "subsetting");
        assert_eq!(
            refused(with(2).algorithm(crate::CallDirect), true),
            "subsetting"
        );
        let group = BalancerShared::with_source(
            with(2),
            node(true),
            Source::ActorGroup {
                scope: "s".into(),
                group: "g".into(),
            },
        );
        assert!(matches!(
            group,
            Err(Error::InvalidConfig {
                option: "subsetting",
                ..
            })
        ));
        assert!(BalancerShared::new(with(2), node(true)).is_ok());
    }
}
