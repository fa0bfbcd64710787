//! Names of wrapped algorithms (`round_robin+slow_start`) as `&'static str`, as
//! [`Algorithm::name`](super::Algorithm::name) returns them.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

/// `name` as a `&'static str`, leaked once per distinct name (names are few: one per
/// algorithm wrapped), however often it is asked for.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_name_is_leaked_once() {
        let a = super::intern("x+slow_start");
        let b = super::intern(&format!("x{}", "+slow_start"));
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "x+slow_start");
    }
}
