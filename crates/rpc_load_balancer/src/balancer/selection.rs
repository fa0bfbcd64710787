//! One selected member, counted busy until released: the owned [`SelectionGuard`] that
//! [`Balancer::select_node`](super::Balancer::select_node) gives users, and the
//! [`Selection`] inside it that a routed call holds in its own future.

use std::sync::Arc;
use std::time::Duration;

use super::{Member, Members, Releaser};
use crate::routing::{LoadReport, Outcome, OutcomeKind};

/// One selected member. Dropping the guard releases the selection, exactly once, whatever
/// happened to the call (success, error, timeout, panic, cancellation) and wherever it is
/// dropped (another task or thread, after the balancer stopped): the balancer's selector
/// hears of it ([`Selector::released`](crate::routing::Selector::released)), the member's
/// [in-flight count](Member::in_flight) and the balancer's
/// [`in_flight`](super::Balancer::in_flight) total go down by one, and a selector that
/// [learns](crate::routing::Selector::learns) observes it as [`OutcomeKind::Cancelled`] (if it
/// [observes those](crate::routing::Selector::observes_cancelled)).
///
/// It is owned — `Send`, `Sync` and `'static` — so it can move into a spawned task: it holds
/// the members snapshot it was chosen from (by the `arc_swap` guard it was loaded with), which
/// carries what its release needs (the balancer's selector and counts), not a borrow of the
/// [`Balancer`](super::Balancer) handle. A balancer stopped while
/// a guard is alive counts the selection in flight until the guard drops (its drain waits for
/// it, up to its `drain_timeout`).
///
/// ```
/// # use rpc_load_balancer::{Balancer, BalancerConfig, Node, NodeConfig};
/// # #[tokio::main] async fn main() -> Result<(), rpc_load_balancer::Error> {
/// # let node = Node::start(NodeConfig::new("guard_doc", "127.0.0.1:0").cookie("secret")).await?;
/// let balancer = Balancer::start(BalancerConfig::new("guarded")).await?;
/// balancer.wait_for_members(1, std::time::Duration::from_secs(5)).await?;
/// let guard = balancer.select_node(None)?;
/// assert_eq!(balancer.in_flight(), 1);
/// tokio::spawn(async move {
///     println!("working on {}", guard.node());
///     // dropped here, in the task: the selection is released
/// })
/// .await
/// .unwrap();
/// assert_eq!(balancer.in_flight(), 0);
/// # balancer.stop().await;
/// # node.shutdown().await;
/// # Ok(()) }
/// ```
pub struct SelectionGuard(Selection);

impl SelectionGuard {
    /// Counts a selection of `members[index]` (the member's count too, when the balancer
    /// keeps one) until the guard drops.
    pub(crate) fn new(members: arc_swap::Guard<Arc<Members>>, index: usize) -> Self {
        // The snapshot stays held by the arc-swap guard it was loaded with: no shared
        // reference count is written (one increment and one decrement less than a full
        // `Arc`). While the guard lives it takes one of the selecting thread's few fast
        // arc-swap slots; a thread whose slots are all taken (many guards held at once) loads
        // by a full reference instead — the cost of converting here, paid only then. What the
        // release needs comes with the snapshot: the balancer's state is not referenced.
        // It carries no call: no clock is read for it (a learning selector observes its
        // release as `Cancelled` with a zero latency, if it observes those; else nothing).
        Self(Selection::count(members, index, true, false))
    }

    /// The selected member's node (full name).
    pub fn node(&self) -> &str {
        self.0.node()
    }

    /// The selected member.
    pub fn member(&self) -> &Member {
        self.0.member()
    }
}

impl std::fmt::Debug for SelectionGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectionGuard")
            .field("node", &self.node())
            .finish()
    }
}

/// A selection counted in its balancer until dropped: the [`SelectionGuard`] users get, and
/// what a routed call holds for its attempt. It holds only the snapshot it was picked from,
/// whose [`Releaser`] reaches the balancer's selector and counts.
pub(crate) struct Selection {
    /// The snapshot the member was picked from.
    members: arc_swap::Guard<Arc<Members>>,
    index: usize,
    /// The stripe of the balancer's in-flight total this selection counts on.
    stripe: usize,
    /// When the member was picked, in ns on the balancer's precise clock — only when its selector
    /// learns (no clock is read otherwise); 0 = nothing to report (the selector does not
    /// learn, or the outcome was reported, or the selection carries no call and the selector
    /// observes no `Cancelled` outcome); [`NO_CALL`] for a selection that carries no call
    /// (a [`SelectionGuard`]: no clock is read). The clock never reads 0 (it starts at
    /// 2^32 ms).
    picked_at: u64,
}

/// [`Selection::picked_at`] of a selection that carries no call: its release is observed as
/// `Cancelled` after a zero latency, with no clock read.
const NO_CALL: u64 = u64::MAX;

impl Selection {
    /// Counts a selection of `members[index]`, the member's count included when the balancer
    /// keeps one.
    #[inline]
    pub(crate) fn new(members: arc_swap::Guard<Arc<Members>>, index: usize) -> Self {
        Self::count(members, index, true, true)
    }

    /// Counts a selection whose member count is already taken (by [`Member::try_acquire`]),
    /// or not kept, in the balancer's in-flight total and gauge (until dropped).
    #[inline]
    pub(crate) fn acquired(members: arc_swap::Guard<Arc<Members>>, index: usize) -> Self {
        Self::count(members, index, false, true)
    }

