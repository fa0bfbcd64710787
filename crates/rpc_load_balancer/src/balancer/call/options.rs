//! The options of a call or cast, one type for every builder ([`CallOptions`]), and how they
//! resolve against the balancer's and the node's defaults.

use std::sync::Arc;
use std::time::Duration;

use super::target::Target;
use crate::balancer::shared::BalancerShared;
use crate::node::shared::NodeShared;
use crate::Retry;

/// What a caller may set on a call or cast; `None` takes the default. Every builder
/// (`Call`, `BalancedCall`, `BalancedCast`, `RandomNodeCall`, `RandomNodeCast`) holds one and
/// sets it through its own setters; the pipeline reads only the options its target uses.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallOptions {
    /// How long the call (waiting included) may take; default: the balancer's (routed), else
    /// the node's `call_timeout`.
    pub(crate) timeout: Option<Duration>,
    /// How long to wait while there is nobody to send to; default: the balancer's (routed),
    /// else the node's `retry`.
    pub(crate) retry: Option<Retry>,
    /// Run on this node whatever the algorithm or filter; default: the node's
    /// `call_directly` (routed and random-node calls only).
    pub(crate) call_directly: Option<bool>,
    /// The routing key (routed calls only).
    pub(crate) key: Option<Vec<u8>>,
    /// The balancer that counts a random-node call in its in-flight total.
    pub(crate) load_balancer: Option<String>,
    /// Whether the call may run twice; default: its function's
    /// [`RemoteFunction::IDEMPOTENT`](crate::RemoteFunction::IDEMPOTENT) (routed calls only).
    pub(crate) idempotent: Option<bool>,
    /// Whether the call may be hedged; default: as its balancer's
    /// [`HedgePolicy`](crate::HedgePolicy) says (routed idempotent calls only).
    pub(crate) hedge: Option<bool>,
}

/// The options of one call resolved for its target.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    pub(crate) timeout: Duration,
    pub(crate) retry: Retry,
    pub(crate) directly: bool,
}

impl CallOptions {
    /// The options for a call to `target` from `node`: the call's own, else the routing
    /// balancer's, else the node's.
    pub(crate) fn resolve(&self, node: &NodeShared, target: &Target) -> Resolved {
        let balancer: Option<&Arc<BalancerShared>> = match target {
            Target::Balancer(shared) => Some(shared),
            Target::Node(_) | Target::RandomNode(_) => None,
        };
        let config = balancer.map(|b| &b.config);
        if let (Some(own), Some(balancer)) = (self.timeout, balancer) {
            balancer.note_call_timeout(own);
        }
        Resolved {
            timeout: self
                .timeout
                .or(config.and_then(|c| c.call_timeout))
                .unwrap_or(node.config.call_timeout),
            retry: self
                .retry
                .or(config.and_then(|c| c.retry))
                .unwrap_or(node.config.retry),
            directly: self.call_directly.unwrap_or(node.config.call_directly),
        }
    }
}

/// Defines a builder's option setters over the [`CallOptions`] of its field `holder` (a
/// struct with an `options` field): `option_setters! { holder; … }`, then for each setter its
/// doc comment and `fn name(argument: Type) => field = value;`, which sets `field` to
/// `Some(value)` and returns the builder.
macro_rules! option_setters {
    ($holder:ident; $($(#[$attr:meta])* fn $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$holder.options.$field = Some($value);
                self
            }
        )*
    };
}

pub(crate) use option_setters;
