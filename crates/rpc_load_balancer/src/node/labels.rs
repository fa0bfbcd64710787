//! Node labels: `key=value` pairs a node carries (its zone, version, role), set in
//! [`NodeConfig::label`](crate::NodeConfig::label) and known to every peer.
//!
//! A node's labels are fixed for its life. When a peer's session comes up, this node asks it
//! for its labels ([`ControlRequest::Labels`]) on a task of its own — never on the
//! ClusterManager — with the node's `connect_timeout` per try, [`TRIES`] tries 200 ms apart;
//! the answer is kept in the peer table until the peer goes down, and every change bumps a
//! watch that balancers with [`Locality`](crate::Locality) re-read their members on. A peer
//! older than labels answers [`Error::BadRequest`]: it has none. A peer whose labels are not
//! known (yet) matches no label filter.
//!
//! Labels are bounded on both sides ([`MAX_LABELS`], [`MAX_LABEL_KEY_BYTES`],
//! [`MAX_LABEL_VALUE_BYTES`]; keys `[A-Za-z0-9._/-]`): a node refuses to start with more, and the
//! labels a peer sends beyond the caps are dropped.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::shared::NodeShared;
use crate::control::{ControlReply, ControlRequest};
use crate::Error;

/// Most labels a node may carry.
pub const MAX_LABELS: usize = 32;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY_BYTES: usize = 64;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE_BYTES: usize = 256;

/// How many times a peer is asked for its labels before it is taken to have none.
pub(crate) const TRIES: usize = 3;

/// The wait between two tries.
const RETRY_WAIT: Duration = Duration::from_millis(200);

/// A node's labels: `key → value`, sorted by key (e.g. `zone → eu-1`, `version → 2`). Cheap to
/// clone (shared).
///
/// A node's own are set in [`NodeConfig::label`](crate::NodeConfig::label) and fixed for its
/// life. When a peer's session comes up, the node asks it for its labels on a task of its own
/// (the node's `connect_timeout` per try, 3 tries 200 ms apart) and keeps them until the peer
/// goes down ([`Node::labels_of`](crate::Node::labels_of)); a peer older than labels has
/// none. Of the labels a peer sends, the valid ones among the first
/// [`MAX_LABELS`] are kept and the rest dropped.
///
/// ```
/// use rpc_load_balancer::Labels;
///
/// let labels = Labels::from_pairs([("zone", "eu-1"), ("version", "2")]);
/// assert_eq!(labels.get("zone"), Some("eu-1"));
/// assert_eq!(labels.get("role"), None);
/// assert_eq!(labels.len(), 2);
/// assert_eq!(labels.to_string(), "version=2,zone=eu-1");
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Labels(Arc<BTreeMap<String, String>>);

impl Labels {
    /// No labels.
    pub fn new() -> Self {
        Self::default()
    }

    /// Labels from `(key, value)` pairs; a later pair replaces an earlier one of the same
    /// key. Not checked here: a node checks its own at start.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self(Arc::new(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ))
    }

    /// The value of label `key`, if the node has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Whether the node has label `key` with exactly `value`.
    pub fn has(&self, key: &str, value: &str) -> bool {
        self.get(key) == Some(value)
    }

    /// The labels, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many labels there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels as the wire carries them: `(key, value)` pairs sorted by key.
    pub(crate) fn to_pairs(&self) -> Vec<(String, String)> {
        self.0.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Labels a peer sent: the valid pairs among the first [`MAX_LABELS`], the rest dropped.
    pub(crate) fn from_peer(pairs: Vec<(String, String)>) -> Self {
        Self(Arc::new(
            pairs
                .into_iter()
                .take(MAX_LABELS)
                .filter(|(k, v)| check_pair(k, v).is_ok())
                .collect(),
        ))
    }

    /// Checks every label: at most [`MAX_LABELS`], each key 1–[`MAX_LABEL_KEY_BYTES`] bytes of
    /// `[A-Za-z0-9._/-]`, each value at most [`MAX_LABEL_VALUE_BYTES`] bytes without control
    /// characters.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `labels`.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.len() > MAX_LABELS {
            return Err(invalid(format!(
                "{} labels: at most {MAX_LABELS}",
                self.len()
            )));
        }
        self.iter().try_for_each(|(k, v)| check_pair(k, v))
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidConfig {
        option: "labels",
        reason,
    }
}

impl Labels {
    /// Checks one label, `key` = `value`, against the rules [`NodeConfig::label`] applies
    /// at start (a key of 1–64 bytes of letters, digits, `.`, `_`, `/`, `-`; a value of at
    /// most 256 bytes without control characters) — for a command line or a config file to
    /// check a label where it is written.
    ///
    /// Errors: [`Error::InvalidConfig`] (`labels`) saying which rule the label breaks.
    ///
    /// [`NodeConfig::label`]: crate::NodeConfig::label
    pub fn check(key: &str, value: &str) -> Result<(), Error> {
        check_pair(key, value)
    }
}

