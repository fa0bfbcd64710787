//! Draining a balancer on this node: [`Balancer::stop`], or the end of the balancer's actor
//! by any other means (the node's keeper drains it then). What it reports, [`DrainReport`], is
//! defined with the control protocol that carries it (`control::DrainReport`).

use std::sync::atomic::Ordering;

use super::{member_name, Balancer, DRAIN_POLL, MIN_REFUSING, PEERS_SAW_LEAVE};

pub use crate::control::{DrainOutcome, DrainReport};

impl Balancer {
    /// Stops the balancer on this node gracefully (draining), and returns when it is stopped,
    /// with a [`DrainReport`] of what happened:
    ///
    /// 1. new calls through this balancer on this node fail with [`Error::UnknownBalancer`](crate::Error::UnknownBalancer);
    /// 2. this node leaves the group, so other nodes stop selecting it;
    /// 3. for `leave_grace` (500 ms) it still serves calls other nodes selected before they saw
    ///    it leave; later ones are refused unrun and their callers send them to another member;
    /// 4. it waits until the calls this node routed through the balancer and the calls it
    ///    serves as a member have finished ([`DrainOutcome::Drained`]), or `drain_timeout`
    ///    (15 s, grace included) is up ([`DrainOutcome::TimedOut`], with the calls still
    ///    running in [`DrainReport::routed_in_flight`] and [`DrainReport::served_in_flight`])
    ///    — then it stops anyway: callers of calls still running here may get
    ///    [`Error::ServiceUnavailable`](crate::Error::ServiceUnavailable) (`ConnectionLost`: the call may have run), and those
    ///    calls' [`CallContext`](crate::CallContext)s are cancelled. A call or cast run
    ///    in-process (a local member, `CallDirect`, `call_directly`) counts until its function
    ///    has ended, even when its caller stopped waiting first (a cast: once handed over);
    /// 5. a member keeps refusing (not dropping) calls for at least 250 ms after leaving,
    ///    whatever the grace, then it stops its actors and frees the name (a new start under
    ///    it may follow). [`DrainReport::took`] is the time from 1 to here.
    ///
    /// A second call (or [`Node::shutdown`]) while one drains returns when that one is done,
    /// with the same report; so does a call on a balancer already stopped — unless a new
    /// balancer has been started under the name since: the handle follows it (see
    /// [Restarts](Balancer#restarts-a-handle-follows-its-name)) and stops that one.
    ///
    /// The balancer's actor ([`Balancer::actor`]) ending any other way — stopped, killed,
    /// failed, or with its parent — drains it the same way (without this call: node-owned
    /// machinery does it); a call then waits for that drain and returns its report. Only a
    /// balancer that gave up after too many restarts of its member actor has not drained: the
    /// call returns at once with [`DrainOutcome::Killed`].
    ///
    /// [`Node::shutdown`]: crate::Node::shutdown
    pub async fn stop(&self) -> DrainReport {
        let current = self.current();
        let shared = &current.shared;
        let mut stopped = shared.stopped.subscribe();
        if shared.claim_end() {
            // The drain runs on its own task: dropping this future does not abandon it.
            let balancer = Balancer::clone(&current);
            tokio::spawn(async move { balancer.drain_and_stop().await });
        }
        let report = stopped.wait_for(|report| report.is_some()).await;
        match report.as_deref() {
            Ok(Some(report)) => report.clone(),
            // The sender lives in `shared`, which this handle holds: not reached.
            _ => DrainReport::killed(&shared.name, 0, 0),
        }
    }

    /// The work of [`Balancer::stop`], once (for whoever claimed the balancer's end): leave,
    /// drain, stop the actors, report.
    pub(super) async fn drain_and_stop(&self) {
        let shared = &self.shared;
        let config = &shared.config;
        let started = tokio::time::Instant::now();
        let deadline = crate::deadline::after(config.drain_timeout);
        if shared.member {
            if let Some(cell) =
                ractor::registry::where_is(member_name(&shared.name, &shared.node.name))
            {
                ractor::pg::leave_scoped(
                    crate::wire::SCOPE.to_string(),
                    shared.name.clone(),
                    vec![cell],
                );
            }
            tokio::time::sleep_until(deadline.min(crate::deadline::after(config.leave_grace)))
                .await;
        }
        // Then the counts are read: a call counted after this store sees it and is refused.
        shared.accepting.store(false, Ordering::SeqCst);
        let (routed, served) = loop {
            let (routed, served) = (shared.in_flight.get(), shared.served.get());
            if routed + served == 0 || tokio::time::Instant::now() >= deadline {
                break (routed, served);
            }
            tokio::time::sleep(DRAIN_POLL).await;
        };
        let drained = routed + served == 0;
        if !drained {
            // Given up: calls of this balancer still running here see their cancellation.
            shared.abandoned.fire();
        }
        if shared.member {
            // Refuse (not drop) calls until every peer has seen the leave, so nothing is
            // selected for this member any more, and at least MIN_REFUSING after it: a call
            // reaching a stopped actor fails (it may have run, for all its caller knows); a
            // refused one goes to another member.
            shared.wait_until_peers_saw_leave(PEERS_SAW_LEAVE).await;
            tokio::time::sleep_until(started + MIN_REFUSING).await;
        }
        if !drained {
            tracing::warn!(
                balancer = %shared.name,
                routed = shared.in_flight.get(),
                served = shared.served.get(),
                drain_timeout_ms = config.drain_timeout.as_millis() as u64,
                "drain timed out; stopping with calls in flight"
            );
        }
        // The balancer's actor first (its algorithm children with it; it may have ended
        // already), then the node's keeper, which stops the member and waits for it: when this
        // returns, this node has left the group and the member's name is free.
        super::child::stop_and_wait(&self.supervisor.get_cell()).await;
        shared.stop_keeper().await;
        shared.clear();
        shared.node.balancers.release(&shared.name, shared);
        let report = DrainReport {
            balancer: shared.name.clone(),
            outcome: if drained {
                DrainOutcome::Drained
            } else {
                DrainOutcome::TimedOut
            },
            routed_in_flight: routed as u64,
            served_in_flight: served as u64,
            took: started.elapsed(),
        };
        tracing::info!(
            balancer = %shared.name,
            drained,
            routed,
            served,
            took_ms = report.took.as_millis() as u64,
            "balancer stopped"
        );
        shared.stopped.send_replace(Some(report));
    }
}