    /// Counts the selection (the member's count too when `member` and the balancer keeps
    /// one); `call`: it carries a call, whose latency a learning selector is told. A snapshot
    /// no balancer published counts nothing.
    #[inline(always)]
    fn count(
        members: arc_swap::Guard<Arc<Members>>,
        index: usize,
        member: bool,
        call: bool,
    ) -> Self {
        let (stripe, picked_at) = match members.releaser() {
            Some(releaser) => {
                if member && releaser.counts_members {
                    members.views()[index].acquire();
                }
                releaser.metrics.enter();
                let stripe = releaser.in_flight.acquire();
                let at = match (releaser.learns, call) {
                    (false, _) => 0,
                    // Its release can teach only `Cancelled`.
                    (true, false) if releaser.observes_cancelled => NO_CALL,
                    (true, false) => 0,
                    (true, true) => now_ns(releaser),
                };
                (stripe, at)
            }
            None => (0, 0),
        };
        Self {
            members,
            index,
            stripe,
            picked_at,
        }
    }

    /// Reports how the routed call of this selection ended to a selector that learns (the
    /// latency: from the pick to now on the balancer's clock); `kind` is not even computed
    /// for one that does not, and a `Cancelled` one is dropped for a selector that does not
    /// [observe those](crate::routing::Selector::observes_cancelled). At most once: later
    /// reports, and the drop, report nothing more.
    /// `load`: the serving node's report that came with the reply, given to the selector
    /// with the outcome (see [`Self::keep_report`] for the member's view).
    #[inline]
    pub(crate) fn report(
        &mut self,
        timeout: Duration,
        kind: impl FnOnce() -> OutcomeKind,
        load: Option<&LoadReport>,
    ) {
        if self.picked_at != 0 {
            let at = std::mem::take(&mut self.picked_at);
            let kind = kind();
            if kind == OutcomeKind::Cancelled && !self.observes_cancelled() {
                return;
            }
            // A selection that ended without a result carried no call's time.
            let timeout = (kind != OutcomeKind::Cancelled).then_some(timeout);
            self.observe_with(at, kind, timeout, load.copied());
        }
    }

    /// Restarts the latency clock of a selection that carries a call (one made before its
    /// call was sent, a tower service's reservation): the outcome's latency is measured from
    /// now. Nothing for a selection whose selector does not learn.
    pub(crate) fn restart_clock(&mut self) {
        if self.picked_at != 0 && self.picked_at != NO_CALL {
            if let Some(releaser) = self.members.releaser() {
                self.picked_at = now_ns(releaser);
            }
        }
    }

    /// Keeps `report`, which a reply of the selected member carried, as the member's latest
    /// (its view, read by selectors; arrived now on the balancer's clock).
    pub(crate) fn keep_report(&self, report: &LoadReport) {
        if let Some(releaser) = self.members.releaser() {
            self.member()
                .view()
                .store_report(report, releaser.clock.now_ms());
        }
    }

    /// Reports a selection picked at `at` that ended without a result, to a selector that
    /// observes those.
    #[cold]
    #[inline(never)]
    fn observe_cancelled(&self, at: u64) {
        if self.observes_cancelled() {
            self.observe_with(at, OutcomeKind::Cancelled, None, None);
        }
    }

    #[cold]
    #[inline(never)]
    fn observe_with(
        &self,
        at: u64,
        kind: OutcomeKind,
        timeout: Option<Duration>,
        report: Option<LoadReport>,
    ) {
        // `picked_at` is set only when there is a releaser.
        let Some(releaser) = self.members.releaser() else {
            return;
        };
        let latency = match at {
            NO_CALL => Duration::ZERO,
            _ => Duration::from_nanos(now_ns(releaser).saturating_sub(at)),
        };
        let outcome =
            Outcome::new(self.member().view(), latency, kind, timeout).with_report(report);
        contain(releaser, "observe", || releaser.selector.observe(&outcome));
    }

    /// Whether the selector observes selections that ended without a result.
    fn observes_cancelled(&self) -> bool {
        self.members
            .releaser()
            .is_some_and(|releaser| releaser.observes_cancelled)
    }

    /// The selected member's node (full name).
    pub(crate) fn node(&self) -> &str {
        self.member().node()
    }

    /// The selected member.
    pub(crate) fn member(&self) -> &Member {
        &self.members.as_slice()[self.index]
    }
}

impl Drop for Selection {
    fn drop(&mut self) {
        if self.picked_at != 0 {
            let at = std::mem::take(&mut self.picked_at);
            self.observe_cancelled(at);
        }
        let Some(releaser) = self.members.releaser() else {
            return;
        };
        let view = &self.members.views()[self.index];
        if releaser.counts_members {
            view.release();
        }
        contain(releaser, "released", || releaser.selector.released(view));
        releaser.in_flight.release(self.stripe);
        releaser.metrics.exit();
    }
}

/// The balancer's precise clock now ([`Clock::now_precise`](crate::routing::Clock::now_precise)), in ns (never 0).
#[cold]
#[inline(never)]
fn now_ns(releaser: &Releaser) -> u64 {
    u64::try_from(releaser.clock.now_precise().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The guard is owned: it moves into spawned tasks and threads.
const _: fn() = || {
    fn owned<T: Send + Sync + 'static>() {}
    owned::<SelectionGuard>();
};

/// Runs a selector's `observe` or `released` (user code) so that a panic in it stops there: it
/// is logged at ERROR and the selection is still released — the counts, the drain and the
/// caller's reply never depend on it (a panic while the guard drops during an unwind would
/// otherwise abort the process).
#[inline]
fn contain(releaser: &Releaser, method: &'static str, f: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        tracing::error!(
            balancer = %releaser.metrics.balancer(),
            method,
            panic = %crate::panic::panic_message(panic.as_ref()),
            "the balancer's selector panicked; the selection is released all the same"
        );
    }
}

#[cfg(test)]
mod tests;