/// Checks one label (see [`Labels::validate`]).
fn check_pair(key: &str, value: &str) -> Result<(), Error> {
    let key_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-');
    if key.is_empty() || key.len() > MAX_LABEL_KEY_BYTES || !key.chars().all(key_ok) {
        let shown: String = key.chars().take(MAX_LABEL_KEY_BYTES).collect();
        return Err(invalid(format!(
            "key {shown:?} must be 1-{MAX_LABEL_KEY_BYTES} bytes of letters, digits, '.', '_', '/', '-'"
        )));
    }
    if value.len() > MAX_LABEL_VALUE_BYTES || value.chars().any(char::is_control) {
        return Err(invalid(format!(
            "the value of {key:?} must be at most {MAX_LABEL_VALUE_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter()).finish()
    }
}

/// `key=value` pairs sorted by key, separated by commas.
impl std::fmt::Display for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (k, v)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

/// Asks the peer `name`, just up, for its labels (see the module docs) and records them while
/// it stays connected.
pub(crate) async fn fetch(shared: Arc<NodeShared>, name: String) {
    for attempt in 0..TRIES {
        if !shared.peers.is_connected(&name) {
            return;
        }
        let answer = crate::call::control(
            &shared.transport,
            &name,
            &ControlRequest::Labels,
            shared.config.connect_timeout,
        )
        .await;
        match answer {
            Ok(ControlReply::Labels(pairs)) => {
                shared.peers.set_labels(&name, Labels::from_peer(pairs));
                return;
            }
            // Older than labels (or answering something else): it has none.
            Ok(_) | Err(Error::BadRequest { .. }) => {
                shared.peers.set_labels(&name, Labels::new());
                return;
            }
            Err(error) => {
                tracing::debug!(node = %name, attempt, %error, "asking a peer for its labels failed");
                tokio::time::sleep(RETRY_WAIT).await;
            }
        }
    }
    tracing::warn!(node = %name, tries = TRIES, "a peer did not tell its labels; it matches no label filter");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_checked_and_a_peer_s_are_capped() {
        assert!(Labels::from_pairs([("zone", "a"), ("k8s.io/x-y_z", "")])
            .validate()
            .is_ok());
        for bad in [
            Labels::from_pairs([("", "a")]),
            Labels::from_pairs([("zone id", "a")]),
            Labels::from_pairs([("z".repeat(MAX_LABEL_KEY_BYTES + 1), "a".to_string())]),
            Labels::from_pairs([("zone", "a".repeat(MAX_LABEL_VALUE_BYTES + 1))]),
            Labels::from_pairs([("zone", "a\nb")]),
            Labels::from_pairs((0..=MAX_LABELS).map(|i| (format!("k{i}"), "v"))),
        ] {
            match bad.validate() {
                Err(Error::InvalidConfig { option, .. }) => assert_eq!(option, "labels"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert!(Labels::from_pairs([(
            "z".repeat(MAX_LABEL_KEY_BYTES),
            "v".repeat(MAX_LABEL_VALUE_BYTES)
        )])
        .validate()
        .is_ok());
        // A hostile peer: too many, and some invalid — the excess and the invalid dropped.
        let sent: Vec<(String, String)> = (0..1_000)
            .map(|i| (format!("k{i:04}"), "v".to_string()))
            .chain([(String::new(), "x".to_string())])
            .collect();
        let kept = Labels::from_peer(sent);
        assert_eq!(kept.len(), MAX_LABELS);
        assert!(kept.validate().is_ok());
        let mixed = Labels::from_peer(vec![
            ("zone".into(), "a".into()),
            ("bad key".into(), "b".into()),
            ("v".into(), "x".repeat(MAX_LABEL_VALUE_BYTES + 1)),
        ]);
        assert_eq!(mixed, Labels::from_pairs([("zone", "a")]));
        assert_eq!(mixed.to_pairs(), [("zone".to_string(), "a".to_string())]);
        assert!(mixed.has("zone", "a") && !mixed.has("zone", "b"));
        assert_eq!(format!("{mixed:?}"), r#"{"zone": "a"}"#);
    }

    #[test]
    fn a_labels_reply_of_many_pairs_is_decoded_keeping_the_first_32_only() {
        assert_eq!(crate::control::LABEL_PAIRS_KEPT, MAX_LABELS);
        let many: Vec<(String, String)> = (0..100_000)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        let bytes = postcard::to_allocvec(&crate::ControlReply::Labels(many.clone())).unwrap();
        let crate::ControlReply::Labels(got) = postcard::from_bytes(&bytes).unwrap() else {
            panic!("not a Labels reply");
        };
        assert_eq!(got, many[..MAX_LABELS]);
        assert!(
            got.capacity() <= MAX_LABELS,
            "held {} pairs",
            got.capacity()
        );
    }
}
