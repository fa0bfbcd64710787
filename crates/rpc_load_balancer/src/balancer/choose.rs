//! Choosing members through a handle: [`Balancer::select_node`], [`Balancer::select_nodes`],
//! and the routed calls and casts ([`Balancer::call`], [`Balancer::cast`]).

use super::{BalancedCall, BalancedCast, Balancer, SelectionGuard};
use crate::function::RemoteFunction;
use crate::Error;

impl Balancer {
    /// Selects a member without calling it (the original's `select_node`), optionally for a
    /// routing `key`. The returned guard releases the selection when dropped (counting
    /// algorithms count the member busy until then). It is owned (`Send + 'static`): it may
    /// move into a spawned task and outlive this handle.
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`] (no retry: it
    /// fails at once); the algorithm's own errors (e.g. [`Error::NoEligibleMembers`]);
    /// [`Error::InvalidConfig`] (`algorithm`) when a custom algorithm returns an index out of
    /// range.
    pub fn select_node(&self, key: Option<&[u8]>) -> Result<SelectionGuard, Error> {
        let current = self.current();
        let (members, index) = current.shared.choose(key, &[])?;
        let guard = SelectionGuard::new(members, index);
        // Checked again once counted: a drain that began during the pick and read no
        // selection in flight is not followed by one (the guard drops, released).
        current.shared.check_running()?;
        Ok(guard)
    }

    /// Replica selection: `min(count, members)` distinct member nodes (full names) for `key`,
    /// the preferred first (HashRing walks the ring; other algorithms sample at random by default). Nothing
    /// is counted in flight: use [`Balancer::select_node`] or calls for that.
    ///
    /// Errors: [`Error::UnknownBalancer`] once stopped; [`Error::NoMembers`]; the algorithm's
    /// own errors; [`Error::InvalidConfig`] (`algorithm`) when a custom selector's
    /// [`pick_many`](crate::routing::Selector::pick_many) breaks its contract (an index
    /// out of range, a repeat, or other than `min(count, members)` indices).
    pub fn select_nodes(&self, count: usize, key: Option<&[u8]>) -> Result<Vec<String>, Error> {
        let current = self.current();
        let shared = &current.shared;
        shared.check_running()?;
        let members = shared.members();
        if members.is_empty() {
            shared.metrics.empty();
            return Err(Error::NoMembers {
                balancer: shared.name.clone(),
            });
        }
        let request = members.request(&shared.name, key);
        let algorithm = &shared.config.algorithm;
        let picked = shared
            .selector
            .pick_many(members.views(), count, &request)?;
        let broken = || Error::InvalidConfig {
            option: "algorithm",
            reason: format!(
                "{} chose {picked:?} for {count} distinct of {} members",
                algorithm.name(),
                members.len()
            ),
        };
        if picked.len() != count.min(members.len()) {
            return Err(broken());
        }
        let mut nodes = Vec::with_capacity(picked.len());
        for (n, &i) in picked.iter().enumerate() {
            let Some(member) = members.as_slice().get(i) else {
                return Err(broken());
            };
            if picked[..n].contains(&i) {
                return Err(broken());
            }
            nodes.push(member.node().to_string());
        }
        Ok(nodes)
    }

    /// A call of `F` with `args` on a member chosen by the algorithm; set `.key(..)` and
    /// `.timeout(..)` on the returned [`BalancedCall`], then await it. A member on this node is
    /// served in-process (no serialization) with the same errors and timeout.
    ///
    /// Errors when awaited: see [`BalancedCall`] ([`Error::NoMembers`] when the pool stays
    /// empty, [`Error::Overloaded`], then as [`Node::call`](crate::Node::call)).
    pub fn call<F: RemoteFunction>(&self, args: F::Args) -> BalancedCall<F> {
        BalancedCall::new(self.clone(), args)
    }

    /// A cast of `F` with `args` to a member chosen by the algorithm; await the returned
    /// [`BalancedCast`] (it resolves once the cast is handed over).
    ///
    /// Errors when awaited: see [`BalancedCast`] ([`Error::NoMembers`] when the pool stays
    /// empty, then as [`Node::cast`](crate::Node::cast)).
    pub fn cast<F: RemoteFunction>(&self, args: F::Args) -> BalancedCast<F> {
        BalancedCast::new(self.clone(), args)
    }
}
