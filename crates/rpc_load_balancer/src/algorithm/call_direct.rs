//! CallDirect: every routed call runs on the calling node.

use crate::routing::{Algorithm, BuildContext, MemberView, Request, Rng, Selector};
use crate::Error;

/// Runs every routed call and cast on the calling node, in-process, with the same error
/// contract and timeout as a remote call. Source: the original's `CallDirect` (§5.7 of the
/// reference), which applied the function in the caller, where a raise escaped; here it runs on
/// its own task and a panic is the call's error. For tests and single-node deployments.
///
/// **Calls and casts** ([`Balancer::call`](crate::Balancer::call),
/// [`Balancer::cast`](crate::Balancer::cast)) select nothing: they run on this node whether or
/// not it is a member (the function must be registered here), so they never wait for members
/// and never fail with [`Error::NoMembers`]. Their errors are those of a call to this node:
/// [`Error::BadRequest`] when the function is not registered here, [`Error::RequestTimeout`]
/// past the call's timeout, [`Error::Remote`] for the function's own error or panic, and
/// [`Error::UnknownBalancer`] once the balancer is stopped.
///
/// **Selection** ([`Balancer::select_node`](crate::Balancer::select_node),
/// [`Balancer::select_nodes`](crate::Balancer::select_nodes)) answers this node; replica
/// selection puts it first and adds other members at random. Errors:
/// [`Error::NoMembers`] when the balancer has no members, [`Error::NoEligibleMembers`] when
/// this node is not one of them (it does not match the balancer's `node_match_list`, or left):
/// a selection never names a remote node as "the local one".
#[derive(Debug, Default, Clone, Copy)]
pub struct CallDirect;

impl CallDirect {
    /// The algorithm (it has no options), as the other algorithms' `new`: the same as
    /// `CallDirect` or `CallDirect::default()`.
    ///
    /// ```
    /// use rpc_load_balancer::{routing::Algorithm, CallDirect};
    /// assert_eq!(CallDirect::new().name(), "call_direct");
    /// ```
    pub const fn new() -> Self {
        CallDirect
    }
}

impl Algorithm for CallDirect {
    fn name(&self) -> &'static str {
        "call_direct"
    }

    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        Ok(Box::new(CallDirectSelector {
            rng: context.rng(None),
        }))
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// One balancer's [`CallDirect`] (for selections; its calls select nothing).
#[derive(Debug)]
struct CallDirectSelector {
    rng: Rng,
}

/// This node's index in `members`.
///
/// Errors: [`Error::NoEligibleMembers`] when this node is not a member.
fn local(members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
    members
        .iter()
        .position(MemberView::is_local)
        .ok_or_else(|| Error::NoEligibleMembers {
            balancer: request.balancer.to_string(),
            reason: "call_direct selects only this node, which is not a member".into(),
        })
}

impl Selector for CallDirectSelector {
    /// This node, whatever the key. Errors: [`Error::NoEligibleMembers`] when this node is
    /// not a member.
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        local(members, request)
    }

    /// This node first, then `count - 1` other members at random. Errors:
    /// [`Error::NoEligibleMembers`] when this node is not a member.
    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        let local = local(members, request)?;
        if count == 0 {
            return Ok(Vec::new());
        }
        let mut chosen = Vec::with_capacity(count.min(members.len()));
        chosen.push(local);
        // Others: distinct indices of the list without this node, mapped back.
        let others = self.rng.distinct(members.len() - 1, count - 1);
        chosen.extend(
            others
                .into_iter()
                .map(|i| if i >= local { i + 1 } else { i }),
        );
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests;
