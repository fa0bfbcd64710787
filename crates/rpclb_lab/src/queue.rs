//! The event queue: a binary heap of events ordered by `(time, seq)`.
//!
//! Why our own and not a discrete-event crate (such as `nexosim`): the model has one kind of
//! actor per role and a handful of event kinds, all handled by one `match` in
//! [`crate::sim`]; a 40-line heap gives total order and determinism with no async runtime,
//! no model wiring and nothing to learn. The `seq` (a counter bumped per push) breaks ties
//! between events at the same nanosecond in the order they were scheduled, so a run never
//! depends on the heap's internal order: same seed, same event order, same report.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// An event due at `time` (virtual ns), scheduled as the `seq`-th event.
struct Entry<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

/// Events of type `E` in the order `(time, seq)`: earliest first, ties in scheduling order.
pub(crate) struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Schedules `event` at `time` (ns).
    pub(crate) fn push(&mut self, time: u64, event: E) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            time,
            seq: self.seq,
            event,
        }));
    }

    /// The time of the earliest event, if any.
    pub(crate) fn next_time(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(e)| e.time)
    }

    /// Removes and returns the earliest event with its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        self.heap.pop().map(|Reverse(e)| (e.time, e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_in_scheduling_order() {
        let mut queue = EventQueue::new();
        queue.push(5, "c");
        queue.push(1, "a");
        queue.push(5, "d");
        queue.push(1, "b");
        assert_eq!(queue.next_time(), Some(1));
        let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(order, [(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
    }
}
