//! The control requests about a node's balancers, answered here for the serving side (the
//! endpoint), which does not know balancers: the node holds [`answer`] as its
//! [`BalancerAdmin`](crate::node::shared::BalancerAdmin) handler.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::{member_name, Balancer, BalancerConfig, BalancerLookup};
use crate::control::{ControlReply, ControlRequest};
use crate::node::shared::NodeShared;
use crate::Error;

/// Answers one control request about the balancers of the node whose state is `shared`:
/// `InFlight`, `Members`, `Served`, `CpuSelection`, and the admin requests `StartBalancer`,
/// `StopBalancer`, `StopBalancerReport`, and the test hooks `KillLoadBalancer`, `CrashPoller`
/// and `EndBalancerParent` (the endpoint
/// checks `remote_admin` before it hands them here). Any other request is an
/// [`Error::BadRequest`] (the endpoint hands none here).
///
/// Errors: [`Error::UnknownBalancer`] for an admin request naming no running balancer here,
/// an unknown algorithm's error for `StartBalancer`, or what starting the balancer returns.
pub(crate) fn answer(
    shared: Arc<NodeShared>,
    request: ControlRequest,
) -> BoxFuture<'static, Result<ControlReply, Error>> {
    Box::pin(async move {
        Ok(match request {
            ControlRequest::InFlight(name) => {
                ControlReply::InFlight(shared.balancers.registered(&name).ok().map(|b| {
                    b.members()
                        .as_slice()
                        .iter()
                        .map(|m| (m.node().to_string(), m.in_flight() as u64))
                        .collect()
                }))
            }
            ControlRequest::Members(name) => ControlReply::Members(
                shared
                    .balancers
                    .registered(&name)
                    .ok()
                    .map(|b| b.members().nodes()),
            ),
            ControlRequest::Served(name) => ControlReply::Served(
                shared
                    .balancers
                    .registered(&name)
                    .ok()
                    .map(|b| b.served() as u64),
            ),
            ControlRequest::CpuSelection => {
                ControlReply::CpuSelection(super::cpu_selection::values(&shared))
            }
            ControlRequest::StartBalancer {
                name,
                algorithm,
                node_match_list,
            } => {
                let mut config =
                    BalancerConfig::new(name).algorithm_arc(crate::algorithm::by_name(&algorithm)?);
                if let Some(patterns) = node_match_list {
                    config = config.node_match_list(patterns);
                }
                Balancer::start_on(shared, config).await?;
                ControlReply::Done
            }
            // A balancer whose actor has ended and that drains: its drain's report.
            ControlRequest::StopBalancer(name) => {
                shared.balancers.registered(&name)?.stop().await;
                ControlReply::Done
            }
            ControlRequest::StopBalancerReport(name) => {
                ControlReply::Stopped(shared.balancers.registered(&name)?.stop().await)
            }
            ControlRequest::KillLoadBalancer(name) => {
                shared.balancers.get(&name)?;
                let actor = ractor::registry::where_is(member_name(&name, &shared.name))
                    .ok_or(Error::UnknownBalancer { balancer: name })?;
                actor.kill();
                ControlReply::Done
            }
            ControlRequest::EndBalancerParent { name, kill } => {
                let balancer = shared.balancers.get(&name)?;
                let parent = balancer
                    .actor()
                    .get_cell()
                    .try_get_supervisor()
                    .ok_or_else(|| Error::BadRequest {
                        node: shared.name.clone(),
                        message: format!("balancer {name}'s actor has no parent"),
                    })?;
                if kill {
                    parent.kill();
                } else {
                    parent.stop(None);
                }
                ControlReply::Done
            }
            ControlRequest::CrashPoller(name) => {
                super::cpu_poller::crash(&name)?;
                ControlReply::Done
            }
            other => {
                return Err(Error::BadRequest {
                    node: shared.name.clone(),
                    message: format!("not a balancer request: {other:?}"),
                })
            }
        })
    })
}
