//! What [`LeastConnections`](super::LeastConnections) and [`PowerOfTwo`](super::PowerOfTwo)
//! share: a selector that picks by the members' in-flight counts, drawing from one generator,
//! and the [`Algorithm`](crate::routing::Algorithm) impl that builds it.

use std::marker::PhantomData;

use crate::routing::{Explanation, MemberView, Request, Rng, Selector};
use crate::Error;

/// A rule that picks a member by in-flight counts, drawing from a generator.
pub(super) trait InFlightRule: Send + Sync + 'static {
    /// The index of the member picked from `members` (never empty).
    fn pick(members: &[MemberView], rng: &Rng) -> usize;

    /// Why `members[chosen]` was picked.
    fn explain(members: &[MemberView], chosen: usize) -> Explanation;

    /// Whether the rule applies the members' slow-start factors itself
    /// ([`Selector::applies_slow_start`]).
    fn applies_slow_start() -> bool {
        false
    }
}

/// One balancer's selector of rule `R`: its generator (seeded or thread-local).
pub(super) struct InFlightSelector<R> {
    rng: Rng,
    rule: PhantomData<fn() -> R>,
}

impl<R: InFlightRule> InFlightSelector<R> {
    pub(super) fn new(rng: Rng) -> Self {
        Self {
            rng,
            rule: PhantomData,
        }
    }
}

impl<R: InFlightRule> Selector for InFlightSelector<R> {
    #[inline]
    fn pick(&self, members: &[MemberView], _request: &Request<'_>) -> Result<usize, Error> {
        Ok(R::pick(members, &self.rng))
    }

    fn explain(
        &self,
        members: &[MemberView],
        chosen: usize,
        _request: &Request<'_>,
    ) -> Explanation {
        R::explain(members, chosen)
    }

    fn applies_slow_start(&self) -> bool {
        R::applies_slow_start()
    }
}

/// Implements [`Algorithm`](crate::routing::Algorithm) for `$algorithm` (a configuration with
/// a `seed: Option<u64>` field): named `$name`, [needing](crate::routing::Needs::in_flight)
/// in-flight counts, building an [`InFlightSelector`] of `$rule` seeded from the build
/// context's seed, else its own, else thread-local.
macro_rules! in_flight_algorithm {
    ($algorithm:ty, $name:literal, $rule:ty) => {
        impl $crate::routing::Algorithm for $algorithm {
            fn name(&self) -> &'static str {
                $name
            }

            fn build(
                &self,
                context: &$crate::routing::BuildContext<'_>,
            ) -> Result<Box<dyn $crate::routing::Selector>, $crate::Error> {
                Ok(Box::new(
                    super::by_in_flight::InFlightSelector::<$rule>::new(context.rng(self.seed)),
                ))
            }

            fn needs(&self) -> $crate::routing::Needs {
                $crate::routing::Needs::NONE.in_flight()
            }
        }
    };
}

pub(super) use in_flight_algorithm;
