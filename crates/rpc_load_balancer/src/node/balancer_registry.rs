//! The balancer registry: the balancers started on this node, by name, so that a name runs
//! one balancer at a time, a control request or a LeastCpu Poller can find its balancer, and
//! the node's shutdown can stop them all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::balancer::{Balancer, BalancerShared};
use crate::Error;

/// Balancers started on this node by name; `None` while one is starting.
#[derive(Default)]
pub(crate) struct BalancerRegistry {
    balancers: Mutex<HashMap<String, Option<Balancer>>>,
}

impl BalancerRegistry {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Option<Balancer>>> {
        self.balancers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Claims `name` for a balancer being started.
    ///
    /// Errors: [`Error::BalancerAlreadyStarted`] if one runs or is starting under that name.
    pub(crate) fn reserve(&self, name: &str) -> Result<(), Error> {
        let mut balancers = self.lock();
        match balancers.get(name) {
            Some(Some(running)) if running.is_own_running() => {}
            Some(None) => {}
            _ => {
                balancers.insert(name.to_string(), None);
                return Ok(());
            }
        }
        Err(Error::BalancerAlreadyStarted {
            balancer: name.to_string(),
        })
    }

    /// Records `balancer`, started under the name it reserved.
    pub(crate) fn register(&self, balancer: Balancer) {
        self.lock()
            .insert(balancer.name().to_string(), Some(balancer));
    }

    /// Frees `name` after a start under it failed (only while it is still reserved).
    pub(crate) fn release_reservation(&self, name: &str) {
        let mut balancers = self.lock();
        if matches!(balancers.get(name), Some(None)) {
            balancers.remove(name);
        }
    }

    /// Forgets the balancer whose state is `shared` when it has stopped: only its own entry
    /// (a balancer started under the name since, or reserving it, stays).
    pub(crate) fn release(&self, name: &str, shared: &Arc<BalancerShared>) {
        let mut balancers = self.lock();
        if let Some(Some(balancer)) = balancers.get(name) {
            if Arc::ptr_eq(balancer.shared(), shared) {
                balancers.remove(name);
            }
        }
    }

    /// The running balancer called `name`.
    ///
    /// Errors: [`Error::UnknownBalancer`].
    pub(crate) fn get(&self, name: &str) -> Result<Balancer, Error> {
        match self.lock().get(name) {
            Some(Some(balancer)) if balancer.is_own_running() => Ok(balancer.clone()),
            _ => Err(Error::UnknownBalancer {
                balancer: name.to_string(),
            }),
        }
    }

    /// Every running balancer (to stop them at shutdown).
    pub(crate) fn running(&self) -> Vec<Balancer> {
        self.lock()
            .values()
            .flatten()
            .filter(|b| b.is_own_running())
            .cloned()
            .collect()
    }
}
