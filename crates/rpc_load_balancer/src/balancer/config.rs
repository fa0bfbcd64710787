//! `BalancerConfig`: a balancer's name, algorithm and which nodes are its members.

use std::sync::Arc;
use std::time::Duration;

use super::Child;
use crate::algorithm::Random;
use crate::filter::{self, NodeFilter};
use crate::routing::Algorithm;
use crate::Error;

/// Settings of one balancer on one node. The same name started on many nodes forms one
/// logical balancer; each node that matches `node_match_list` is also a member.
///
/// ```
/// use rpc_load_balancer::{BalancerConfig, RoundRobin};
///
/// let config = BalancerConfig::new("reports")
///     .algorithm(RoundRobin::new())
///     .node_match_list(["worker"]); // only nodes whose name contains "worker" serve
/// assert_eq!(config.name(), "reports");
/// ```
///
/// Regex filters too ([`NodeFilter`]):
///
/// ```
/// use rpc_load_balancer::{BalancerConfig, NodeFilter};
///
/// let config = BalancerConfig::new("feeds")
///     .node_match_list([NodeFilter::regex("^options_feed@")?]); // exactly `options_feed`
/// assert!(config.matches("options_feed@10.0.0.7"));
/// assert!(!config.matches("options_feed_kurt@10.0.0.7"));
/// # Ok::<(), rpc_load_balancer::Error>(())
/// ```
#[derive(Clone)]
pub struct BalancerConfig {
    pub(crate) name: String,
    pub(crate) algorithm: Arc<dyn Algorithm>,
    pub(crate) children: Vec<Child>,
    pub(crate) node_match_list: Option<Vec<NodeFilter>>,
    pub(crate) call_timeout: Option<Duration>,
    pub(crate) leave_grace: Duration,
    pub(crate) drain_timeout: Duration,
    pub(crate) retry: Option<crate::Retry>,
    pub(crate) max_in_flight_per_member: Option<usize>,
    pub(crate) outlier_ejection: Option<crate::OutlierEjection>,
    pub(crate) slow_start: Option<crate::SlowStart>,
    pub(crate) locality: Option<crate::Locality>,
    pub(crate) retry_budget: crate::RetryBudget,
    pub(crate) subsetting: Option<crate::routing::Subsetting>,
    pub(crate) hedge: Option<crate::HedgePolicy>,
}

/// Default [`BalancerConfig::leave_grace`]: 500 ms.
pub const DEFAULT_LEAVE_GRACE: Duration = Duration::from_millis(500);
/// Default [`BalancerConfig::drain_timeout`]: 15 s.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(15);

impl std::fmt::Debug for BalancerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BalancerConfig")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm.name())
            .field("node_match_list", &self.node_match_list)
            .field("call_timeout", &self.call_timeout)
            .field("leave_grace", &self.leave_grace)
            .field("drain_timeout", &self.drain_timeout)
            .field("retry", &self.retry)
            .field("max_in_flight_per_member", &self.max_in_flight_per_member)
            .field("outlier_ejection", &self.outlier_ejection)
            .field("slow_start", &self.slow_start)
            .field("locality", &self.locality)
            .field("retry_budget", &self.retry_budget)
            .field("subsetting", &self.subsetting)
            .field("hedge", &self.hedge)
            .field("children", &self.children)
            .finish()
    }
}

