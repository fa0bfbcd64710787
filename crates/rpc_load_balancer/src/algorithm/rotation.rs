//! A rotation position shared by concurrent selections: one `fetch_add` per pick, and no
//! skip or repeat when the counter would wrap.
//!
//! A position counter read as `counter % len` stays in turn only while the counter does not
//! wrap: at `usize::MAX + 1 = 0`, the position jumps from `usize::MAX % len` to 0, which skips
//! or repeats a member unless `len` divides 2^64 (so `…c, a, a, b…` over three members).
//! Rather than widen the counter, a pick that takes a value in the counter's upper half
//! ([`REDUCE_FROM`]) tries once to put the counter back to the same position modulo `len`
//! (a `compare_exchange` from the value it left to that value's residue): the positions that
//! follow are the same, and the counter is back near 0, 2^63 picks from any wrap. The attempt
//! fails only when another pick came in between; that pick (also in the upper half) tries in
//! turn, so the counter is reduced within a few picks of crossing into the upper half — long
//! before it could wrap. Picks below the upper half pay one comparison.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Counter values from which a pick reduces the counter (the upper half).
const REDUCE_FROM: usize = usize::MAX / 2 + 1;

/// The next position in `0..len` (`len` > 0) taken from `counter`: consecutive picks give
/// consecutive positions modulo `len`, whatever the counter's value, across its wrap too.
#[inline]
pub(crate) fn next_position(counter: &AtomicUsize, len: usize) -> usize {
    let taken = counter.fetch_add(1, Ordering::Relaxed);
    let position = taken % len;
    if taken >= REDUCE_FROM {
        reduce(counter, taken, position, len);
    }
    position
}

/// Puts `counter` back from `taken + 1` (what this pick left, if no pick came since) to the
/// next position's residue: the same position modulo `len`, near 0.
#[cold]
#[inline(never)]
fn reduce(counter: &AtomicUsize, taken: usize, position: usize, len: usize) {
    let next = (position + 1) % len;
    let _ = counter.compare_exchange(
        taken.wrapping_add(1),
        next,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_members_across_the_wrap_stay_in_turn() {
        let counter = AtomicUsize::new(usize::MAX - 5);
        let picks: Vec<usize> = (0..12).map(|_| next_position(&counter, 3)).collect();
        // From (usize::MAX - 5) % 3 on, in turn: no skip or repeat (`…c, a, a, b…` before).
        let first = (usize::MAX - 5) % 3;
        let expected: Vec<usize> = (0..12).map(|i| (first + i) % 3).collect();
        assert_eq!(picks, expected);
        assert!(counter.load(Ordering::Relaxed) < 3 + 12, "reduced near 0");
    }

    #[test]
    fn a_pick_at_the_last_value_still_continues_in_turn() {
        // The reduction of the pick before was lost (another pick came in between): the pick
        // that takes usize::MAX leaves 0 behind, and corrects it to the next residue.
        let counter = AtomicUsize::new(usize::MAX);
        let first = next_position(&counter, 7);
        let second = next_position(&counter, 7);
        assert_eq!(first, usize::MAX % 7);
        assert_eq!(second, (first + 1) % 7);
    }

    #[test]
    fn the_lower_half_is_left_alone() {
        let counter = AtomicUsize::new(41);
        assert_eq!(next_position(&counter, 5), 1);
        assert_eq!(counter.load(Ordering::Relaxed), 42);
    }

    #[test]
    fn concurrent_picks_across_the_wrap_take_every_position_equally() {
        // 4 threads × 1750 picks from just below the wrap over 7 positions: 7,000 consecutive
        // positions, so each exactly 1,000 times; a skip or repeat at the wrap (2^64 is not a
        // multiple of 7) would break that.
        let counter = AtomicUsize::new(usize::MAX - 100);
        let counts: Vec<[usize; 7]> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut counts = [0usize; 7];
                        for _ in 0..1750 {
                            counts[next_position(&counter, 7)] += 1;
                        }
                        counts
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut total = [0usize; 7];
        for c in counts {
            for (t, n) in total.iter_mut().zip(c) {
                *t += n;
            }
        }
        assert_eq!(total, [1000; 7]);
    }
}
