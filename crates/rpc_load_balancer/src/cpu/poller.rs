//! The Poller: one actor per LeastCpu balancer that fetches its remote members' CPU readings
//! into the process-wide cache on fixed-rate ticks.

use crate::algorithm::{AlgorithmChild, LeastCpuOptions};
use crate::Error;

/// The Poller child of balancer `balancer`.
pub(crate) fn child(balancer: &str, options: LeastCpuOptions) -> AlgorithmChild {
    let _ = (balancer, options);
    todo!("poller")
}

/// Makes balancer `balancer`'s Poller fail (admin control, to test its restart).
///
/// Errors: [`Error::UnknownBalancer`] if no Poller of that balancer runs on this node.
pub(crate) fn crash(balancer: &str) -> Result<(), Error> {
    Err(Error::UnknownBalancer {
        balancer: balancer.to_string(),
    })
}
