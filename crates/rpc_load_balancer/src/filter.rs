//! Node filters: which nodes a name pattern selects (the original's `NodeFilter`).
//!
//! A [`NodeFilter`] is a substring or a regular expression tested against a node's full name
//! (`name@host`). [`matches()`] adds the node's excluded patterns
//! ([`NodeConfig::excluded_node_patterns`](crate::NodeConfig::excluded_node_patterns)):
//!
//! 1. **Base match**: a substring filter matches a node whose full name *contains* it (not
//!    equality, not a prefix; the empty substring matches every node); a regex filter matches a
//!    node when the regex finds a match anywhere in the full name (anchor it with `^…@` to
//!    name one node).
//! 2. **Exclusions**: a matched node is still rejected when **any** excluded pattern is
//!    contained in the node's **short name** (the text before the first `@`; the host is
//!    ignored) **and is not contained in the filter itself** (for a regex, in its source text).
//!    A filter that names the excluded part asks for those nodes on purpose.
//!
//! The rule table, with excluded patterns `["_qa", "_canary"]`:
//!
//! | node | filter | matches? | why |
//! |---|---|---|---|
//! | `worker@host` | `"worker"` | yes | contains it, no excluded part |
//! | `worker_qa@host` | `"worker"` | no | `_qa` in the short name, not in the filter |
//! | `worker_qa@host` | `"worker_qa"` | yes | the filter names `_qa` itself |
//! | `worker_canary@host` | `"worker"` | no | `_canary` in the short name, not in the filter |
//! | `worker_canary@host` | `"worker_qa"` | no | does not contain `worker_qa` |
//! | `options_feed@host_qa` | `"options_feed"` | yes | `_qa` only in the host part |
//! | any node | `""` | yes, unless excluded | the empty substring is in every name |
//!
//! ```
//! use rpc_load_balancer::filter::{matches, NodeFilter};
//!
//! let excluded = ["_qa".to_string(), "_canary".to_string()];
//! let worker = NodeFilter::from("worker");
//! assert!(matches("worker@host", &worker, &excluded));
//! assert!(!matches("worker_qa@host", &worker, &excluded));
//! assert!(matches("worker_qa@host", &NodeFilter::from("worker_qa"), &excluded));
//! assert!(!matches("worker_canary@host", &worker, &excluded));
//! assert!(!matches("worker_canary@host", &NodeFilter::from("worker_qa"), &excluded));
//! assert!(matches("options_feed@host_qa", &NodeFilter::from("options_feed"), &excluded));
//! assert!(matches("anything@host", &NodeFilter::from(""), &excluded));
//!
//! // A regex is matched against the full name; its source text counts for exclusions.
//! let feed = NodeFilter::regex("^options_feed@")?;
//! assert!(matches("options_feed@host", &feed, &excluded));
//! assert!(!matches("options_feed_kurt@host", &feed, &excluded));
//! let qa_feed = NodeFilter::regex("^options_feed_qa@")?;
//! assert!(matches("options_feed_qa@host", &qa_feed, &excluded));
//! # Ok::<(), rpc_load_balancer::Error>(())
//! ```
//!
//! **Label filters** ([`NodeFilter::label`]) match a node by one of its
//! [labels](crate::NodeConfig::label) instead of its name: `zone=eu-1` matches the nodes
//! whose label `zone` is exactly `eu-1`. [`matches_labeled`] tests them against the node's
//! labels; a node whose labels are not known (a peer this node has not heard from yet)
//! matches no label filter, and [`matches()`], given no labels, never matches one. Excluded
//! patterns apply to a label match too, the filter's text being `key=value`.
//!
//! ```
//! use rpc_load_balancer::filter::{matches_labeled, NodeFilter};
//! use rpc_load_balancer::Labels;
//!
//! let zone_a = NodeFilter::label("zone", "a");
//! let labels = Labels::from_pairs([("zone", "a")]);
//! assert!(matches_labeled("w@h", Some(&labels), &zone_a, &[]));
//! assert!(!matches_labeled("w@h", Some(&Labels::new()), &zone_a, &[]));
//! assert!(!matches_labeled("w@h", None, &zone_a, &[]), "labels not known yet");
//! ```
//!
//! Balancers use filters in [`BalancerConfig::node_match_list`](crate::BalancerConfig::node_match_list)
//! (whether *this* node is a member, against its own labels); random-node calls
//! ([`RandomNodeCall`](crate::RandomNodeCall)) filter the connected peers with them (against
//! each peer's labels as learnt).

use std::borrow::Cow;
use std::fmt;

