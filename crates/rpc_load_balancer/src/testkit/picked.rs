//! [`Picked`]: one pick the kit holds until it is handed back.

use std::time::Duration;

use crate::routing::MemberView;

/// One pick the kit holds until it is [released](super::SelectorKit::release) or
/// [completed](super::SelectorKit::complete) (exactly once: it is not `Clone`). Unlike the balancer's
/// guard it does not release itself: a `Picked` that is dropped keeps its member counted in
/// flight, and the selector never hears of it — hand each one back to the kit that made it.
#[derive(Debug)]
#[must_use = "release or complete a pick"]
pub struct Picked {
    /// The member's index in the list it was picked from (the kit's members then).
    pub index: usize,
    pub(super) view: MemberView,
    pub(super) at: Duration,
    pub(super) counted: bool,
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
