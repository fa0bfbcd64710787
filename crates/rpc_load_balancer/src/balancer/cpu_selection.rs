//! What LeastCpu selection makes of the readings: for diagnostics
//! ([`ControlRequest::CpuSelection`](crate::ControlRequest::CpuSelection)).
//!
//! A reading's raw value and age ([`readings`](crate::cpu::readings)) don't say what a balancer
//! routes by: that depends on its `cpu_cache_ttl`. This asks each LeastCpu balancer of the node
//! (through the node's registry: `RegisteredBalancer::cpu_selection`) for the value it gives
//! each member now — the reading if it is at most the balancer's `cpu_cache_ttl` old at its
//! source, else [`NEUTRAL_CPU`](crate::cpu::NEUTRAL_CPU) — through the same code the
//! `selection explained` event uses
//! ([`Selector::explain`](crate::routing::Selector::explain) of the balancer's selector).

use crate::node::shared::NodeShared;

/// For each running LeastCpu balancer of `node`, sorted by name: `(balancer, [(member node,
/// value % that selection gives it now)])`, members sorted by node.
pub(crate) fn values(node: &NodeShared) -> Vec<(String, Vec<(String, f64)>)> {
    let mut balancers: Vec<(String, Vec<(String, f64)>)> = node
        .balancers
        .running()
        .into_iter()
        .filter_map(|balancer| Some((balancer.name().to_string(), balancer.cpu_selection()?)))
        .collect();
    balancers.sort_by(|a, b| a.0.cmp(&b.0));
    balancers
}