use crate::{Error, Labels};

/// A pattern selecting nodes by their full name (`name@host`) — a substring or a regex — or by
/// one of their labels. See the [module docs](self) for the rule.
///
/// Strings convert into substring filters (`"worker".into()`); build a regex filter with
/// [`NodeFilter::regex`]. Two filters are equal when they are of the same kind with the same
/// text (for a regex: the same source).
#[derive(Clone)]
pub enum NodeFilter {
    /// Matches a node whose full name contains this text (the empty text: every node).
    Substring(String),
    /// Matches a node whose full name the regex finds a match in (unanchored unless the
    /// pattern anchors itself).
    Regex(regex::Regex),
    /// Matches a node whose label `key` has exactly the value `value` (see
    /// [`NodeFilter::label`]); never a node whose labels are not known.
    Label {
        /// The label's key, e.g. `zone`.
        key: String,
        /// The value it must have, e.g. `eu-1`.
        value: String,
    },
}

impl NodeFilter {
    /// A filter matching the nodes whose full name contains `text`.
    pub fn substring(text: impl Into<String>) -> Self {
        Self::Substring(text.into())
    }

    /// A filter matching the nodes whose full name `pattern` (regex crate syntax) finds a
    /// match in, e.g. `^options_feed@` for the node named `options_feed` on any host.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `node_match_list` if `pattern` does not
    /// compile.
    pub fn regex(pattern: &str) -> Result<Self, Error> {
        regex::Regex::new(pattern)
            .map(Self::Regex)
            .map_err(|e| Error::InvalidConfig {
                option: "node_match_list",
                reason: format!("{pattern:?} is not a valid regex: {e}"),
            })
    }

    /// A filter matching the nodes whose label `key` is exactly `value`, e.g.
    /// `NodeFilter::label("zone", "eu-1")` or `("version", "2")` for canaries. A balancer
    /// refuses an empty key when it starts ([`Error::InvalidConfig`] naming
    /// `node_match_list`).
    pub fn label(key: impl Into<String>, value: impl Into<String>) -> Self {
        Self::Label {
            key: key.into(),
            value: value.into(),
        }
    }

    /// The filter's text: the substring, or the regex's source; for a label filter, its key
    /// (an empty key is refused as an empty substring is). Excluded patterns contained in
    /// [`text`](Self::text) don't exclude (see [`matches()`]).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Substring(text) => text,
            Self::Regex(regex) => regex.as_str(),
            Self::Label { key, .. } => key,
        }
    }

    /// The text excluded patterns are looked for in: [`as_str`](Self::as_str), or `key=value`
    /// for a label filter.
    pub fn text(&self) -> Cow<'_, str> {
        match self {
            Self::Label { key, value } => Cow::Owned(format!("{key}={value}")),
            other => Cow::Borrowed(other.as_str()),
        }
    }

    /// Whether this is a label filter.
    pub fn is_label(&self) -> bool {
        matches!(self, Self::Label { .. })
    }

    /// Whether this is a regex filter.
    pub fn is_regex(&self) -> bool {
        matches!(self, Self::Regex(_))
    }

    /// The base match alone, without exclusions: containment or regex match on `node`, or
    /// the label's value in `labels`.
    fn base_match(&self, node: &str, labels: Option<&Labels>) -> bool {
        match self {
            Self::Substring(text) => node.contains(text.as_str()),
            Self::Regex(regex) => regex.is_match(node),
            Self::Label { key, value } => labels.is_some_and(|l| l.has(key, value)),
        }
    }
}

/// Whether `node` (a full name, `name@host`) is selected by `filter` once `excluded_patterns`
/// are applied: the base match (substring containment, or a regex match on the full name),
/// unless an excluded pattern is contained in the node's short name (before the first `@`)
/// and not in the filter's text. The rule table is in the [module docs](self).
///
/// ```
/// use rpc_load_balancer::filter::{matches, NodeFilter};
///
/// let excluded = ["_qa".to_string()];
/// assert!(matches("options_feed@host", &"options_feed".into(), &excluded));
/// assert!(!matches("options_feed_qa@host", &"options_feed".into(), &excluded));
/// assert!(matches("options_feed_qa@host", &"options_feed_qa".into(), &excluded));
/// ```
///
/// A label filter never matches here (no labels are given): see [`matches_labeled`].
pub fn matches(node: &str, filter: &NodeFilter, excluded_patterns: &[String]) -> bool {
    matches_labeled(node, None, filter, excluded_patterns)
}

