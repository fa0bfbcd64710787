//! [`Locality`]: a balancer option that sends calls to the members in this node's zone while
//! one of them can take the call, and to every member otherwise — cheaper and faster calls
//! within a zone, without giving up the other zones when the local ones are gone or full
//! (Envoy's [zone aware routing](https://www.envoyproxy.io/docs/envoy/latest/intro/arch_overview/upstream/load_balancing/zone_aware)
//! in its simplest form, all-or-nothing rather than proportional).
//!
//! The rule is on [`Locality`].

mod selector;

use std::sync::Arc;

use super::{Algorithm, BuildContext, Needs, Selector};
use crate::Error;

use selector::Preferring;

/// Locality's options: which label names the zone (default `zone`), given to
/// [`BalancerConfig::locality`](crate::BalancerConfig::locality).
///
/// A member is **preferred** when its node's label [`key`](Locality::key) (default `zone`) has
/// the value this node's has ([`NodeConfig::label`](crate::NodeConfig::label));
/// [`MemberView::is_preferred`](super::MemberView::is_preferred) says so. It is worked out
/// when the balancer builds a member list, and again when a peer's labels become known. A
/// node without the label prefers no member (every pick goes to every member), and a peer
/// whose labels are not known yet is not preferred.
///
/// A pick goes to the preferred members while at least one of them **can take the call**: it
/// is in the list, and — when the balancer caps calls per member
/// ([`max_in_flight_per_member`](crate::BalancerConfig::max_in_flight_per_member)) — under the
/// cap. Otherwise it goes to every member. Either way the balancer's algorithm chooses: its
/// selector is built twice, one over the preferred members and one over all, each with its
/// own state (a round-robin position, a weighted cycle) and each told of every outcome and
/// release. The preferred sublist is derived once per member list
/// ([`Selector::derive`](super::Selector::derive)), so a pick allocates nothing; it costs a
/// type check and, with a cap, a look at each preferred member's calls in flight. Without the
/// option there is no wrapper: no cost at all.
///
/// With the other options:
///
/// | option | with locality |
/// |---|---|
/// | [`SlowStart`](super::SlowStart) | wraps locality: a ramping preferred member is skipped or costs more within the preferred members, as it would among all |
/// | [`OutlierEjection`](super::OutlierEjection) | wraps locality: a pick of an ejected preferred member is redrawn from locality's selector (twice, so mostly another preferred member), then a member that is in is taken at random, from any zone. An ejected member still counts as able to take the call. |
/// | `max_in_flight_per_member` | a preferred member at the cap cannot take the call; when all are, picks go to every member |
/// | [`HashRing`](crate::HashRing), [`CallDirect`](crate::CallDirect) | refused ([`Error::InvalidConfig`] naming `locality`): a key's owner would change with the zone of the caller and with the load of the zone |
///
/// Replica selection ([`Selector::pick_many`](super::Selector::pick_many)) is over every
/// member.
///
/// ```
/// use rpc_load_balancer::{BalancerConfig, Locality, RoundRobin};
///
/// let config = BalancerConfig::new("jobs")
///     .algorithm(RoundRobin::new())
///     .locality(Locality::zone());
/// assert_eq!(config.locality_options().map(Locality::key), Some("zone"));
/// assert_eq!(Locality::label("rack").key(), "rack");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Locality {
    key: String,
}

impl Default for Locality {
    fn default() -> Self {
        Self::zone()
    }
}

impl Locality {
    /// Prefers the members whose `zone` label is this node's.
    pub fn zone() -> Self {
        Self::label("zone")
    }

    /// Prefers the members whose label `key` is this node's (e.g. `rack`, `region`).
    pub fn label(key: impl Into<String>) -> Self {
        Self { key: key.into() }
    }

    /// The label that names the zone.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Checks the options and that `algorithm` can be narrowed to a zone: not
    /// [`HashRing`](crate::HashRing) nor [`CallDirect`](crate::CallDirect).
    ///
    /// Errors: [`Error::InvalidConfig`] naming `locality`.
    pub(crate) fn check(&self, algorithm: &dyn Algorithm) -> Result<(), Error> {
        let invalid = |reason: String| {
            Err(Error::InvalidConfig {
                option: "locality",
                reason,
            })
        };
        // A label key's rule (`NodeConfig::label`): 1-64 bytes of `[A-Za-z0-9._/-]`.
        let key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-');
        if self.key.is_empty() || self.key.len() > 64 || !self.key.chars().all(key_char) {
            return invalid(format!("{:?} is not a valid label key", self.key));
        }
        let base = algorithm.name().split('+').next().unwrap_or_default();
        if algorithm.is_local() || matches!(base, "hash_ring" | "hash_ring_bounded" | "call_direct")
        {
            return invalid(format!(
                "not for {}: a key's owner must not depend on the caller's zone",
                algorithm.name()
            ));
        }
        Ok(())
    }

    /// `algorithm` narrowed to the preferred members while one of them has room under `cap`
    /// (the balancer's `max_in_flight_per_member`). Its name is the algorithm's with
    /// `+locality`.
    pub(crate) fn wrap(
        &self,
        algorithm: Arc<dyn Algorithm>,
        cap: Option<usize>,
    ) -> Arc<dyn Algorithm> {
        let name = super::names::intern(&format!("{}+locality", algorithm.name()));
        Arc::new(WithLocality {
            inner: algorithm,
            cap,
            name,
        })
    }
}

/// An algorithm whose selectors prefer the members in this node's zone.
struct WithLocality {
    inner: Arc<dyn Algorithm>,
    cap: Option<usize>,
    name: &'static str,
}

impl Algorithm for WithLocality {
    fn name(&self) -> &'static str {
        self.name
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        let all = self.inner.build(context)?;
        let preferred = self.inner.build(context)?;
        Ok(Box::new(Preferring::new(all, preferred, self.cap)))
    }

    fn needs(&self) -> Needs {
        self.inner.needs()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}