impl BalancerConfig {
    /// A balancer called `name` (its pg group), with [`Random`] selection, every node a
    /// member, the node's `call_timeout`, `leave_grace` 500 ms and `drain_timeout` 15 s.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            algorithm: Arc::new(Random::new()),
            children: Vec::new(),
            node_match_list: None,
            call_timeout: None,
            leave_grace: DEFAULT_LEAVE_GRACE,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            retry: None,
            max_in_flight_per_member: None,
            outlier_ejection: None,
            slow_start: None,
            locality: None,
            retry_budget: crate::RetryBudget::default(),
            subsetting: None,
            hedge: None,
        }
    }

    /// Caps the calls this node may have in flight to any one member through this balancer
    /// (default: no cap). A call whose chosen member is at the cap goes to another member
    /// under it, else fails at once with [`Error::Overloaded`] instead of queueing without
    /// bound behind a slow member. Must be ≥ 1. Casts are not capped.
    pub fn max_in_flight_per_member(mut self, limit: usize) -> Self {
        self.max_in_flight_per_member = Some(limit);
        self
    }

    /// Stops picking members that fail or go silent, whatever the algorithm (default: off):
    /// see [`OutlierEjection`](crate::OutlierEjection) for the rules and their defaults.
    /// The options are checked when the balancer starts ([`Error::InvalidConfig`] naming the
    /// option). Not for [`CallDirect`](crate::CallDirect), which never selects.
    pub fn outlier_ejection(mut self, options: crate::OutlierEjection) -> Self {
        self.outlier_ejection = Some(options);
        self
    }

    /// Ramps a member that joined (or rejoined) up to its full share of the calls over a
    /// window (default: off): see [`SlowStart`](crate::SlowStart) for the rule and its
    /// defaults. The options are checked when the balancer starts ([`Error::InvalidConfig`]
    /// naming the option, or `slow_start` for [`HashRing`](crate::HashRing) and
    /// [`CallDirect`](crate::CallDirect), which it does not apply to). With
    /// [`outlier_ejection`](Self::outlier_ejection) too, ejection looks at slow start's picks.
    pub fn slow_start(mut self, options: crate::SlowStart) -> Self {
        self.slow_start = Some(options);
        self
    }

    /// Sends calls to the members in this node's zone while one of them can take the call, and
    /// to every member otherwise (default: off): see [`Locality`](crate::Locality) for the
    /// rule — which label names the zone (default `zone`), what "can take the call" means,
    /// and how it goes with slow start and ejection. Checked when the balancer starts:
    /// [`Error::InvalidConfig`] naming `locality` for an invalid label key, or with
    /// [`HashRing`](crate::HashRing) or [`CallDirect`](crate::CallDirect). Off, it costs
    /// nothing.
    pub fn locality(mut self, locality: crate::Locality) -> Self {
        self.locality = Some(locality);
        self
    }

    /// The [`locality`](Self::locality) option, if set.
    pub fn locality_options(&self) -> Option<&crate::Locality> {
        self.locality.as_ref()
    }

    /// How this balancer's calls and casts retry while it has no member to send to (default:
    /// the node's [`NodeConfig::retry`](crate::NodeConfig::retry)); a call may set its own.
    pub fn retry(mut self, retry: crate::Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    /// How many calls of idempotent functions this balancer sends again, to another member,
    /// after the connection was lost, the member was unreachable or it pushed back (default:
    /// [`RetryBudget::default`](crate::RetryBudget::default), on: 20 % of calls plus 10 per
    /// second over 10 s, at most 3 retries a call; [`RetryBudget::none`](crate::RetryBudget::none)
    /// turns it off). Calls of functions that are not idempotent are never sent twice. Checked
    /// when the balancer starts ([`Error::InvalidConfig`] naming `retry_budget.ratio` or
    /// `retry_budget.window`). See docs/how-to/retries.md.
    pub fn retry_budget(mut self, budget: crate::RetryBudget) -> Self {
        self.retry_budget = budget;
        self
    }

    /// Hedges this balancer's calls of idempotent functions (default: off): a call still
    /// unanswered after the policy's delay — a set time, or a percentile of the function's
    /// recent latency through this balancer — is sent once more to a member it has not
    /// tried; the first reply wins and the other copy is cancelled, on its member too. A
    /// budget (the policy's share of calls plus a floor per second, both yours to set) caps
    /// the extra copies. Calls of functions that are not idempotent are never sent twice; a
    /// call may turn hedging off ([`BalancedCall::hedge`](crate::BalancedCall::hedge)).
    /// Checked when the balancer starts ([`Error::InvalidConfig`] naming `hedge.delay`,
    /// `hedge.percentile`, `hedge.ratio` or `hedge.window`). See
    /// [`HedgePolicy`](crate::HedgePolicy) and docs/how-to/deadlines-and-overload.md.
    pub fn hedge(mut self, policy: crate::HedgePolicy) -> Self {
        self.hedge = Some(policy);
        self
    }

    /// How long, after leaving the group at [`Balancer::stop`](crate::Balancer::stop), this
    /// member still accepts calls that other nodes selected before they saw it leave
    /// (default 500 ms). Calls arriving later are refused unrun, and their callers send them
    /// to another member.
    pub fn leave_grace(mut self, grace: Duration) -> Self {
        self.leave_grace = grace;
        self
    }

    /// The longest [`Balancer::stop`](crate::Balancer::stop) waits, grace included, for the
    /// calls this node has routed through the balancer and the calls it serves as a member to
    /// finish (default 15 s); then it stops anyway, and callers of calls still running on this
    /// member may get `ConnectionLost` (the call may have run). Zero does not wait.
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// The selection algorithm (default [`Random`]). When the balancer starts, it checks the
    /// algorithm's options and builds the balancer's own selector from it
    /// ([`Algorithm::build`]).
    pub fn algorithm(mut self, algorithm: impl Algorithm) -> Self {
        self.algorithm = Arc::new(algorithm);
        self
    }

    /// The selection algorithm, shared (e.g. to keep a handle on it, or to configure several
    /// balancers with one instance). Each balancer builds its own selector from it, so their
    /// state — a ring, weighted cycle, rotation position — stays apart.
    pub fn algorithm_arc(mut self, algorithm: Arc<dyn Algorithm>) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// Runs `child` beside the balancer (e.g. an actor that feeds a custom selector): the
    /// balancer's supervisor starts it before the LoadBalancer, restarts it alone with a
    /// backoff (100 ms doubling to 5 s) when it fails, and stops it with the balancer. May be
    /// given several times.
    pub fn child(mut self, child: Child) -> Self {
        self.children.push(child);
        self
    }

    /// This node is a member only if its full name matches one of `filters` under the rule of
    /// [`filter::matches`] — strings are substrings (`["worker"]`: names containing
    /// `worker`), [`NodeFilter::regex`] gives a regex (`^worker@`: the node named `worker`) —
    /// with the node's [`excluded_node_patterns`](crate::NodeConfig::excluded_node_patterns)
    /// applied. An empty list makes this node a caller only. Default (no list): every node is
    /// a member, whatever its excluded patterns.
    ///
    /// An empty substring (or an empty regex) is refused when the balancer starts
    /// ([`Error::InvalidConfig`] naming `node_match_list`), although [`filter::matches`] says
    /// it matches every node: leaving `node_match_list` unset already means that, so an empty
    /// entry is almost always an unset variable or a blank config line, and making every node
    /// a member by mistake is the costly outcome.
    pub fn node_match_list<I, S>(mut self, filters: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<NodeFilter>,
    {
        self.node_match_list = Some(filters.into_iter().map(Into::into).collect());
        self
    }

    /// Deterministic subsetting (default off): this node dials, and balances over, only `K`
    /// members of the balancer ([`Subsetting::size`](crate::routing::Subsetting::size)),
    /// chosen by the [scheme](crate::routing::SubsetScheme) (aperture by default) from the
    /// balancer's full member list, this node's index among the balancer's subsetting callers
    /// and the caller count. The lists and the index come from the node directory
    /// ([`NodeConfig::sparse_mesh`](crate::NodeConfig::sparse_mesh)), not from configuration:
    /// a node is in the member list when it is a member (matches `node_match_list`), in the
    /// caller list when it started this balancer with subsetting; both sorted by full name.
    /// The subset is recomputed when either list changes (a member leaves: another is dialled
    /// in its place; with aperture a subset changes by a member or two); the members a call
    /// picks from are the subset's members that are connected (the balancer's pg group
    /// filtered to the subset). Until the directory names a member, the balancer has none.
    /// With `K` or fewer members the subset is every member (not refused: members come and
    /// go); an INFO event says so when the first members are known and each time that flips.
    ///
    /// Refused when the balancer starts ([`Error::InvalidConfig`] naming `subsetting`): with
    /// HashRing (bounded or not) or CallDirect
    /// ([`Subsetting::check`](crate::routing::Subsetting::check): a key's owner must not depend
    /// on the caller's subset), for an [actor group](crate::group), and on a node without
    /// [`sparse_mesh`](crate::NodeConfig::sparse_mesh) (a full mesh dials every member anyway);
    /// a size of 0 names `subset_size`.
    pub fn subsetting(mut self, subsetting: crate::routing::Subsetting) -> Self {
        self.subsetting = Some(subsetting);
        self
    }

    /// The subsetting options, if set ([`subsetting`](Self::subsetting)).
    pub fn subsetting_options(&self) -> Option<&crate::routing::Subsetting> {
        self.subsetting.as_ref()
    }

    /// Timeout of this balancer's calls that don't set their own (default: the node's
    /// `call_timeout`, 10 s); must be > 0.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = Some(timeout);
        self
    }

    /// The balancer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `node_match_list` filters; `None` when unset (every node is a member).
    pub fn node_filters(&self) -> Option<&[NodeFilter]> {
        self.node_match_list.as_deref()
    }

    /// Whether the node named `node` (full name) is a member under `node_match_list`, with no
    /// excluded patterns. Same as [`matches_excluding`](Self::matches_excluding)`(node, &[])`.
    pub fn matches(&self, node: &str) -> bool {
        self.matches_excluding(node, &[])
    }

    /// Whether the node named `node` (full name) whose
    /// [`excluded_node_patterns`](crate::NodeConfig::excluded_node_patterns) are `excluded` is
    /// a member: no `node_match_list` → always (exclusions only narrow filters); otherwise
    /// when [`filter::matches`] holds for one of its filters. An empty list → never.
    ///
    /// ```
    /// use rpc_load_balancer::BalancerConfig;
    ///
    /// let excluded = ["_qa".to_string()];
    /// let workers = BalancerConfig::new("b").node_match_list(["worker"]);
    /// assert!(workers.matches_excluding("worker_1@h", &excluded));
    /// assert!(!workers.matches_excluding("worker_qa@h", &excluded));
    /// let qa = BalancerConfig::new("b").node_match_list(["worker_qa"]);
    /// assert!(qa.matches_excluding("worker_qa@h", &excluded));
    /// assert!(BalancerConfig::new("b").matches_excluding("worker_qa@h", &excluded));
    /// ```
    pub fn matches_excluding(&self, node: &str, excluded: &[String]) -> bool {
        self.matches_labeled(node, None, excluded)
    }

    /// Whether `node_match_list` has a label filter ([`NodeFilter::Label`]).
    pub(crate) fn has_label_filter(&self) -> bool {
        self.node_match_list
            .as_ref()
            .is_some_and(|filters| filters.iter().any(NodeFilter::is_label))
    }

    /// [`matches_excluding`](Self::matches_excluding) for a node whose labels are `labels`
    /// (`None`: not known), so that label filters ([`NodeFilter::label`]) can match: what a
    /// balancer asks of its own node when it starts.
    ///
    /// ```
    /// use rpc_load_balancer::{BalancerConfig, Labels, NodeFilter};
    ///
    /// let canary = BalancerConfig::new("b").node_match_list([NodeFilter::label("version", "2")]);
    /// let v2 = Labels::from_pairs([("version", "2")]);
    /// assert!(canary.matches_labeled("w@h", Some(&v2), &[]));
    /// assert!(!canary.matches_labeled("w@h", Some(&Labels::new()), &[]));
    /// ```
    pub fn matches_labeled(
        &self,
        node: &str,
        labels: Option<&crate::Labels>,
        excluded: &[String],
    ) -> bool {
        match &self.node_match_list {
            None => true,
            Some(filters) => filters
                .iter()
                .any(|f| filter::matches_labeled(node, labels, f, excluded)),
        }
    }

    /// Checks the options; the first bad one is named in the error.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        let invalid = |option, reason: String| Err(Error::InvalidConfig { option, reason });
        let bad_char = self
            .name
            .chars()
            .any(|c| c == '/' || c.is_whitespace() || c.is_control());
        if self.name.is_empty() || self.name.len() > 255 || self.name.starts_with('@') || bad_char {
            return invalid(
                "name",
                format!(
                    "{} must be 1-255 bytes, not start with '@', without '/', whitespace or control characters",
                    shown_name(&self.name)
                ),
            );
        }
        self.validate_options()
    }

    /// Checks the options other than the name (an actor group's too).
    pub(crate) fn validate_options(&self) -> Result<(), Error> {
        let invalid = |option, reason: String| Err(Error::InvalidConfig { option, reason });
        if let Some(filters) = &self.node_match_list {
            for filter in filters {
                if let NodeFilter::Label { key, value } = filter {
                    if let Err(Error::InvalidConfig { reason, .. }) =
                        crate::node::Labels::check(key, value)
                    {
                        return invalid(
                            "node_match_list",
                            format!("the label filter {key}={value} can match no node: {reason}"),
                        );
                    }
                }
            }
            if filters.iter().any(|f| f.as_str().is_empty()) {
                return invalid(
                    "node_match_list",
                    "an empty pattern would match every node (leave node_match_list unset for that)"
                        .into(),
                );
            }
        }
        if self.max_in_flight_per_member == Some(0) {
            return invalid(
                "max_in_flight_per_member",
                "must be at least 1: 0 would refuse every call".into(),
            );
        }
        if self.call_timeout.is_some_and(|t| t.is_zero()) {
            return invalid("call_timeout", "must be greater than 0".into());
        }
        self.retry_budget.validate()?;
        match &self.hedge {
            Some(policy) => policy.validate(),
            None => Ok(()),
        }
    }
}

