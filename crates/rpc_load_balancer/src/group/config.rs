//! [`ActorGroupConfig`]: what an [`ActorGroup`](super::ActorGroup) balances over and how.

use std::sync::Arc;
use std::time::Duration;

use crate::routing::Algorithm;
use crate::{BalancerConfig, Error, NodeFilter};

/// The configuration of an [`ActorGroup`](super::ActorGroup): the pg scope and group of your
/// actors, and the balancing options a [`BalancerConfig`] has where they apply to a group
/// (same defaults, same meaning). Validated by [`ActorGroup::start`](super::ActorGroup::start).
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::group::ActorGroupConfig;
/// use rpc_load_balancer::{LeastConnections, OutlierEjection};
///
/// let config = ActorGroupConfig::new("app", "workers")
///     .algorithm(LeastConnections::new())
///     .node_match_list(["worker"])
///     .max_in_flight_per_member(16)
///     .outlier_ejection(OutlierEjection::default())
///     .call_timeout(Duration::from_secs(2));
/// assert_eq!((config.scope(), config.group()), ("app", "workers"));
/// ```
#[derive(Clone, Debug)]
pub struct ActorGroupConfig {
    scope: String,
    group: String,
    balancer: BalancerConfig,
}

impl ActorGroupConfig {
    /// Balances over the actors of pg group `group` in scope `scope` (both non-empty), with
    /// the defaults of [`BalancerConfig::new`]: Random, no node filter, no cap, no slow start
    /// or ejection, the node's `call_timeout` and `retry`.
    pub fn new(scope: impl Into<String>, group: impl Into<String>) -> Self {
        let (scope, group) = (scope.into(), group.into());
        Self {
            balancer: BalancerConfig::new(format!("{scope}/{group}")),
            scope,
            group,
        }
    }

    /// The selection algorithm (default Random). Every algorithm applies except
    /// `CallDirect` (refused at start: there is no function to run in-process). See
    /// docs/how-to/actor-groups.md for how each behaves over actors.
    pub fn algorithm(mut self, algorithm: impl Algorithm) -> Self {
        self.balancer = self.balancer.algorithm(algorithm);
        self
    }

    /// The selection algorithm, shared.
    pub fn algorithm_arc(mut self, algorithm: Arc<dyn Algorithm>) -> Self {
        self.balancer = self.balancer.algorithm_arc(algorithm);
        self
    }

    /// Only actors on nodes matching one of `filters` are members (as
    /// [`BalancerConfig::node_match_list`]: substrings or regexes of the full node name, or
    /// [label filters](NodeFilter::label) matched against the node's labels — a peer's
    /// actors join once its labels are known; the node's `excluded_node_patterns` apply
    /// too). Default: every node. An empty pattern is
    /// refused at start ([`Error::InvalidConfig`] naming `node_match_list`).
    pub fn node_match_list<I, S>(mut self, filters: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<NodeFilter>,
    {
        self.balancer = self.balancer.node_match_list(filters);
        self
    }

    /// At most `limit` (≥ 1) calls in flight from this node per member (actor); a call whose
    /// pick is at the cap goes to another member, and fails with [`Error::Overloaded`] when
    /// every member is at it (as [`BalancerConfig::max_in_flight_per_member`]).
    pub fn max_in_flight_per_member(mut self, limit: usize) -> Self {
        self.balancer = self.balancer.max_in_flight_per_member(limit);
        self
    }

    /// Outlier ejection over the group's members (see [`BalancerConfig::outlier_ejection`]).
    pub fn outlier_ejection(mut self, options: crate::OutlierEjection) -> Self {
        self.balancer = self.balancer.outlier_ejection(options);
        self
    }

    /// Slow start of new members (see [`BalancerConfig::slow_start`]).
    pub fn slow_start(mut self, options: crate::SlowStart) -> Self {
        self.balancer = self.balancer.slow_start(options);
        self
    }

    /// How long a call waits for a member while the group has none (default: the node's
    /// `retry`), within the call's timeout.
    pub fn retry(mut self, retry: crate::Retry) -> Self {
        self.balancer = self.balancer.retry(retry);
        self
    }

    /// Timeout of the group's calls that don't set their own (default: the node's
    /// `call_timeout`, 10 s); must be > 0.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.balancer = self.balancer.call_timeout(timeout);
        self
    }

    /// The pg scope.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The pg group.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The checked options as a balancer's (named `"{scope}/{group}"`), the scope and the
    /// group.
    ///
    /// Errors: [`Error::InvalidConfig`] naming the option.
    pub(crate) fn into_parts(self) -> Result<(BalancerConfig, String, String), Error> {
        for (option, value) in [("scope", &self.scope), ("group", &self.group)] {
            if value.is_empty() {
                return Err(Error::InvalidConfig {
                    option,
                    reason: "must not be empty".into(),
                });
            }
        }
        let algorithm = self.balancer.algorithm.name();
        if algorithm.contains("call_direct") {
            return Err(Error::InvalidConfig {
                option: "algorithm",
                reason: format!(
                    "{algorithm} runs remote functions on this node; an actor group has none: pick another algorithm"
                ),
            });
        }
        self.balancer.validate_options()?;
        Ok((self.balancer, self.scope, self.group))
    }
}
