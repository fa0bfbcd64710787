//! CallDirect: every routed call runs on the calling node.

use super::{SelectionAlgorithm, SelectionRequest};
use crate::balancer::Member;
use crate::Error;

/// Runs every routed call and cast on the calling node, in-process, with the same error
/// contract and timeout as a remote call (the original's CallDirect ran them in the caller,
/// where a raise escaped). For tests and single-node deployments: no selection happens.
#[derive(Debug, Default, Clone, Copy)]
pub struct CallDirect;

impl SelectionAlgorithm for CallDirect {
    fn name(&self) -> &'static str {
        "call_direct"
    }

    fn choose_from_nodes(
        &self,
        members: &[Member],
        _request: &SelectionRequest<'_>,
    ) -> Result<usize, Error> {
        Ok(members.iter().position(Member::is_local).unwrap_or(0))
    }

    fn is_local(&self) -> bool {
        true
    }
}
