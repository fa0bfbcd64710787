//! Membership on the kit: joins and leaves (each a new list version and a [`Change`] for the
//! selector), in-flight counts and CPU readings per member.

use std::sync::Arc;
use std::time::Duration;

use super::{SelectorKit, BALANCER};
use crate::load::CpuSlot;
use crate::routing::LoadReport;
use crate::routing::{Change, MemberView};

impl SelectorKit {
    /// Remote members on `nodes` join (those already members are ignored); the selector gets
    /// the [`Change`] and the list a new version.
    pub fn join<I, S>(&mut self, nodes: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joining: Vec<MemberView> = nodes
            .into_iter()
            .map(|n| self.view(n.as_ref(), false))
            .collect();
        self.change(joining, &[]);
    }

    /// The member on `node` joins as this node (a local member, as CallDirect looks for).
    pub fn join_local(&mut self, node: &str) {
        let view = self.view(node, true);
        self.change(vec![view], &[]);
    }

    /// The members on `nodes` leave (others are ignored); a later join of the same node is a
    /// new member whose counts start at 0.
    pub fn leave<I, S>(&mut self, nodes: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let leaving: Vec<String> = nodes.into_iter().map(|n| n.as_ref().to_string()).collect();
        self.change(Vec::new(), &leaving);
    }

    fn view(&mut self, node: &str, local: bool) -> MemberView {
        let slot = self
            .slots
            .entry(Arc::from(node))
            .or_insert_with(|| Arc::new(CpuSlot::default()));
        MemberView::new(node, local).with_cpu_slot(Arc::clone(slot))
    }

    fn change(&mut self, joining: Vec<MemberView>, leaving: &[String]) {
        // Sets, so a change of many members stays O(n log n) (simulations join thousands).
        let leaving: std::collections::HashSet<&str> = leaving.iter().map(String::as_str).collect();
        let mut joined = Vec::new();
        let mut left = Vec::new();
        let mut members: Vec<MemberView> = Vec::with_capacity(self.members.len());
        for member in &self.members {
            if leaving.contains(member.node()) {
                left.push(Arc::clone(member.node_arc()));
            } else {
                members.push(member.clone());
            }
        }
        let mut present: std::collections::HashSet<Arc<str>> =
            members.iter().map(|m| Arc::clone(m.node_arc())).collect();
        for view in joining {
            if present.insert(Arc::clone(view.node_arc())) {
                joined.push(Arc::clone(view.node_arc()));
                members.push(view);
            }
        }
        // In node-name order, as a balancer reports them.
        members.sort_by(|a, b| a.node().cmp(b.node()));
        joined.sort();
        left.sort();
        self.version += 1;
        let change = Change {
            balancer: BALANCER,
            joined: &joined,
            left: &left,
            members: &members,
            version: self.version,
        };
        self.selector.members_changed(&change);
        self.derived = self.selector.derive(&change);
        self.members = members;
    }

    /// Sets `node`'s in-flight count; `false` when it is no member.
    pub fn set_in_flight(&self, node: &str, count: usize) -> bool {
        self.member(node).map(|m| m.set_in_flight(count)).is_some()
    }

    /// `node`'s in-flight count, if it is a member.
    pub fn in_flight(&self, node: &str) -> Option<usize> {
        self.member(node).map(MemberView::in_flight)
    }

    /// Stores `node`'s CPU reading: `cpu` % sampled `age` before now on the kit's clock (also
    /// for a node that is no member yet).
    pub fn set_cpu(&mut self, node: &str, cpu: f64, age: Duration) {
        let slot = self
            .slots
            .entry(Arc::from(node))
            .or_insert_with(|| Arc::new(CpuSlot::default()));
        slot.store(cpu, age.as_millis() as u64, self.clock.clock().now_ms());
    }

    /// Keeps `report` as `node`'s latest load report, arrived `age` before now on the kit's
    /// clock, as a reply from it would (its CPU reading too, when the algorithm keeps CPU
    /// readings); `false` when `node` is no member.
    pub fn set_report(&self, node: &str, report: &LoadReport, age: Duration) -> bool {
        let at = self
            .clock
            .clock()
            .now_ms()
            .saturating_sub(age.as_millis() as u64);
        self.member(node)
            .map(|m| m.store_report(report, at.max(1)))
            .is_some()
    }

    /// Forgets `node`'s CPU reading.
    pub fn clear_cpu(&self, node: &str) {
        if let Some(slot) = self.slots.get(node) {
            slot.clear();
        }
    }

    fn member(&self, node: &str) -> Option<&MemberView> {
        self.members.iter().find(|m| m.node() == node)
    }
}
