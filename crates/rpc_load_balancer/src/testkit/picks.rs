//! Selections on the kit: picks (one or many, with exclusions), their release or completion
//! with a call outcome, and explanations.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{Picked, SelectorKit, BALANCER};
use crate::routing::{Explanation, LoadReport, MemberView, Outcome, OutcomeKind, Request};
use crate::Error;

impl SelectorKit {
    /// Picks a member as a balancer does for a call with `key`, counting it in flight when
    /// the algorithm needs counts; the pick holds until released or completed.
    ///
    /// Errors: [`Error::NoMembers`] with no members; the selector's own errors;
    /// [`Error::InvalidConfig`] (`algorithm`) for an index out of range.
    pub fn pick(&self, key: Option<&[u8]>) -> Result<Picked, Error> {
        let index = self.checked(&self.members, &self.request(key), false)?;
        Ok(self.hold(index, &self.members))
    }

    /// Picks among the members not on `exclude`, as a balancer's re-selection after a failed
    /// or refused attempt does (the selector's [`repick`](crate::routing::Selector::repick),
    /// over a list that is no published one: [`Request::UNCACHED`]); the index is in the
    /// whole list.
    ///
    /// Errors: as [`pick`](Self::pick) ([`Error::NoMembers`] when every member is excluded).
    pub fn pick_excluding(&self, exclude: &[&str], key: Option<&[u8]>) -> Result<Picked, Error> {
        let rest: Vec<MemberView> = self
            .members
            .iter()
            .filter(|m| !exclude.contains(&m.node()))
            .cloned()
            .collect();
        let request = Request::new(BALANCER, key, Request::UNCACHED);
        let chosen = self.checked(&rest, &request, true)?;
        let node = rest[chosen].node();
        let index = self
            .members
            .iter()
            .position(|m| m.node() == node)
            .unwrap_or(0);
        Ok(self.hold(index, &self.members))
    }

    /// A pick over `list` (a re-selection, [`Selector::repick`](crate::routing::Selector::repick),
    /// when `again`), checked.
    fn checked(
        &self,
        list: &[MemberView],
        request: &Request<'_>,
        again: bool,
    ) -> Result<usize, Error> {
        if list.is_empty() {
            return Err(Error::NoMembers {
                balancer: BALANCER.to_string(),
            });
        }
        let index = if again {
            self.selector.repick(list, request)?
        } else {
            self.selector.pick(list, request)?
        };
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
    /// that [observes those](crate::routing::Selector::observes_cancelled) observes
    /// [`OutcomeKind::Cancelled`] (latency: the manual clock since the pick), then `released`
    /// runs and the in-flight count drops.
    pub fn release(&self, pick: Picked) {
        if self.learns && self.observes_cancelled {
            self.observe(
                &pick,
                self.clock.now().saturating_sub(pick.at),
                OutcomeKind::Cancelled,
                None,
                None,
            );
        }
        self.end(pick);
    }

    /// Ends `pick` with a call outcome: a learning selector observes `kind` after `latency`
    /// (with the kit's [call timeout](Self::set_call_timeout)), then `released` runs and the
    /// in-flight count drops.
    pub fn complete(&self, pick: Picked, latency: Duration, kind: OutcomeKind) {
        if self.learns {
            self.observe(&pick, latency, kind, self.call_timeout, None);
        }
        self.end(pick);
    }

    /// [`complete`](Self::complete) for a reply that carried the serving node's `report`, as
    /// a balancer does: the report is kept as the member's latest (arrived now on the kit's
    /// clock; see [`set_report`](Self::set_report)), then a learning selector observes the
    /// outcome with it ([`Outcome::report`]).
    pub fn complete_with_report(
        &self,
        pick: Picked,
        latency: Duration,
        kind: OutcomeKind,
        report: &LoadReport,
    ) {
        pick.view
            .store_report(report, self.clock.clock().now_ms().max(1));
        if self.learns {
            self.observe(&pick, latency, kind, self.call_timeout, Some(*report));
        }
        self.end(pick);
    }

    fn observe(
        &self,
        pick: &Picked,
        latency: Duration,
        kind: OutcomeKind,
        timeout: Option<Duration>,
        report: Option<LoadReport>,
    ) {
        let outcome = Outcome::new(&pick.view, latency, kind, timeout).with_report(report);
        self.selector.observe(&outcome);
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

    /// The selector's explanation of picking member `index` (of the kit's members, in their
    /// order) for `key`; `None` when `index` is not a member's (the member count or more).
    pub fn explain(&self, index: usize, key: Option<&[u8]>) -> Option<Explanation> {
        (index < self.members.len()).then(|| {
            self.selector
                .explain(&self.members, index, &self.request(key))
        })
    }
}
