//! The event queue: a binary heap of events ordered by `(time, seq)`.
//!
//! Why our own and not a discrete-event crate (such as `nexosim`): the model has one kind of
//! actor per role and a handful of event kinds, all handled by one `match` in
//! [`crate::sim`]; a 40-line heap gives total order and determinism with no async runtime,
//! no model wiring and nothing to learn. The `seq` (a counter bumped per push) breaks ties
//! between events at the same nanosecond in the order they were scheduled, so a run never
//! depends on the heap's internal order: same seed, same event order, same report.
//!
//! Events that come in time order — the simulator schedules every network hop at now + the
//! scenario's fixed delay — skip the heap: [`EventQueue::push_in_order`] appends them to a
//! FIFO, and [`EventQueue::pop`] takes the earlier of its front and the heap's top by the
//! same `(time, seq)`, `seq` counted over both. The order is the heap's alone would give;
//! two of a call's three events cost a push and a pop on a deque instead of a heap.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

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
    /// Events pushed in `(time, seq)` order ([`EventQueue::push_in_order`]).
    fifo: VecDeque<Entry<E>>,
    seq: u64,
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            fifo: VecDeque::new(),
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

    /// Schedules `event` at `time` (ns), no earlier than any event pushed so far with this
    /// method (e.g. now + a fixed delay, as time goes on): it waits in a FIFO, not the heap,
    /// and comes out in the same order as [`push`](Self::push) would give it.
    pub(crate) fn push_in_order(&mut self, time: u64, event: E) {
        debug_assert!(self.fifo.back().is_none_or(|last| last.time <= time));
        self.seq += 1;
        self.fifo.push_back(Entry {
            time,
            seq: self.seq,
            event,
        });
    }

    /// Whether the FIFO's front comes before the heap's top.
    fn fifo_first(&self) -> Option<bool> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(Reverse(h))) => Some(f < h),
            (Some(_), None) => Some(true),
            (None, Some(_)) => Some(false),
            (None, None) => None,
        }
    }

    /// The time of the earliest event, if any.
    pub(crate) fn next_time(&self) -> Option<u64> {
        match self.fifo_first()? {
            true => self.fifo.front().map(|e| e.time),
            false => self.heap.peek().map(|Reverse(e)| e.time),
        }
    }

    /// Removes and returns the earliest event with its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        let entry = match self.fifo_first()? {
            true => self.fifo.pop_front(),
            false => self.heap.pop().map(|Reverse(e)| e),
        };
        entry.map(|e| (e.time, e.event))
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

    #[test]
    fn in_order_events_interleave_with_the_heaps_by_time_then_scheduling_order() {
        let mut queue = EventQueue::new();
        queue.push(5, "d");
        queue.push_in_order(1, "a");
        queue.push(1, "b");
        queue.push_in_order(5, "e");
        queue.push(3, "c");
        queue.push_in_order(6, "g");
        queue.push(5, "f");
        assert_eq!(queue.next_time(), Some(1));
        let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(
            order,
            [
                (1, "a"),
                (1, "b"),
                (3, "c"),
                (5, "d"),
                (5, "e"),
                (5, "f"),
                (6, "g")
            ]
        );
        assert_eq!(queue.next_time(), None);
    }
}
