//! The routing core: selection decisions as plain code over member views, with an injected
//! clock and random numbers. No actors, no node, no I/O, no globals: a balancer drives it on a
//! node, and the test kit (`rpc_load_balancer::testkit`, feature `testkit`) or a simulator
//! drives the same code without one.
//!
//! An [`Algorithm`] is configuration: it checks its options and [builds](Algorithm::build)
//! one [`Selector`] per balancer, whose state belongs to that balancer. The balancer gives
//! the selector its member lists and picks, and — if it [learns](Selector::learns) — how
//! each routed call ended:
//!
//! | method | called | default |
//! |---|---|---|
//! | [`Algorithm::build`] | once when the balancer starts (checks the options) | — |
//! | [`Algorithm::needs`] | once when the balancer starts: what the views must keep | nothing |
//! | [`Algorithm::is_local`] | every routed call: `true` runs it here, selecting nothing | `false` |
//! | [`Selector::members_changed`] | each new member list, before it is published (the first as everyone joining) | nothing |
//! | [`Selector::derive`] | right after it: what to keep with that list and hand to its picks ([`Request::derived`]) | nothing |
//! | [`Selector::pick`] | every selection, concurrently, with the current members (never empty) | — |
//! | [`Selector::pick_many`] | replica selection (`count` distinct members) | distinct members at random |
//! | [`Selector::released`] | exactly once per pick, when its guard drops | nothing |
//! | [`Selector::applies_slow_start`] | once, by [`SlowStart`]'s selector over it: whether it scales by [`MemberView::slow_start_factor`] itself | `false` (slow start skips picks instead) |
//! | [`Selector::learns`] | once when the balancer starts: whether to report outcomes | `false` |
//! | [`Selector::observes_cancelled`] | once when the balancer starts: whether `observe` wants [`Cancelled`](OutcomeKind::Cancelled) outcomes | `true` |
//! | [`Selector::observe`] | once per pick of a learning selector: the call's [`Outcome`] | nothing |
//! | [`Selector::explain`] | only when DEBUG is on for `rpc_load_balancer::selection` | the chosen node |
//!
//! Members come as [`MemberView`]s sorted by node name, one per node, so index-based
//! selectors see the same list on every node. What a selector derives from a list travels with
//! the list ([`Derived`], read in a pick with [`Request::derived_as`]); a [`PerList`] is the
//! selector-held alternative (one lock-free load per pick); [`Rng`] and [`Clock`] are what it should draw and read time from.
//!
//! [`Subsetting`] is apart from selection: which members of the full list one caller dials
//! (deterministic subsetting for large clusters), a pure function of the list, the caller's
//! index and the caller count.
//!
//! This module names nothing above it (no balancer, node or actor type): only the crate's
//! [`Error`](crate::Error) and the plain load data a view carries.

mod algorithm;
mod clock;
mod locality;
mod names;
mod outcome;
mod outlier;
mod per_list;
mod rng;
mod selector;
mod slow_start;
mod subset;
mod view;
mod wrapped;

pub use crate::load::{LoadReport, ReportReading};
pub use algorithm::{Algorithm, BuildContext, CpuPolling, Needs};
pub use clock::{Clock, ManualClock};
pub use locality::Locality;
pub use outcome::{Outcome, OutcomeKind};
pub(crate) use outlier::{ejection_rng, Ejecting, EjectionEvent};
pub use outlier::{EjectionStats, OutlierEjection};
pub use per_list::PerList;
pub use rng::Rng;
pub use selector::{Change, Derived, Explanation, Request, Selector};
pub(crate) use slow_start::Ramping;
pub use slow_start::SlowStart;
pub use subset::{SubsetScheme, Subsetting};
pub use view::MemberView;

#[cfg(test)]
pub(crate) use rng::splitmix64;
