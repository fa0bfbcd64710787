//! The deadlines of the calls a node waits on — replies from an endpoint or a member, runs in
//! this process — and of the calls it serves, in one table per node, watched by one sweep
//! task, instead of one tokio timer per call.
//!
//! A waiting call registers its deadline ([`Deadlines::timeout`]: a slot and a heap entry,
//! under one short lock) the first time it has to wait, and frees its slot when it ends. The
//! sweep task sleeps until the earliest deadline of a call still waiting, marks the calls whose
//! deadline has come and wakes them. It is woken only when a call registers a deadline earlier
//! than the one it sleeps until; with no call waiting it sleeps without a timer. A call times
//! out at its deadline within tokio's timer resolution (1 ms), as with `tokio::time::timeout`.
//! Entries of calls that ended stay in the heap until the sweep meets them, and the heap is
//! rebuilt when they outnumber the live ones four to one: memory follows the calls waiting.
//!
//! The sweep task runs on the runtime of the call that started it; if that runtime goes away
//! the next registration starts another.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

/// Heaps up to this many entries are never rebuilt (stale entries are few and cheap).
const COMPACT_FLOOR: usize = 1024;

/// The deadlines of the calls a node waits on (see the module docs).
pub(crate) struct Deadlines {
    shared: Arc<Shared>,
}

/// A call's deadline came before the future it waited on ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// What the calls and the sweep task share.
struct Shared {
    table: Mutex<Table>,
}

/// The registered deadlines.
#[derive(Default)]
struct Table {
    /// One per call waiting (or a free one, listed in `free`).
    slots: Vec<Slot>,
    /// The indexes of the free slots.
    free: Vec<u32>,
    /// The entries by deadline, earliest first; an entry whose slot moved on is stale.
    heap: BinaryHeap<Reverse<Entry>>,
    /// The deadline the sweep task sleeps until; `None`: it waits for a registration.
    armed: Option<Instant>,
    /// The sweep task's waker while it sleeps.
    sweeper: Option<Waker>,
    /// Whether a sweep task runs.
    running: bool,
    /// How many sweeps ran (tests).
    #[cfg(test)]
    sweeps: u64,
}

/// A deadline in the heap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    deadline: Instant,
    slot: u32,
    generation: u32,
}

/// One registered call.
#[derive(Default)]
struct Slot {
    /// Bumped when the slot is freed: entries and keys of an earlier generation are stale.
    generation: u32,
    state: State,
}

#[derive(Default)]
enum State {
    /// Free.
    #[default]
    Free,
    /// Waiting: wake this when its deadline comes.
    Waiting(Waker),
    /// Its deadline came.
    Passed,
}

/// A registered call's slot and generation.
#[derive(Debug, Clone, Copy)]
struct Key {
    slot: u32,
    generation: u32,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared {
                table: Mutex::new(Table::default()),
            }),
        }
    }
}

impl Drop for Deadlines {
    /// Ends the sweep task (it holds the table weakly).
    fn drop(&mut self) {
        if let Some(sweeper) = self.shared.lock().sweeper.take() {
            sweeper.wake();
        }
    }
}

