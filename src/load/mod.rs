//! The load engine behind `rpclb load` and `rpclb demo`: concurrent callers stream calls
//! through a balancer; the report counts calls per serving node, errors by kind, and latency
//! percentiles.
//!
//! The engine ([`drive`], [`drive_until`]) runs any call function from concurrent callers and
//! counts into a bounded tally (`tally`); [`run`] and [`run_until`] stream a [`DemoCall`]
//! through a balancer with it. A [`LoadReport`] is what a run measured (`report`), shown live
//! by [`progress_bar`] (`progress`).

mod demo_call;
mod drive;
mod outcome;
mod progress;
mod report;
mod run;
mod tally;

pub use demo_call::DemoCall;
pub use drive::{drive, drive_until, Amount};
pub use outcome::{Failure, Outcome};
pub use progress::{progress_bar, progress_message};
pub use report::LoadReport;
pub use run::{run, run_until, wait_for_members};