/// [`matches()`] for a node whose labels are `labels` (`None`: not known), so that label
/// filters can match: a label filter matches when the node's label `key` is `value`; name
/// filters ignore the labels. Exclusions apply alike (a label filter's text being
/// `key=value`).
pub fn matches_labeled(
    node: &str,
    labels: Option<&Labels>,
    filter: &NodeFilter,
    excluded_patterns: &[String],
) -> bool {
    if !filter.base_match(node, labels) {
        return false;
    }
    let short = node.split_once('@').map_or(node, |(short, _)| short);
    let text = filter.text();
    !excluded_patterns
        .iter()
        .any(|pattern| short.contains(pattern.as_str()) && !text.contains(pattern.as_str()))
}

impl fmt::Debug for NodeFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Substring(text) => f.debug_tuple("Substring").field(text).finish(),
            Self::Regex(regex) => f.debug_tuple("Regex").field(&regex.as_str()).finish(),
            Self::Label { key, value } => f
                .debug_struct("Label")
                .field("key", key)
                .field("value", value)
                .finish(),
        }
    }
}

/// `"worker"` (substring), `/^worker@/` (regex) or `label zone=eu-1`.
impl fmt::Display for NodeFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Substring(text) => write!(f, "{text:?}"),
            Self::Regex(regex) => write!(f, "/{}/", regex.as_str()),
            Self::Label { key, value } => write!(f, "label {key}={value}"),
        }
    }
}

impl PartialEq for NodeFilter {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Label { .. }, _) | (_, Self::Label { .. }) => {
                self.is_label() == other.is_label() && self.text() == other.text()
            }
            _ => self.is_regex() == other.is_regex() && self.as_str() == other.as_str(),
        }
    }
}

impl Eq for NodeFilter {}

impl From<&str> for NodeFilter {
    fn from(text: &str) -> Self {
        Self::Substring(text.to_string())
    }
}

impl From<String> for NodeFilter {
    fn from(text: String) -> Self {
        Self::Substring(text)
    }
}

impl From<&String> for NodeFilter {
    fn from(text: &String) -> Self {
        Self::Substring(text.clone())
    }
}

impl From<Cow<'_, str>> for NodeFilter {
    fn from(text: Cow<'_, str>) -> Self {
        Self::Substring(text.into_owned())
    }
}

