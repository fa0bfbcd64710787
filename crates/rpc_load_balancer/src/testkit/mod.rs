//! A test kit for algorithm authors (feature `testkit`): drive any [`Algorithm`]'s selector
//! without a network, a node or actors — joins, leaves, picks, releases and call outcomes,
//! with a seeded random sequence and a manual clock (like `tower-test` for tower services).
//!
//! A [`SelectorKit`] builds the algorithm's selector as a balancer would (with a
//! [manual clock](Clock::manual) and no node), keeps its member list (sorted by node name, a
//! new [`Change`](crate::routing::Change) and version per join or leave) and counts in-flight selections as a
//! balancer's guard does when the algorithm [needs](Needs::in_flight) it.
//!
//! For tests across real processes (Unix), see [`cluster`]: it starts child nodes of your
//! own binary, waits for them and stops them.
//!
//! ```
//! use std::time::Duration;
//! use rpc_load_balancer::routing::OutcomeKind;
//! use rpc_load_balancer::testkit::SelectorKit;
//! use rpc_load_balancer::{LeastConnections, RoundRobin};
//!
//! let mut kit = SelectorKit::new(&RoundRobin::starting_at(0))?;
//! kit.join(["a@h", "b@h", "c@h"]);
//! let picks: Vec<String> = (0..4).map(|_| kit.pick_and_release(None).unwrap()).collect();
//! assert_eq!(picks, ["a@h", "b@h", "c@h", "a@h"]);
//! kit.leave(["b@h"]);
//! assert_eq!(kit.nodes(), ["a@h", "c@h"]);
//!
//! // In-flight counts, as a balancer keeps them for LeastConnections.
//! let mut kit = SelectorKit::seeded(&LeastConnections::new(), 7)?;
//! kit.join(["a@h", "b@h"]);
//! kit.set_in_flight("a@h", 5);
//! let pick = kit.pick(None)?;
//! assert_eq!(pick.node(), "b@h");
//! assert_eq!(kit.in_flight("b@h"), Some(1), "held until released");
//! kit.complete(pick, Duration::from_millis(3), OutcomeKind::Ok);
//! assert_eq!(kit.in_flight("b@h"), Some(0));
//! # Ok::<(), rpc_load_balancer::Error>(())
//! ```

mod budget;
#[cfg(all(unix, feature = "testkit"))]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub mod cluster;
mod hedge;
mod members;
mod picked;
mod picks;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::load::CpuSlot;
use crate::routing::{
    Algorithm, BuildContext, Clock, Derived, ManualClock, MemberView, Needs, Request, Selector,
};
use crate::Error;

pub use budget::RetryBudgetKit;
pub use hedge::HedgeKit;
pub use picked::Picked;

/// The balancer name the kit's requests and changes carry.
pub const BALANCER: &str = "testkit";

/// A selector built from an algorithm, with a member list, in-flight counts, CPU readings and
/// a manual clock, driven by hand. See the [module docs](self).
pub struct SelectorKit {
    name: &'static str,
    selector: Box<dyn Selector>,
    needs: Needs,
    learns: bool,
    /// Whether it observes `Cancelled` outcomes ([`Selector::observes_cancelled`]).
    observes_cancelled: bool,
    clock: ManualClock,
    members: Vec<MemberView>,
    version: u64,
    /// What the selector derived from the current list ([`Selector::derive`]), handed to
    /// every pick over it as a balancer does.
    derived: Option<Derived>,
    /// Every node's CPU slot (on the manual clock's ms), kept across leaves.
    slots: HashMap<Arc<str>, Arc<CpuSlot>>,
    /// The timeout the completed calls' outcomes carry ([`Outcome::timeout`](crate::routing::Outcome::timeout)).
    call_timeout: Option<Duration>,
}

impl std::fmt::Debug for SelectorKit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorKit")
            .field("algorithm", &self.name)
            .field("members", &self.members)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl SelectorKit {
    /// Builds `algorithm`'s selector (its own seed, if it has one, else thread-local random
    /// numbers), with no members.
    ///
    /// Errors: what [`Algorithm::build`] returns ([`Error::InvalidConfig`] for bad options).
    pub fn new(algorithm: &dyn Algorithm) -> Result<SelectorKit, Error> {
        Self::build(algorithm, None)
    }

    /// As [`new`](Self::new), with the selector's random numbers from `seed` (reproducible).
    ///
    /// Errors: as [`new`](Self::new).
    pub fn seeded(algorithm: &dyn Algorithm, seed: u64) -> Result<SelectorKit, Error> {
        Self::build(algorithm, Some(seed))
    }

    fn build(algorithm: &dyn Algorithm, seed: Option<u64>) -> Result<SelectorKit, Error> {
        let clock = Clock::manual();
        let selector = algorithm.build(&BuildContext {
            balancer: BALANCER,
            clock: clock.clock(),
            seed,
            cpu_sample_interval: None,
        })?;
        let learns = selector.learns();
        let observes_cancelled = learns && selector.observes_cancelled();
        Ok(SelectorKit {
            name: algorithm.name(),
            selector,
            needs: algorithm.needs(),
            learns,
            observes_cancelled,
            clock,
            members: Vec::new(),
            version: 0,
            derived: None,
            slots: HashMap::new(),
            call_timeout: None,
        })
    }

    /// Sets the timeout that [`complete`](Self::complete)d calls' outcomes carry
    /// ([`Outcome::timeout`](crate::routing::Outcome::timeout)), as a balancer's calls carry
    /// theirs; `None` (the default) for none.
    pub fn set_call_timeout(&mut self, timeout: Option<Duration>) {
        self.call_timeout = timeout;
    }

    /// The selector under test.
    pub fn selector(&self) -> &dyn Selector {
        &*self.selector
    }

    /// The manual clock the selector reads; advance it to age readings or time calls.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The members, sorted by node name.
    pub fn members(&self) -> &[MemberView] {
        &self.members
    }

    /// The members' node names, sorted.
    pub fn nodes(&self) -> Vec<String> {
        self.members.iter().map(|m| m.node().to_string()).collect()
    }

    /// The current list's version (0 before the first change).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// A request for the current list with `key`, carrying what the selector derived from
    /// that list ([`Request::derived`]).
    pub fn request<'a>(&'a self, key: Option<&'a [u8]>) -> Request<'a> {
        Request {
            derived: self.derived.as_ref(),
            ..Request::new(BALANCER, key, self.version)
        }
    }
}
