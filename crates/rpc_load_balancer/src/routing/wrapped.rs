//! What a selector wrapping an algorithm's selector (outlier ejection, slow start) keeps with
//! each member list: the algorithm's own derived value, and the wrapper's record of each
//! member by index.

use std::any::Any;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use super::{Derived, MemberView, Request};

/// A wrapper's derived value: the wrapped selector's, and one record per member.
pub(crate) struct Wrapped<T> {
    inner: Option<Derived>,
    records: Vec<T>,
}

impl<T: Any + Send + Sync> Wrapped<T> {
    /// The derived value of a list: the wrapped selector's `inner`, and `records` by index.
    pub(crate) fn derive(inner: Option<Derived>, records: Vec<T>) -> Option<Derived> {
        Some(Arc::new(Self { inner, records }))
    }

    /// The request the wrapped selector sees (with its own derived value), and the records
    /// by index when `request` is over a published list.
    #[inline]
    pub(crate) fn split<'a>(request: &Request<'a>) -> (Request<'a>, Option<&'a [T]>) {
        let wrapped = request.derived_as::<Self>();
        let mut inner = *request;
        inner.derived = wrapped.and_then(|w| w.inner.as_ref());
        (inner, wrapped.map(|w| &w.records[..]))
    }
}

/// `members[index]`'s record: by index from `records` when they were derived for this list,
/// else by node from `by_node` (a list that is no published one).
#[inline]
pub(crate) fn record<'a, T, S: BuildHasher>(
    members: &[MemberView],
    records: Option<&'a [T]>,
    by_node: &'a HashMap<Arc<str>, T, S>,
    index: usize,
) -> Option<&'a T> {
    match records {
        Some(list) if list.len() == members.len() => list.get(index),
        _ => by_node.get(members.get(index)?.id()),
    }
}