impl Deadlines {
    /// `future`, ended with [`Elapsed`] at `deadline` if it has not ended by then. Must be
    /// polled on a tokio runtime (the sweep task is spawned on it).
    pub(crate) fn timeout<F: Future + Unpin>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Timeout<'_, F> {
        Timeout {
            deadlines: self,
            deadline,
            future,
            key: None,
        }
    }

    /// How many calls wait on a deadline (tests).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        let table = self.shared.lock();
        table.slots.len() - table.free.len()
    }

    /// Registers a call waiting until `deadline`, woken by `waker` when it comes.
    fn register(&self, deadline: Instant, waker: &Waker) -> Key {
        let mut table = self.shared.lock();
        let slot = match table.free.pop() {
            Some(slot) => slot,
            None => {
                table.slots.push(Slot::default());
                u32::try_from(table.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let entry = &mut table.slots[slot as usize];
        entry.state = State::Waiting(waker.clone());
        let key = Key {
            slot,
            generation: entry.generation,
        };
        table.heap.push(Reverse(Entry {
            deadline,
            slot,
            generation: key.generation,
        }));
        table.compact();
        if table.armed.is_none_or(|armed| deadline < armed) {
            // The sweep task must look again: it sleeps past this deadline, or not at all.
            table.armed = Some(deadline);
            if !table.running {
                table.running = true;
                drop(table);
                self.start_sweeping();
            } else if let Some(sweeper) = table.sweeper.take() {
                drop(table);
                sweeper.wake();
            }
        }
        key
    }

    /// Whether `key`'s deadline came; if not, it will wake `waker`.
    fn passed(&self, key: Key, waker: &Waker) -> bool {
        let mut table = self.shared.lock();
        let Some(slot) = table.slot(key) else {
            return true;
        };
        match &mut slot.state {
            State::Waiting(registered) => {
                if !registered.will_wake(waker) {
                    *registered = waker.clone();
                }
                false
            }
            State::Passed | State::Free => true,
        }
    }

    /// Frees `key`'s slot (its heap entry is now stale).
    fn unregister(&self, key: Key) {
        let mut table = self.shared.lock();
        if let Some(slot) = table.slot(key) {
            slot.generation = slot.generation.wrapping_add(1);
            let state = std::mem::take(&mut slot.state);
            table.free.push(key.slot);
            drop(table);
            drop(state);
        }
    }

    /// Spawns the sweep task on the current runtime (none outside one: nothing times out).
    fn start_sweeping(&self) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(sweep(Arc::downgrade(&self.shared)));
            }
            Err(_) => {
                // Not started: the next registration (on a runtime) tries again.
                let mut table = self.shared.lock();
                table.running = false;
                table.armed = None;
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks and wakes the calls whose deadline is at or before `now`, drops stale entries
    /// met on the way, and keeps `waker` as the sweep task's: the earliest deadline still to
    /// come, if any.
    fn sweep(&self, now: Instant, waker: &Waker) -> Option<Instant> {
        let mut table = self.lock();
        #[cfg(test)]
        {
            table.sweeps += 1;
        }
        let next = loop {
            let Some(&Reverse(top)) = table.heap.peek() else {
                break None;
            };
            let key = Key {
                slot: top.slot,
                generation: top.generation,
            };
            let Some(slot) = table.slot(key) else {
                table.heap.pop();
                continue;
            };
            if top.deadline > now {
                break Some(top.deadline);
            }
            if let State::Waiting(call) = std::mem::replace(&mut slot.state, State::Passed) {
                call.wake();
            }
            table.heap.pop();
        };
        table.armed = next;
        match &mut table.sweeper {
            Some(kept) if kept.will_wake(waker) => {}
            kept => *kept = Some(waker.clone()),
        }
        next
    }
}

impl Table {
    /// The slot of `key`, unless it was freed since.
    fn slot(&mut self, key: Key) -> Option<&mut Slot> {
        self.slots
            .get_mut(key.slot as usize)
            .filter(|slot| slot.generation == key.generation && !matches!(slot.state, State::Free))
    }

    /// Drops the stale entries once they outnumber the live ones four to one.
    fn compact(&mut self) {
        let live = self.slots.len() - self.free.len();
        if self.heap.len() > COMPACT_FLOOR && self.heap.len() > 4 * live {
            let slots = &self.slots;
            self.heap.retain(|Reverse(entry)| {
                slots.get(entry.slot as usize).is_some_and(|slot| {
                    slot.generation == entry.generation && !matches!(slot.state, State::Free)
                })
            });
        }
    }
}

/// The sweep task: sleeps until the earliest deadline, wakes the calls whose deadline came,
/// and ends once the table is gone.
async fn sweep(shared: Weak<Shared>) {
    let _stopped = Stopped(shared.clone());
    let mut sleep = Box::pin(tokio::time::sleep_until(Instant::now()));
    let mut armed: Option<Instant> = None;
    // The deadline the timer reached: the sweep counts it as come even if the clock,
    // read after, says a hair less.
    let mut reached: Option<Instant> = None;
    std::future::poll_fn(|cx| loop {
        let Some(table) = shared.upgrade() else {
            return Poll::Ready(());
        };
        let now = Instant::now();
        let now = reached.take().map_or(now, |at| now.max(at));
        let next = table.sweep(now, cx.waker());
        drop(table);
        let Some(at) = next else {
            return Poll::Pending;
        };
        if armed != Some(at) {
            sleep.as_mut().reset(at);
            armed = Some(at);
        }
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        reached = Some(at);
    })
    .await;
}

/// Marks the sweep task as gone when it ends or its runtime drops it.
struct Stopped(Weak<Shared>);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            let mut table = shared.lock();
            table.running = false;
            table.armed = None;
            table.sweeper = None;
        }
    }
}

/// A future with a deadline, made by [`Deadlines::timeout`]: its output, or [`Elapsed`].
pub(crate) struct Timeout<'d, F> {
    deadlines: &'d Deadlines,
    deadline: Instant,
    future: F,
    /// Registered once the future has had to wait.
    key: Option<Key>,
}

impl<F: Future + Unpin> Future for Timeout<'_, F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(output) = Pin::new(&mut this.future).poll(cx) {
            this.unregister();
            return Poll::Ready(Ok(output));
        }
        match this.key {
            None => {
                this.key = Some(this.deadlines.register(this.deadline, cx.waker()));
                Poll::Pending
            }
            Some(key) if this.deadlines.passed(key, cx.waker()) => {
                this.unregister();
                Poll::Ready(Err(Elapsed))
            }
            Some(_) => Poll::Pending,
        }
    }
}

impl<F> Timeout<'_, F> {
    /// Frees its slot, if it has one: it has ended, or is dropped.
    fn unregister(&mut self) {
        if let Some(key) = self.key.take() {
            self.deadlines.unregister(key);
        }
    }
}

impl<F> Drop for Timeout<'_, F> {
    fn drop(&mut self) {
        self.unregister();
    }
}

#[cfg(test)]
mod tests;
