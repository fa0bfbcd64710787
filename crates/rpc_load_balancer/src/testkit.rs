//! A test kit for algorithm authors (feature `testkit`): drive any [`Algorithm`]'s selector
//! without a network, a node or actors — joins, leaves, picks, releases and call outcomes,
//! with a seeded random sequence and a manual clock (like `tower-test` for tower services).
//!
//! A [`SelectorKit`] builds the algorithm's selector as a balancer would (with a
//! [manual clock](Clock::manual) and no node), keeps its member list (sorted by node name, a
//! new [`Change`] and version per join or leave) and counts in-flight selections as a
//! balancer's guard does when the algorithm [needs](Needs::in_flight) it.
//!
//! ```
//! use std::time::Duration;
//! use rpc_load_balancer::routing::OutcomeKind;
//! use rpc_load_balancer::testkit::SelectorKit;
//! use rpc_load_balancer::{LeastConnections, RoundRobin};
//!
//! let mut kit = SelectorKit::new(&RoundRobin::starting_at(0))?;
//! kit.join(["a@h", "b@h", "c@h"]);
//! let picks: Vec<String> = (0..4).map(|_| kit.pick_and_release(None).unwrap()).collect();
//! assert_eq!(picks, ["a@h", "b@h", "c@h", "a@h"]);
//! kit.leave(["b@h"]);
//! assert_eq!(kit.nodes(), ["a@h", "c@h"]);
//!
//! // In-flight counts, as a balancer keeps them for LeastConnections.
//! let mut kit = SelectorKit::seeded(&LeastConnections::new(), 7)?;
//! kit.join(["a@h", "b@h"]);
//! kit.set_in_flight("a@h", 5);
//! let pick = kit.pick(None)?;
//! assert_eq!(pick.node(), "b@h");
//! assert_eq!(kit.in_flight("b@h"), Some(1), "held until released");
//! kit.complete(pick, Duration::from_millis(3), OutcomeKind::Ok);
//! assert_eq!(kit.in_flight("b@h"), Some(0));
//! # Ok::<(), rpc_load_balancer::Error>(())
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::load::CpuSlot;
use crate::routing::{
    Algorithm, BuildContext, Change, Clock, Explanation, ManualClock, MemberView, Needs, Outcome,
    OutcomeKind, Request, Selector,
};
use crate::Error;

/// The balancer name the kit's requests and changes carry.
pub const BALANCER: &str = "testkit";

/// A selector built from an algorithm, with a member list, in-flight counts, CPU readings and
/// a manual clock, driven by hand. See the [module docs](self).
pub struct SelectorKit {
    name: &'static str,
    selector: Box<dyn Selector>,
    needs: Needs,
    learns: bool,
    clock: ManualClock,
    members: Vec<MemberView>,
    version: u64,
    /// Every node's CPU slot (on the manual clock's ms), kept across leaves.
    slots: HashMap<Arc<str>, Arc<CpuSlot>>,
}

/// One pick the kit holds until it is [released](SelectorKit::release) or
/// [completed](SelectorKit::complete) (exactly once: it is not `Clone`). Unlike the balancer's
/// guard it does not release itself: a `Picked` that is dropped keeps its member counted in
/// flight, and the selector never hears of it — hand each one back to the kit that made it.
#[derive(Debug)]
#[must_use = "release or complete a pick"]
pub struct Picked {
    /// The member's index in the list it was picked from (the kit's members then).
    pub index: usize,
    view: MemberView,
    at: Duration,
    counted: bool,
}

impl Picked {
    /// The picked member's node.
    pub fn node(&self) -> &str {
        self.view.node()
    }

    /// The picked member's view.
    pub fn view(&self) -> &MemberView {
        &self.view
    }
}

