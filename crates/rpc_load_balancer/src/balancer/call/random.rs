//! A random-node call's attempt: this node when the call runs directly or this node matches
//! the filter, else a random matching peer once there is one (waiting in the retry loop while
//! there is none), counted by the tracking balancer if the call names one.

use std::future::Future;
use std::sync::Arc;

use rand::Rng as _;

use super::target::{Attempt, Counted, Kind, Route};
use super::telemetry::Telemetry;
use super::wait::look_until_found;
use crate::filter::{self, NodeFilter};
use crate::function::RemoteFunction;
use crate::node::shared::{Lifecycle, NodeShared};
use crate::{Error, Unavailable};

impl<'r> Route<'r> {
    /// A random-node attempt: this node when the call runs directly or this node matches the
    /// filter, else a random matching peer once there is one.
    pub(super) async fn random<F: RemoteFunction>(
        &self,
        filter: &NodeFilter,
        kind: Kind,
        telemetry: &mut Telemetry,
    ) -> Result<Attempt<'r, F>, Error> {
        let node = self.node;
        let excluded = &node.config.excluded_node_patterns;
        let (chosen, timeout) = if self.options.directly
            || filter::matches_labeled(&node.name, Some(&node.config.labels), filter, excluded)
        {
            (Arc::clone(&node.transport.own_name), self.options.timeout)
        } else {
            let (peer, waited) = look_until_found(
                self.options.retry,
                self.deadline,
                || self.watch_for_peers(filter),
                |attempt, _| {
                    tracing::debug!(
                        target: "rpc_load_balancer::random_node",
                        %filter,
                        attempt,
                        "no connected node matches; waiting to look again"
                    );
                },
                || self.still_running(),
            )
            .await?;
            let timeout = match waited {
                true => self.time_left(&peer)?,
                false => self.options.timeout,
            };
            (peer, timeout)
        };
        // Counted before checking: a drain that starts after the check sees the call.
        let counted = match &self.tracking {
            Some(balancer) => {
                let token = balancer.track();
                balancer.shared().check_running()?;
                Counted::InFlight(token)
            }
            None => Counted::Nothing,
        };
        telemetry.target(&chosen);
        let here = *chosen == *node.name;
        let destination = self.destination(kind, &chosen, here, false)?;
        Ok(self.attempt(&chosen, destination, counted, timeout))
    }

    /// A random matching peer, and a future that ends when a peer comes or goes (or, for a
    /// label filter, a peer's labels become known), this node starts to shut down or the
    /// tracking balancer's members change.
    fn watch_for_peers(
        &self,
        filter: &NodeFilter,
    ) -> (Result<Arc<str>, Error>, impl Future<Output = ()>) {
        let node = self.node;
        // Subscribed before looking, so a peer coming up in between ends the wait at once.
        let mut nodes = node.peers.watch_node_list();
        nodes.borrow_and_update();
        let mut lifecycle = node.lifecycle.subscribe();
        // A label filter also waits for a peer's labels to become known.
        let mut labels = filter.is_label().then(|| node.peers.watch_labels());
        let mut members = self.tracking.as_ref().map(|b| b.watch_members());
        let changed = async move {
            let balancer_changed = async {
                match members.as_mut() {
                    Some(members) => {
                        let _ = members.changed().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let labels_changed = async {
                match labels.as_mut() {
                    Some(labels) => {
                        let _ = labels.changed().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = nodes.changed() => {}
                _ = labels_changed => {}
                _ = lifecycle.wait_for(|l| *l != Lifecycle::Running) => {}
                _ = balancer_changed => {}
            }
        };
        (random_peer(node, filter), changed)
    }

    /// `Ok` while this node and the tracking balancer run.
    fn still_running(&self) -> Result<(), Error> {
        let node = self.node;
        if *node.lifecycle.borrow() != Lifecycle::Running {
            return Err(Error::ServiceUnavailable {
                node: node.name.clone(),
                reason: Unavailable::NodeStopped,
            });
        }
        if let Some(balancer) = &self.tracking {
            balancer.shared().check_running()?;
        }
        node.check_running(&node.name)
    }
}

/// A connected peer that serves rpc and matches `filter` (this node's exclusions applied),
/// chosen uniformly at random.
///
/// Errors: [`Error::NoMatchingNodes`] if there is none.
fn random_peer(node: &NodeShared, filter: &NodeFilter) -> Result<Arc<str>, Error> {
    let peers = node.peers.load();
    let candidates: Vec<&String> = peers
        .iter()
        .filter(|(name, peer)| {
            peer.endpoint.is_some()
                && **name != node.name
                && filter::matches_labeled(
                    name,
                    // Looked up only for a label filter: name filters take no lock.
                    filter
                        .is_label()
                        .then(|| node.peers.labels_of(name))
                        .flatten()
                        .as_ref(),
                    filter,
                    &node.config.excluded_node_patterns,
                )
        })
        .map(|(name, _)| name)
        .collect();
    if candidates.is_empty() {
        return Err(Error::NoMatchingNodes {
            filter: filter.to_string(),
        });
    }
    let index = rand::rng().random_range(0..candidates.len());
    Ok(Arc::from(candidates[index].as_str()))
}
