//! [`Outcome`]: how a routed call or cast of a member ended, for selectors that learn.

use std::time::Duration;

use super::MemberView;
use crate::load::LoadReport;
use crate::{Error, ErrorCode};

/// A routed call or cast of a member ended: given to
/// [`Selector::observe`](super::Selector::observe) once per selection, only when the selector
/// [learns](super::Selector::learns).
#[non_exhaustive]
#[derive(Debug, Clone, Copy)]
pub struct Outcome<'a> {
    /// The member the selection picked.
    pub member: &'a MemberView,
    /// From the pick to the reply (for a cast: to the send; for a cancelled routed call: to
    /// its release), on the balancer's [`Clock::now_precise`](super::Clock::now_precise): ns
    /// resolution on a node, the manual clock's time in the test kit or a simulator. Zero for
    /// a [`SelectionGuard`](crate::SelectionGuard) from
    /// [`Balancer::select_node`](crate::Balancer::select_node): it carries no call, and no
    /// clock is read for it.
    pub latency: Duration,
    /// How it ended.
    pub kind: OutcomeKind,
    /// The time the attempt had (the call's timeout, or what was left of it for a re-sent
    /// call); `None` for every selection that ended without a result
    /// ([`Cancelled`](OutcomeKind::Cancelled): a [`SelectionGuard`](crate::SelectionGuard)
    /// dropped by its user, a routed call whose future was dropped). Learning selectors may
    /// use it to weigh a failure (e.g. [`PeakEwma`](crate::PeakEwma)'s penalty).
    pub timeout: Option<Duration>,
    /// The serving node's load as its reply reported it (also kept in the member's view:
    /// [`MemberView::report`]); `None` when the outcome carried no reply from another node
    /// (a run on this node, a timeout, a lost connection, a cast, a cancelled selection) or
    /// the member is of a release before reports.
    pub report: Option<LoadReport>,
}

impl<'a> Outcome<'a> {
    /// The outcome of a selection of `member` after `latency`, ending as `kind`, with the
    /// attempt's `timeout` (if it carried a call).
    pub fn new(
        member: &'a MemberView,
        latency: Duration,
        kind: OutcomeKind,
        timeout: Option<Duration>,
    ) -> Self {
        Self {
            member,
            latency,
            kind,
            timeout,
            report: None,
        }
    }

    /// This outcome with the serving node's `report` (see [`Self::report`]).
    pub fn with_report(mut self, report: Option<LoadReport>) -> Self {
        self.report = report;
        self
    }
}

/// How a routed call or cast ended.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    /// A reply (or a cast handed over).
    Ok,
    /// An error other than a timeout, by its code: the function's own error
    /// ([`ErrorCode::ServiceUnavailable`] for a remote failure), a lost connection, a
    /// refused request, ...
    Error(ErrorCode),
    /// No reply within the call's timeout.
    Timeout,
    /// The selection ended without a result: its caller stopped waiting (a dropped call
    /// future), a selection from [`Balancer::select_node`](crate::Balancer::select_node)
    /// whose guard dropped, a member that could not take the call and was skipped, or a call
    /// whose deadline passed before it was sent to the member picked.
    Cancelled,
}

impl OutcomeKind {
    /// The kind of a call's result: `Ok`, `Timeout` for [`Error::RequestTimeout`], else
    /// `Error` with the error's code.
    pub fn of<T>(result: &Result<T, Error>) -> OutcomeKind {
        match result {
            Ok(_) => OutcomeKind::Ok,
            Err(error) => OutcomeKind::of_error(error),
        }
    }

    /// The kind of a call that failed with `error`: `Timeout` for
    /// [`Error::RequestTimeout`], else `Error` with the error's code.
    pub fn of_error(error: &Error) -> OutcomeKind {
        match error {
            Error::RequestTimeout { .. } => OutcomeKind::Timeout,
            error => OutcomeKind::Error(error.code()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_map_to_kinds() {
        assert_eq!(OutcomeKind::of(&Ok::<(), Error>(())), OutcomeKind::Ok);
        let timeout = Error::RequestTimeout {
            node: "a@h".into(),
            timeout: Duration::from_millis(5),
        };
        assert_eq!(OutcomeKind::of::<()>(&Err(timeout)), OutcomeKind::Timeout);
        let unknown = Error::UnknownBalancer {
            balancer: "b".into(),
        };
        let code = unknown.code();
        assert_eq!(
            OutcomeKind::of::<()>(&Err(unknown)),
            OutcomeKind::Error(code)
        );
    }
}
