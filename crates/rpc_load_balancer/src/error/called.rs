//! How an error's message names what was called: a balancer, or an actor group (whose
//! `balancer` field is `"{scope}/{group}"`; a balancer's name never holds a `/`).

use std::fmt;

/// Displays `balancer {name}` for a balancer, `actor group {scope}/{group}` for an actor
/// group.
pub(super) struct Called<'a>(pub(super) &'a str);

impl fmt::Display for Called<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.contains('/') {
            write!(f, "actor group {}", self.0)
        } else {
            write!(f, "balancer {}", self.0)
        }
    }
}
