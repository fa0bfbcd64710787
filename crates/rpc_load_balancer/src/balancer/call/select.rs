//! A routed call's attempt: the balancer's selection (waiting in the retry loop while it has
//! no member to pick), past the members at its `max_in_flight_per_member` cap.

use std::sync::Arc;

use super::target::{Attempt, Counted, Destination, Kind, Route};
use super::telemetry::Telemetry;
use super::wait::look_until_found;
use crate::balancer::in_flight::ServedToken;
use crate::balancer::shared::BalancerShared;
use crate::balancer::Selection;
use crate::function::RemoteFunction;
use crate::routing::OutcomeKind;
use crate::Error;

impl<'r> Route<'r> {
    /// A routed attempt: the balancer's selection, past the members at its in-flight cap —
    /// or `reserved`, a selection made beforehand (a tower service's `poll_ready`), taken on
    /// the first attempt.
    pub(super) async fn select<F: RemoteFunction>(
        &self,
        shared: &'r Arc<BalancerShared>,
        kind: Kind,
        exclude: &mut Vec<Arc<str>>,
        again: bool,
        reserved: &mut Option<Selection>,
        telemetry: &mut Telemetry,
    ) -> Result<Attempt<'r, F>, Error> {
        // Whether it waited for a member.
        let mut waited = false;
        let mut selection = match reserved.take() {
            Some(mut selection) => {
                // Its call starts now, not when it was reserved.
                selection.restart_clock();
                selection
            }
            None => self.pick(shared, kind, exclude, &mut waited).await?,
        };
        // Checked again once counted: a drain that began during the pick and read no
        // call in flight is not followed by one (the selection drops, released).
        shared.check_running()?;
        let member = selection.member();
        let node = Arc::clone(member.node_arc());
        let local = member.is_local();
        telemetry.target(&node);
        // (A re-selected call keeps its deadline too.)
        let timeout = if kind == Kind::Cast {
            self.options.timeout
        } else {
            match self.time_left(&node) {
                Ok(left) if waited || again => left,
                Ok(_) => self.options.timeout,
                Err(timed_out) => {
                    // Nothing was sent to the member: it did not fail, the call ran out
                    // of time before (waiting for members, or a previous attempt).
                    selection.report(self.options.timeout, || OutcomeKind::Cancelled, None);
                    return Err(timed_out);
                }
            }
        };
        let destination = self.destination(kind, &node, local, true)?;
        let counted = match destination {
            // Counted until the run has ended, even if the caller's future is dropped.
            Destination::Here(_) => Counted::Served(ServedToken::new(shared)),
            _ => Counted::Nothing,
        };
        Ok(Attempt {
            node,
            destination,
            balancer: Some(&shared.name),
            selection: Some(selection),
            counted,
            timeout,
            deadline: self.deadline,
            load: None,
        })
    }

    /// The balancer's selection of a member under its in-flight cap (calls only), waiting
    /// in the retry loop while it has no member to pick (`waited` is set if it did).
    ///
    /// Errors: those of the balancer's selection ([`Error::NoMembers`], ...),
    /// [`Error::Overloaded`] when every member is at the cap, [`Error::RequestTimeout`].
    async fn pick(
        &self,
        shared: &Arc<BalancerShared>,
        kind: Kind,
        exclude: &mut Vec<Arc<str>>,
        waited: &mut bool,
    ) -> Result<Selection, Error> {
        loop {
            let ((members, index), waited_now) = look_until_found(
                self.options.retry,
                self.deadline,
                || {
                    let mut members = shared.watch();
                    let changed = async move {
                        // A closed watch (the balancer is gone) is seen by the next look.
                        let _ = members.changed().await;
                    };
                    (shared.choose(self.key, exclude), changed)
                },
                |attempt, error| {
                    // (The target and fields tests count waits by: `rpclb::retry_waits`.)
                    tracing::debug!(
                        target: "rpc_load_balancer::balancer::call",
                        balancer = %shared.name,
                        attempt,
                        %error,
                        "nobody to send to; waiting to select again"
                    );
                },
                || Ok(()),
            )
            .await?;
            *waited |= waited_now;
            let limit = shared
                .config
                .max_in_flight_per_member
                .filter(|_| kind == Kind::Call);
            // Held across the call: by a full reference, so it doesn't keep one of the
            // thread's few fast arc-swap slots.
            let members = arc_swap::Guard::from_inner(arc_swap::Guard::into_inner(members));
            if let Some(selection) = shared.count_capped(members, index, limit, exclude)? {
                return Ok(selection);
            }
            // At the cap, with another member left to try.
        }
    }
}
