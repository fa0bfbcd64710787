//! [`PerList`]: what a selector derived from its latest member list, read lock-free.

use arc_swap::ArcSwapOption;

use super::Request;

/// A one-slot holder of what a selector derives from its latest member list (a weighted
/// schedule, a hash ring, ...), keyed by that list's [`version`](super::Change::version).
///
/// [`store`](Self::store) it from [`Selector::members_changed`](super::Selector::members_changed)
/// (one writer, before the list is published); read it from
/// [`pick`](super::Selector::pick) with [`with`](Self::with), which hands over the value only
/// when the request's list is the one it was derived from — a list that is not (a
/// re-selection that excludes members, [`Request::UNCACHED`]) gets `None`, and the selector
/// derives what it needs on the spot. A read is one lock-free load: no reference count
/// written, no allocation.
pub struct PerList<T> {
    slot: ArcSwapOption<Entry<T>>,
}

struct Entry<T> {
    version: u64,
    value: T,
}

impl<T> Default for PerList<T> {
    fn default() -> Self {
        Self {
            slot: ArcSwapOption::empty(),
        }
    }
}

impl<T> std::fmt::Debug for PerList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let version = self.slot.load().as_ref().map(|e| e.version);
        f.debug_struct("PerList")
            .field("version", &version)
            .finish()
    }
}

impl<T> PerList<T> {
    /// Empty: nothing derived yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the value derived from list `version`, or on `None` when the value held is
    /// of another list (or there is none, or `version` is [`Request::UNCACHED`]).
    #[inline]
    pub fn with<R>(&self, version: u64, f: impl FnOnce(Option<&T>) -> R) -> R {
        if version == Request::UNCACHED {
            return f(None);
        }
        let entry = self.slot.load();
        match entry.as_deref() {
            Some(entry) if entry.version == version => f(Some(&entry.value)),
            _ => f(None),
        }
    }

    /// Runs `f` on the latest value, whatever its list (e.g. to carry a position over to the
    /// next list).
    pub fn latest<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.slot.load().as_deref().map(|entry| f(&entry.value))
    }

    /// Holds `value`, derived from list `version`, in place of the previous one.
    pub fn store(&self, version: u64, value: T) {
        self.slot
            .store(Some(std::sync::Arc::new(Entry { version, value })));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_list_it_was_derived_from_reads_it() {
        let held = PerList::new();
        assert_eq!(held.with(1, |v| v.copied()), None);
        assert_eq!(held.latest(|v: &u32| *v), None);
        held.store(1, 10u32);
        assert_eq!(held.with(1, |v| v.copied()), Some(10));
        assert_eq!(held.with(2, |v| v.copied()), None);
        assert_eq!(held.with(Request::UNCACHED, |v| v.copied()), None);
        held.store(2, 20);
        assert_eq!(held.with(1, |v| v.copied()), None);
        assert_eq!(held.with(2, |v| v.copied()), Some(20));
        assert_eq!(held.latest(|v| *v), Some(20));
        assert!(format!("{held:?}").contains('2'));
    }
}
