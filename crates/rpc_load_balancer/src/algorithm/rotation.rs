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
    advance(counter, len, |taken| taken % len)
}

/// As [`next_position`] over `modulus.len()` positions, the residue taken without a
/// division (the same positions).
#[inline]
pub(crate) fn next_position_in(counter: &AtomicUsize, modulus: &Modulus) -> usize {
    advance(counter, modulus.len, |taken| modulus.residue(taken))
}

#[inline(always)]
fn advance(counter: &AtomicUsize, len: usize, residue: impl Fn(usize) -> usize) -> usize {
    let taken = counter.fetch_add(1, Ordering::Relaxed);
    let position = residue(taken);
    if taken >= REDUCE_FROM {
        reduce(counter, taken, position, len);
    }
    position
}

/// `x mod len` for a fixed `len` (≥ 1) by two multiplications instead of a division, exact
/// for every `x` below 2^32 (`x % len` above). Source: Lemire, Kaser and Kurz, "Faster
/// Remainder by Direct Computation" (Software: Practice and Experience, 2019).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Modulus {
    len: usize,
    /// ⌊(2^64 − 1) / len⌋ + 1 (mod 2^64), or 0 when `len` is not below 2^32 (never used then).
    magic: u64,
}

impl Modulus {
    /// The modulus `len` (≥ 1).
    pub(crate) fn new(len: usize) -> Self {
        let magic = match u32::try_from(len) {
            Ok(l) if l > 0 => (u64::MAX / u64::from(l)).wrapping_add(1),
            _ => 0,
        };
        Self { len, magic }
    }

    /// `x mod len`.
    #[inline]
    pub(crate) fn residue(&self, x: usize) -> usize {
        if self.magic != 0 && x <= u32::MAX as usize {
            let low = self.magic.wrapping_mul(x as u64);
            ((u128::from(low) * self.len as u128) >> 64) as usize
        } else {
            x % self.len
        }
    }
}

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
    fn the_modulus_without_division_is_exact() {
        let mut state = 7u64;
        for len in (1..=70).chain([255, 256, 1000, 4095, 65_537, u32::MAX as usize]) {
            let modulus = Modulus::new(len);
            let edges = [
                0,
                1,
                len - 1,
                len,
                len + 1,
                u32::MAX as usize - 1,
                u32::MAX as usize,
            ];
            for x in edges.into_iter().chain((0..200).map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                (state >> 32) as usize
            })) {
                assert_eq!(modulus.residue(x), x % len, "{x} mod {len}");
            }
            // Above 2^32: the division.
            let big = (1usize << 40) + 12_345;
            assert_eq!(modulus.residue(big), big % len);
        }
        // Positions as `next_position` gives them.
        let (a, b) = (
            AtomicUsize::new(usize::MAX - 5),
            AtomicUsize::new(usize::MAX - 5),
        );
        let modulus = Modulus::new(7);
        for _ in 0..20 {
            assert_eq!(next_position(&a, 7), next_position_in(&b, &modulus));
        }
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
