//! The selector of an algorithm with [`Locality`](super::Locality): two of the algorithm's
//! selectors, one over the preferred members and one over all; a pick goes to the first
//! while a preferred member can take the call.

use std::sync::{Arc, Mutex};

use crate::routing::{Change, Derived, Explanation, MemberView, Outcome, Request, Selector};
use crate::Error;

/// What [`Preferring`] derives from a member list: the preferred members (their indices in
/// the list and their views), and what each inner selector derived from its list.
struct Sublist {
    /// The length of the whole list (a list of another length is not this one).
    len: usize,
    indices: Vec<usize>,
    views: Vec<MemberView>,
    all: Option<Derived>,
    preferred: Option<Derived>,
}

/// An algorithm's selector narrowed to the preferred members while one can take the call.
pub(crate) struct Preferring {
    all: Box<dyn Selector>,
    preferred: Box<dyn Selector>,
    /// The balancer's `max_in_flight_per_member`.
    cap: Option<usize>,
    /// The preferred members' ids of the last list (for the preferred selector's joined and
    /// left), and what was derived for the list being announced (taken by `derive`).
    writer: Mutex<Writer>,
}

#[derive(Default)]
struct Writer {
    last: Vec<Arc<str>>,
    pending: Option<(u64, Derived)>,
}

impl Preferring {
    pub(crate) fn new(
        all: Box<dyn Selector>,
        preferred: Box<dyn Selector>,
        cap: Option<usize>,
    ) -> Self {
        Self {
            all,
            preferred,
            cap,
            writer: Mutex::default(),
        }
    }

    /// Whether one of the preferred members `views` can take a call: there is one and, under
    /// a cap, one has fewer calls in flight than the cap.
    #[inline]
    fn can_take(&self, views: &[MemberView]) -> bool {
        match self.cap {
            None => !views.is_empty(),
            Some(cap) => views.iter().any(|v| v.in_flight() < cap),
        }
    }

    /// A pick over a list nothing was derived for (a re-selection that excludes members):
    /// the preferred sublist is found on the spot.
    #[cold]
    #[inline(never)]
    fn pick_uncached(
        &self,
        members: &[MemberView],
        request: &Request<'_>,
        again: bool,
    ) -> Result<usize, Error> {
        let request = Request::new(request.balancer, request.key, Request::UNCACHED);
        let indices: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].is_preferred())
            .collect();
        let views: Vec<MemberView> = indices.iter().map(|&i| members[i].clone()).collect();
        if self.can_take(&views) {
            let pick = if again {
                self.preferred.repick(&views, &request)?
            } else {
                self.preferred.pick(&views, &request)?
            };
            return Ok(indices.get(pick).copied().unwrap_or(members.len()));
        }
        if again {
            self.all.repick(members, &request)
        } else {
            self.all.pick(members, &request)
        }
    }
}

impl Selector for Preferring {
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        match request.derived_as::<Sublist>() {
            Some(sub) if sub.len == members.len() => {
                if self.can_take(&sub.views) {
                    let inner = Request {
                        derived: sub.preferred.as_ref(),
                        ..*request
                    };
                    let pick = self.preferred.pick(&sub.views, &inner)?;
                    // Out of range stays out of range: the balancer reports it.
                    return Ok(sub.indices.get(pick).copied().unwrap_or(members.len()));
                }
                let inner = Request {
                    derived: sub.all.as_ref(),
                    ..*request
                };
                self.all.pick(members, &inner)
            }
            _ => self.pick_uncached(members, request, false),
        }
    }

    /// The algorithms' re-selection, over the members left (a list that is no published
    /// one): preferred members while they can take calls, as [`pick`](Self::pick) does.
    fn repick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        self.pick_uncached(members, request, true)
    }

    fn pick_many(
        &self,
        members: &[MemberView],
        count: usize,
        request: &Request<'_>,
    ) -> Result<Vec<usize>, Error> {
        let mut inner = *request;
        inner.derived = match request.derived_as::<Sublist>() {
            Some(sub) if sub.len == members.len() => sub.all.as_ref(),
            _ => None,
        };
        self.all.pick_many(members, count, &inner)
    }

    fn members_changed(&self, change: &Change<'_>) {
        self.all.members_changed(change);
        let all = self.all.derive(change);
        let indices: Vec<usize> = (0..change.members.len())
            .filter(|&i| change.members[i].is_preferred())
            .collect();
        let views: Vec<MemberView> = indices.iter().map(|&i| change.members[i].clone()).collect();
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        // By member id, as `Change::joined` and `left` are.
        let now: Vec<Arc<str>> = views.iter().map(|v| Arc::clone(v.id_arc())).collect();
        let joined: Vec<Arc<str>> = now
            .iter()
            .filter(|n| !writer.last.contains(n))
            .cloned()
            .collect();
        let left: Vec<Arc<str>> = writer
            .last
            .iter()
            .filter(|n| !now.contains(n))
            .cloned()
            .collect();
        let sub_change = Change {
            balancer: change.balancer,
            joined: &joined,
            left: &left,
            members: &views,
            version: change.version,
        };
        self.preferred.members_changed(&sub_change);
        let preferred = self.preferred.derive(&sub_change);
        writer.last = now;
        let sublist = Sublist {
            len: change.members.len(),
            indices,
            views,
            all,
            preferred,
        };
        writer.pending = Some((change.version, Arc::new(sublist)));
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match writer.pending.take() {
            Some((version, derived)) if version == change.version => Some(derived),
            _ => None,
        }
    }

    fn released(&self, member: &MemberView) {
        self.all.released(member);
        self.preferred.released(member);
    }

    fn applies_slow_start(&self) -> bool {
        self.all.applies_slow_start()
    }

    fn learns(&self) -> bool {
        self.all.learns()
    }

    fn observes_cancelled(&self) -> bool {
        self.all.observes_cancelled()
    }

    fn observe(&self, outcome: &Outcome<'_>) {
        self.all.observe(outcome);
        self.preferred.observe(outcome);
    }

    fn explain(&self, members: &[MemberView], chosen: usize, request: &Request<'_>) -> Explanation {
        let mut inner = *request;
        inner.derived = match request.derived_as::<Sublist>() {
            Some(sub) if sub.len == members.len() => sub.all.as_ref(),
            _ => None,
        };
        let mut explanation = self.all.explain(members, chosen, &inner);
        let preferred = members.iter().filter(|m| m.is_preferred()).count();
        let zone = match members.get(chosen) {
            Some(m) if m.is_preferred() => "in this node's zone",
            _ => "outside this node's zone",
        };
        explanation.rule = format!(
            "locality ({preferred} of {} members in this node's zone; chosen {zone}): {}",
            members.len(),
            explanation.rule
        );
        explanation
    }
}
