//! A balancer as its node's registry holds it: [`Balancer`] implements the node's
//! [`RegisteredBalancer`], so the node stops it at shutdown and its load sources and
//! diagnostics read its members without naming the balancer layer; [`BalancerLookup`] gives
//! the balancer layer (and the facade) its own handle back by name.

use std::any::Any;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use super::Balancer;
use crate::control::DrainReport;
use crate::node::{BalancerRegistry, RegisteredBalancer};
use crate::Error;

impl RegisteredBalancer for Balancer {
    fn name(&self) -> &str {
        Balancer::name(self)
    }

    fn is_own_running(&self) -> bool {
        Balancer::is_own_running(self)
    }

    fn actor_id(&self) -> ractor::ActorId {
        self.actor().get_id()
    }

    fn state_ptr(&self) -> *const () {
        Arc::as_ptr(self.shared()).cast()
    }

    fn stop(&self) -> BoxFuture<'static, DrainReport> {
        let balancer = self.clone();
        Box::pin(async move { Balancer::stop(&balancer).await })
    }

    fn remote_member_nodes(&self) -> Vec<Arc<str>> {
        self.current_shared().remote_member_nodes()
    }

    fn member_changes(&self) -> BoxStream<'static, ()> {
        self.current_shared().member_changes()
    }

    fn cpu_selection(&self) -> Option<Vec<(String, f64)>> {
        if !(self.is_running() && self.algorithm_name() == "least_cpu") {
            return None;
        }
        let members = self.members();
        let request = members.request(self.name(), None);
        let mut values = if members.is_empty() {
            Vec::new()
        } else {
            self.shared()
                .selector
                .explain(members.views(), 0, &request)
                .scores
        };
        values.sort_by(|a, b| a.0.cmp(&b.0));
        Some(values)
    }

    fn directory_roles(&self) -> (bool, bool) {
        let shared = self.shared();
        (shared.member, shared.config.subsetting.is_some())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The node's registry, read by the balancer layer: its entries as [`Balancer`] handles.
pub(crate) trait BalancerLookup {
    /// The running balancer called `name`.
    ///
    /// Errors: [`Error::UnknownBalancer`].
    fn get(&self, name: &str) -> Result<Balancer, Error>;

    /// The running balancer whose actor has the id `actor`.
    ///
    /// Errors: [`Error::UnknownBalancer`].
    fn by_actor(&self, actor: ractor::ActorId) -> Result<Balancer, Error>;

    /// The balancer registered under `name`: running, or draining after its actor ended (its
    /// counts and members until its drain is over).
    ///
    /// Errors: [`Error::UnknownBalancer`].
    fn registered(&self, name: &str) -> Result<Balancer, Error>;
}

impl BalancerLookup for BalancerRegistry {
    fn get(&self, name: &str) -> Result<Balancer, Error> {
        self.entry(name)?
            .as_any()
            .downcast_ref::<Balancer>()
            .cloned()
            .ok_or_else(|| Error::UnknownBalancer {
                balancer: name.to_string(),
            })
    }

    fn registered(&self, name: &str) -> Result<Balancer, Error> {
        let entry = match BalancerRegistry::draining(self, name) {
            Some(draining) => draining,
            None => self.entry(name)?,
        };
        entry
            .as_any()
            .downcast_ref::<Balancer>()
            .cloned()
            .ok_or_else(|| Error::UnknownBalancer {
                balancer: name.to_string(),
            })
    }

    fn by_actor(&self, actor: ractor::ActorId) -> Result<Balancer, Error> {
        let entry = BalancerRegistry::by_actor(self, actor)?;
        entry
            .as_any()
            .downcast_ref::<Balancer>()
            .cloned()
            .ok_or_else(|| Error::UnknownBalancer {
                balancer: entry.name().to_string(),
            })
    }
}