/// The most characters of a rejected name an error message repeats.
const SHOWN_NAME_CHARS: usize = 64;

/// `name` quoted for an error message: whole up to [`SHOWN_NAME_CHARS`] characters, else its
/// first ones, `…` and its length in bytes (a message stays short whatever was given).
fn shown_name(name: &str) -> String {
    match name.char_indices().nth(SHOWN_NAME_CHARS) {
        None => format!("{name:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &name[..end], name.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_rejected_name_is_shown_cut_short() {
        let long = "x".repeat(10_000);
        let Err(Error::InvalidConfig { option, reason }) = BalancerConfig::new(long).validate()
        else {
            panic!("a 10,000-byte name is accepted");
        };
        assert_eq!(option, "name");
        assert!(reason.len() < 200, "{} bytes: {reason}", reason.len());
        assert!(
            reason.starts_with(&format!("\"{}\"… (10000 bytes)", "x".repeat(64))),
            "{reason}"
        );
        // Characters, not bytes: a cut never splits one.
        let wide = "ü".repeat(300);
        let Err(Error::InvalidConfig { reason, .. }) = BalancerConfig::new(wide).validate() else {
            panic!("a 600-byte name is accepted");
        };
        assert!(
            reason.starts_with(&format!("\"{}\"… (600 bytes)", "ü".repeat(64))),
            "{reason}"
        );
        // A short one is shown whole.
        let Err(Error::InvalidConfig { reason, .. }) = BalancerConfig::new("a/b").validate() else {
            panic!("a/b is accepted");
        };
        assert!(reason.starts_with("\"a/b\" must be"), "{reason}");
    }

    #[test]
    fn matching_and_validation() {
        let all = BalancerConfig::new("b");
        assert!(all.matches("anything@h"));
        let some = BalancerConfig::new("b").node_match_list(["work"]);
        assert!(some.matches("worker_1@h") && !some.matches("api@h"));
        let none = BalancerConfig::new("b").node_match_list(Vec::<String>::new());
        assert!(!none.matches("worker_1@h"));
        assert_eq!(none.node_filters(), Some(&[][..]));
        assert_eq!(all.node_filters(), None);
        assert!(all.validate().is_ok());
        for (config, option) in [
            (BalancerConfig::new(""), "name"),
            (BalancerConfig::new("@endpoints"), "name"),
            (BalancerConfig::new("a/b"), "name"),
            (BalancerConfig::new("a\nb"), "name"),
            (BalancerConfig::new("x".repeat(256)), "name"),
            (
                BalancerConfig::new("b").node_match_list([""]),
                "node_match_list",
            ),
            (
                BalancerConfig::new("b").node_match_list(["w", ""]),
                "node_match_list",
            ),
            (
                BalancerConfig::new("b").node_match_list([NodeFilter::regex("").unwrap()]),
                "node_match_list",
            ),
            (
                BalancerConfig::new("b").call_timeout(Duration::ZERO),
                "call_timeout",
            ),
            (
                BalancerConfig::new("b").retry_budget(crate::RetryBudget::new(
                    1.5e3,
                    10,
                    Duration::from_secs(10),
                )),
                "retry_budget.ratio",
            ),
            (
                BalancerConfig::new("b").retry_budget(crate::RetryBudget::new(
                    0.2,
                    10,
                    Duration::ZERO,
                )),
                "retry_budget.window",
            ),
            (
                BalancerConfig::new("b").hedge(crate::HedgePolicy::after(Duration::ZERO, 0.05, 1)),
                "hedge.delay",
            ),
            (
                BalancerConfig::new("b").hedge(crate::HedgePolicy::at_percentile(95.0, 2.0, 1)),
                "hedge.ratio",
            ),
        ] {
            match config.validate() {
                Err(Error::InvalidConfig { option: named, .. }) => assert_eq!(named, option),
                other => panic!("{option}: {other:?}"),
            }
        }
    }

    #[test]
    fn regex_filters_and_exclusions() {
        let feed = BalancerConfig::new("b").node_match_list([
            NodeFilter::regex("^options_feed@").unwrap(),
            NodeFilter::from("web"),
        ]);
        assert!(feed.validate().is_ok());
        assert!(feed.matches("options_feed@h"));
        assert!(!feed.matches("options_feed_kurt@h"));
        assert!(feed.matches("cfx_web_2@h"), "any filter matching is enough");
        let excluded = ["_qa".to_string()];
        assert!(!feed.matches_excluding("cfx_web_qa@h", &excluded));
        assert!(feed.matches("cfx_web_qa@h"), "matches() excludes nothing");
        assert!(feed.matches_excluding("cfx_web@h_qa", &excluded));
        // Strings, owned or borrowed, still make substring filters.
        let names = vec!["work".to_string()];
        let borrowed = BalancerConfig::new("b").node_match_list(&names);
        assert_eq!(
            borrowed.node_filters(),
            Some(&[NodeFilter::from("work")][..])
        );
        assert!(format!("{feed:?}").contains("Regex(\"^options_feed@\")"));
    }

    #[test]
    fn a_label_filter_no_label_can_satisfy_is_refused_naming_node_match_list() {
        for (key, value) in [("zöne", "x"), ("", ""), ("k", "\u{7}")] {
            let config = crate::BalancerConfig::new("b")
                .node_match_list([crate::NodeFilter::label(key, value)]);
            match config.validate_options() {
                Err(crate::Error::InvalidConfig { option, reason }) => {
                    assert_eq!(option, "node_match_list");
                    assert!(reason.contains("label filter"), "{reason}");
                }
                other => panic!("{key:?}={value:?}: {other:?}"),
            }
        }
        assert!(crate::Labels::check("zone", "eu-1").is_ok());
        assert!(
            crate::Labels::check("zone", &"v".repeat(crate::MAX_LABEL_VALUE_BYTES + 1)).is_err()
        );
    }
}