impl From<regex::Regex> for NodeFilter {
    fn from(regex: regex::Regex) -> Self {
        Self::Regex(regex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(text: &str) -> NodeFilter {
        NodeFilter::substring(text)
    }

    fn qa() -> Vec<String> {
        vec!["_qa".to_string()]
    }

    /// §11.1 1: substring containment, no exclusions.
    #[test]
    fn substring_matches_by_containment() {
        assert!(matches("options_feed@host", &sub("options_feed"), &[]));
        assert!(matches("options_feed_1@host", &sub("options_feed"), &[]));
        assert!(matches("cfx_web_2@host", &sub("web"), &[]));
        assert!(!matches("cfx_web@host", &sub("options_feed"), &[]));
    }

    /// §11.1 2: an anchored regex.
    #[test]
    fn anchored_regex_matches_one_name() {
        let feed = NodeFilter::regex("^options_feed@").unwrap();
        assert!(matches("options_feed@host", &feed, &[]));
        assert!(!matches("gamma_feed@host", &feed, &[]));
        assert!(!matches("options_feed_kurt@host", &feed, &[]));
    }

    /// §11.1 3: an excluded pattern in the short name rejects.
    #[test]
    fn excluded_pattern_rejects() {
        assert!(!matches(
            "options_feed_qa@host",
            &sub("options_feed"),
            &qa()
        ));
        assert!(!matches(
            "options_feed_qa_1@host",
            &sub("options_feed"),
            &qa()
        ));
    }

    /// §11.1 4: a filter containing the excluded pattern asks for it.
    #[test]
    fn a_filter_naming_the_pattern_matches() {
        assert!(matches(
            "options_feed_qa@host",
            &sub("options_feed_qa"),
            &qa()
        ));
        let regex = NodeFilter::regex("^options_feed_qa@").unwrap();
        assert!(matches("options_feed_qa@host", &regex, &qa()));
    }

    /// §11.1 5: nodes without the pattern still match.
    #[test]
    fn nodes_without_the_pattern_still_match() {
        assert!(matches("options_feed@host", &sub("options_feed"), &qa()));
        assert!(matches("options_feed_1@host", &sub("options_feed"), &qa()));
        let regex = NodeFilter::regex("options_feed").unwrap();
        assert!(matches("options_feed_1@host", &regex, &qa()));
        assert!(!matches("options_feed_qa@host", &regex, &qa()));
    }

    /// §11.1 6: a pattern only in the host part does not exclude.
    #[test]
    fn the_host_part_is_ignored() {
        assert!(matches("options_feed@host_qa", &sub("options_feed"), &qa()));
        // No `@`: the whole text is the short name.
        assert!(!matches("options_feed_qa", &sub("options_feed"), &qa()));
        // Only the first `@` separates.
        assert!(!matches("a_qa@b@c", &sub("a"), &qa()));
        assert!(matches("a@b_qa@c", &sub("a"), &qa()));
    }

    /// §7.3's table, with `["_qa", "_canary"]`.
    #[test]
    fn the_rule_table() {
        let excluded = vec!["_qa".to_string(), "_canary".to_string()];
        assert!(matches("worker@host", &sub("worker"), &excluded));
        assert!(!matches("worker_qa@host", &sub("worker"), &excluded));
        assert!(matches("worker_qa@host", &sub("worker_qa"), &excluded));
        assert!(!matches("worker_canary@host", &sub("worker"), &excluded));
        assert!(!matches("worker_canary@host", &sub("worker_qa"), &excluded));
        assert!(matches(
            "options_feed@host_qa",
            &sub("options_feed"),
            &excluded
        ));
    }

    #[test]
    fn the_empty_substring_matches_every_node() {
        for node in ["a@h", "worker@127.0.0.1", "", "@"] {
            assert!(matches(node, &sub(""), &[]), "{node}");
        }
        assert!(
            !matches("worker_qa@h", &sub(""), &qa()),
            "exclusions still apply"
        );
    }

    #[test]
    fn label_filters_match_known_labels_only_with_exclusions() {
        let zone_a = NodeFilter::label("zone", "a");
        let a = Labels::from_pairs([("zone", "a"), ("version", "2")]);
        let b = Labels::from_pairs([("zone", "b")]);
        assert!(matches_labeled("w@h", Some(&a), &zone_a, &[]));
        assert!(!matches_labeled("w@h", Some(&b), &zone_a, &[]));
        assert!(!matches_labeled("w@h", None, &zone_a, &[]), "not known yet");
        assert!(!matches("w@h", &zone_a, &[]), "matches() has no labels");
        assert!(!matches_labeled("zone@h", Some(&b), &sub("zone=a"), &[]));
        // Name filters ignore labels.
        assert!(matches_labeled("w@h", None, &sub("w"), &[]));
        // Exclusions: the filter's text is `key=value`.
        assert!(!matches_labeled("w_qa@h", Some(&a), &zone_a, &qa()));
        let qa_zone = NodeFilter::label("zone_qa", "a");
        let qa_labels = Labels::from_pairs([("zone_qa", "a")]);
        assert!(matches_labeled("w_qa@h", Some(&qa_labels), &qa_zone, &qa()));
        assert_eq!(zone_a.text(), "zone=a");
        assert_eq!(zone_a.as_str(), "zone");
        assert_eq!(zone_a.to_string(), "label zone=a");
        assert_eq!(zone_a, NodeFilter::label("zone", "a"));
        assert_ne!(zone_a, NodeFilter::label("zone", "b"));
        assert_ne!(zone_a, sub("zone=a"));
        assert!(zone_a.is_label() && !zone_a.is_regex());
        assert_eq!(
            format!("{zone_a:?}"),
            r#"Label { key: "zone", value: "a" }"#
        );
    }

    #[test]
    fn conversions_errors_and_equality() {
        assert_eq!(NodeFilter::from("w"), NodeFilter::Substring("w".into()));
        assert_eq!(NodeFilter::from(String::from("w")), sub("w"));
        assert_eq!(NodeFilter::from(&String::from("w")), sub("w"));
        assert_eq!(NodeFilter::from(Cow::Borrowed("w")), sub("w"));
        let regex = NodeFilter::regex("^w@").unwrap();
        assert_eq!(regex, NodeFilter::from(regex::Regex::new("^w@").unwrap()));
        assert_ne!(regex, sub("^w@"), "same text, other kind");
        assert!(regex.is_regex() && !sub("w").is_regex());
        assert_eq!(regex.as_str(), "^w@");
        assert_eq!(regex.to_string(), "/^w@/");
        assert_eq!(sub("w").to_string(), "\"w\"");
        assert_eq!(format!("{regex:?}"), "Regex(\"^w@\")");
        match NodeFilter::regex("(unclosed") {
            Err(Error::InvalidConfig { option, reason }) => {
                assert_eq!(option, "node_match_list");
                assert!(reason.contains("(unclosed"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