impl std::fmt::Debug for SelectorKit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelectorKit")
            .field("algorithm", &self.name)
            .field("members", &self.members)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl SelectorKit {
    /// Builds `algorithm`'s selector (its own seed, if it has one, else thread-local random
    /// numbers), with no members.
    ///
    /// Errors: what [`Algorithm::build`] returns ([`Error::InvalidConfig`] for bad options).
    pub fn new(algorithm: &dyn Algorithm) -> Result<SelectorKit, Error> {
        Self::build(algorithm, None)
    }

    /// As [`new`](Self::new), with the selector's random numbers from `seed` (reproducible).
    ///
    /// Errors: as [`new`](Self::new).
    pub fn seeded(algorithm: &dyn Algorithm, seed: u64) -> Result<SelectorKit, Error> {
        Self::build(algorithm, Some(seed))
    }

    fn build(algorithm: &dyn Algorithm, seed: Option<u64>) -> Result<SelectorKit, Error> {
        let clock = Clock::manual();
        let selector = algorithm.build(&BuildContext {
            balancer: BALANCER,
            clock: clock.clock(),
            seed,
            cpu_sample_interval: None,
        })?;
        let learns = selector.learns();
        Ok(SelectorKit {
            name: algorithm.name(),
            selector,
            needs: algorithm.needs(),
            learns,
            clock,
            members: Vec::new(),
            version: 0,
            slots: HashMap::new(),
        })
    }

    /// The selector under test.
    pub fn selector(&self) -> &dyn Selector {
        &*self.selector
    }

    /// The manual clock the selector reads; advance it to age readings or time calls.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The members, sorted by node name.
    pub fn members(&self) -> &[MemberView] {
        &self.members
    }

    /// The members' node names, sorted.
    pub fn nodes(&self) -> Vec<String> {
        self.members.iter().map(|m| m.node().to_string()).collect()
    }

    /// The current list's version (0 before the first change).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// A request for the current list with `key`.
    pub fn request<'a>(&self, key: Option<&'a [u8]>) -> Request<'a> {
        Request {
            balancer: BALANCER,
            key,
            version: self.version,
        }
    }

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
        self.selector.members_changed(&Change {
            balancer: BALANCER,
            joined: &joined,
            left: &left,
            members: &members,
            version: self.version,
        });
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

    /// Forgets `node`'s CPU reading.
    pub fn clear_cpu(&self, node: &str) {
        if let Some(slot) = self.slots.get(node) {
            slot.clear();
        }
    }

    fn member(&self, node: &str) -> Option<&MemberView> {
        self.members.iter().find(|m| m.node() == node)
    }

    /// Picks a member as a balancer does for a call with `key`, counting it in flight when
    /// the algorithm needs counts; the pick holds until released or completed.
    ///
    /// Errors: [`Error::NoMembers`] with no members; the selector's own errors;
    /// [`Error::InvalidConfig`] (`algorithm`) for an index out of range.
    pub fn pick(&self, key: Option<&[u8]>) -> Result<Picked, Error> {
        let index = self.checked_pick(&self.members, &self.request(key))?;
        Ok(self.hold(index, &self.members))
    }

    /// Picks among the members not on `exclude`, as a balancer's re-selection after a failed
    /// send does (a list that is no published one: [`Request::UNCACHED`]); the index is in
    /// the whole list.
    ///
    /// Errors: as [`pick`](Self::pick) ([`Error::NoMembers`] when every member is excluded).
    pub fn pick_excluding(&self, exclude: &[&str], key: Option<&[u8]>) -> Result<Picked, Error> {
        let rest: Vec<MemberView> = self
            .members
            .iter()
            .filter(|m| !exclude.contains(&m.node()))
            .cloned()
            .collect();
        let request = Request {
            version: Request::UNCACHED,
            ..self.request(key)
        };
        let chosen = self.checked_pick(&rest, &request)?;
        let node = rest[chosen].node();
        let index = self
            .members
            .iter()
            .position(|m| m.node() == node)
            .unwrap_or(0);
        Ok(self.hold(index, &self.members))
    }

    fn checked_pick(&self, list: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        if list.is_empty() {
            return Err(Error::NoMembers {
                balancer: BALANCER.to_string(),
            });
        }
        let index = self.selector.pick(list, request)?;
        if index >= list.len() {
            return Err(Error::InvalidConfig {
                option: "algorithm",
                reason: format!("{} chose member {index} of {}", self.name, list.len()),
            });
        }
        Ok(index)
    }

    fn hold(&self, index: usize, list: &[MemberView]) -> Picked {
        let view = list[index].clone();
        let counted = self.needs.in_flight;
        if counted {
            view.acquire();
        }
        Picked {
            index,
            view,
            at: self.clock.now(),
            counted,
        }
    }

    /// Ends `pick` without a result, as a dropped selection guard does: a learning selector
    /// observes [`OutcomeKind::Cancelled`] (latency: the manual clock since the pick), then
    /// `released` runs and the in-flight count drops.
    pub fn release(&self, pick: Picked) {
        if self.learns {
            self.observe(
                &pick,
                self.clock.now().saturating_sub(pick.at),
                OutcomeKind::Cancelled,
            );
        }
        self.end(pick);
    }

    /// Ends `pick` with a call outcome: a learning selector observes `kind` after `latency`,
    /// then `released` runs and the in-flight count drops.
    pub fn complete(&self, pick: Picked, latency: Duration, kind: OutcomeKind) {
        if self.learns {
            self.observe(&pick, latency, kind);
        }
        self.end(pick);
    }

    fn observe(&self, pick: &Picked, latency: Duration, kind: OutcomeKind) {
        self.selector.observe(&Outcome {
            member: &pick.view,
            latency,
            kind,
        });
    }

    fn end(&self, pick: Picked) {
        if pick.counted {
            pick.view.release();
        }
        self.selector.released(&pick.view);
    }

    /// Picks with `key` and releases at once; the picked node.
    ///
    /// Errors: as [`pick`](Self::pick).
    pub fn pick_and_release(&self, key: Option<&[u8]>) -> Result<String, Error> {
        let pick = self.pick(key)?;
        let node = pick.node().to_string();
        self.release(pick);
        Ok(node)
    }

    /// Picks and releases `n` times with `key`: how often each node was picked.
    ///
    /// Errors: the first pick's error.
    pub fn counts(&self, n: usize, key: Option<&[u8]>) -> Result<BTreeMap<String, usize>, Error> {
        let mut counts = BTreeMap::new();
        for _ in 0..n {
            *counts.entry(self.pick_and_release(key)?).or_default() += 1;
        }
        Ok(counts)
    }

    /// Replica selection with `key`: `min(count, members)` distinct nodes, preferred first.
    ///
    /// Errors: [`Error::NoMembers`]; the selector's own; [`Error::InvalidConfig`]
    /// (`algorithm`) when the selector breaks `pick_many`'s contract (an index out of range,
    /// a repeat, or other than `min(count, members)` indices), as a balancer checks it.
    pub fn pick_many(&self, count: usize, key: Option<&[u8]>) -> Result<Vec<String>, Error> {
        if self.members.is_empty() {
            return Err(Error::NoMembers {
                balancer: BALANCER.to_string(),
            });
        }
        let picked = self
            .selector
            .pick_many(&self.members, count, &self.request(key))?;
        let broken = || Error::InvalidConfig {
            option: "algorithm",
            reason: format!(
                "{} chose {picked:?} for {count} distinct of {} members",
                self.name,
                self.members.len()
            ),
        };
        if picked.len() != count.min(self.members.len()) {
            return Err(broken());
        }
        let mut nodes = Vec::with_capacity(picked.len());
        for (n, &i) in picked.iter().enumerate() {
            match self.members.get(i) {
                Some(member) if !picked[..n].contains(&i) => nodes.push(member.node().to_string()),
                _ => return Err(broken()),
            }
        }
        Ok(nodes)
    }

    /// The selector's explanation of picking member `index` for `key`.
    pub fn explain(&self, index: usize, key: Option<&[u8]>) -> Explanation {
        self.selector
            .explain(&self.members, index, &self.request(key))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Picks the first member; records outcomes and releases.
    #[derive(Default)]
    struct Recording(Arc<Mutex<Vec<String>>>);

    struct RecordingSelector(Arc<Mutex<Vec<String>>>);

    impl Algorithm for Recording {
        fn name(&self) -> &'static str {
            "recording"
        }
        fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
            assert!(context.clock.is_manual() && context.cpu_sample_interval.is_none());
            Ok(Box::new(RecordingSelector(Arc::clone(&self.0))))
        }
        fn needs(&self) -> Needs {
            Needs::NONE.in_flight()
        }
    }

    impl Selector for RecordingSelector {
        fn pick(&self, _: &[MemberView], _: &Request<'_>) -> Result<usize, Error> {
            Ok(0)
        }
        fn members_changed(&self, change: &Change<'_>) {
            self.0.lock().unwrap().push(format!(
                "v{} +{:?} -{:?}",
                change.version, change.joined, change.left
            ));
        }
        fn learns(&self) -> bool {
            true
        }
        fn observe(&self, outcome: &Outcome<'_>) {
            self.0.lock().unwrap().push(format!(
                "{} {:?} {:?}",
                outcome.member.node(),
                outcome.kind,
                outcome.latency
            ));
        }
        fn released(&self, member: &MemberView) {
            self.0
                .lock()
                .unwrap()
                .push(format!("released {}", member.node()));
        }
    }

    #[test]
    fn changes_picks_outcomes_and_releases_reach_the_selector_in_order() {
        let recording = Recording::default();
        let log = Arc::clone(&recording.0);
        let mut kit = SelectorKit::new(&recording).unwrap();
        assert!(matches!(kit.pick(None), Err(Error::NoMembers { .. })));
        kit.join(["b@h", "a@h"]);
        kit.join(["a@h"]);
        assert_eq!(kit.nodes(), ["a@h", "b@h"]);
        assert_eq!(kit.version(), 2, "every join or leave is a new list");
        let pick = kit.pick(None).unwrap();
        assert_eq!((pick.index, pick.node()), (0, "a@h"));
        assert_eq!(
            kit.in_flight("a@h"),
            Some(1),
            "counted: the algorithm needs it"
        );
        kit.clock().advance(Duration::from_millis(7));
        kit.release(pick);
        let pick = kit.pick(None).unwrap();
        kit.complete(pick, Duration::from_millis(3), OutcomeKind::Timeout);
        kit.leave(["a@h", "x@h"]);
        assert_eq!(kit.in_flight("a@h"), None);
        assert_eq!(
            *log.lock().unwrap(),
            [
                r#"v1 +["a@h", "b@h"] -[]"#,
                "v2 +[] -[]",
                "a@h Cancelled 7ms",
                "released a@h",
                "a@h Timeout 3ms",
                "released a@h",
                r#"v3 +[] -["a@h"]"#,
            ]
        );
    }
}
