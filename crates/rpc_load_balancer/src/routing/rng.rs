//! A selector's source of randomness: a thread-local generator (no shared state, so callers
//! on many threads never contend), or a seeded SplitMix64 sequence for exact tests and
//! simulations.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's increment (the golden ratio's odd 64-bit approximation).
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

thread_local! {
    /// This thread's SplitMix64 position; 0 = not seeded yet.
    static POSITION: Cell<u64> = const { Cell::new(0) };
}

/// 64 random bits from this thread's SplitMix64 sequence, seeded from `rand`'s thread-local
/// generator (itself seeded by the OS) at the thread's first draw: a few instructions per
/// draw, where `rand`'s generator costs about 90 per selection.
#[inline]
fn thread_u64() -> u64 {
    POSITION.with(|position| {
        let mut z = position.get();
        if z == 0 {
            z = seed();
        }
        position.set(z.wrapping_add(GAMMA));
        splitmix64(z)
    })
}

/// A thread's first position (never 0).
#[cold]
#[inline(never)]
fn seed() -> u64 {
    rand::random::<u64>() | 1
}

/// Where a selector's random numbers come from. Build it from
/// [`BuildContext::rng`](super::BuildContext::rng) so a test kit or simulator can seed it.
#[derive(Debug, Default)]
pub enum Rng {
    /// A thread-local generator: a SplitMix64 sequence per thread, seeded from `rand`'s
    /// thread-local generator (which the OS seeds) at the thread's first draw. Not for
    /// secrets; plenty for spreading load.
    #[default]
    Thread,
    /// SplitMix64 over a shared counter: reproducible, one atomic per draw.
    Seeded(AtomicU64),
}

impl Rng {
    /// A reproducible sequence from `seed`.
    pub fn seeded(seed: u64) -> Self {
        Rng::Seeded(AtomicU64::new(seed))
    }

    /// Seeded from `seed` when there is one, else the thread-local generator.
    pub fn from_seed(seed: Option<u64>) -> Self {
        seed.map_or(Rng::Thread, Rng::seeded)
    }

    /// A uniform number in `0..n`; 0 when `n` is 0.
    #[inline]
    pub fn below(&self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // Multiply-shift (Lemire): a bias of at most n / 2^64 — none that matters here.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// 64 uniform random bits.
    #[inline]
    pub fn next_u64(&self) -> u64 {
        match self {
            Rng::Thread => thread_u64(),
            Rng::Seeded(state) => splitmix64(state.fetch_add(GAMMA, Ordering::Relaxed)),
        }
    }

    /// `true` with probability `p` (0 or below: never; 1 or above: always, without a draw):
    /// one draw of 53 random bits, uniform in [0, 1), below `p`.
    #[inline]
    pub fn chance(&self, p: f64) -> bool {
        if p >= 1.0 {
            return true;
        }
        let draw = (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        draw < p
    }

    /// Whether the sequence is seeded (reproducible).
    pub fn is_seeded(&self) -> bool {
        matches!(self, Rng::Seeded(_))
    }

    /// `min(count, len)` distinct indices below `len`, uniformly at random (partial
    /// Fisher–Yates); allocates the result.
    pub fn distinct(&self, len: usize, count: usize) -> Vec<usize> {
        let mut indices: Vec<usize> = (0..len).collect();
        let take = count.min(len);
        for i in 0..take {
            let j = i + self.below(len - i);
            indices.swap(i, j);
        }
        indices.truncate(take);
        indices
    }
}

/// SplitMix64's output function (Steele, Lea, Flood: "Fast splittable pseudorandom number
/// generators", OOPSLA 2014).
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_generator_spreads_evenly_and_each_thread_has_its_own_sequence() {
        let mut counts = [0u32; 8];
        for _ in 0..80_000 {
            counts[Rng::Thread.below(8)] += 1;
        }
        // 10,000 expected per bucket; a standard deviation is about 94.
        assert!(
            counts.iter().all(|c| (9_500..=10_500).contains(c)),
            "{counts:?}"
        );
        let draws = || (0..4).map(|_| Rng::Thread.next_u64()).collect::<Vec<u64>>();
        let here = draws();
        let there = std::thread::spawn(draws).join().unwrap();
        assert_ne!(here, there, "two threads drew the same sequence");
        let distinct: std::collections::HashSet<_> = here.iter().collect();
        assert_eq!(distinct.len(), here.len(), "{here:?}");
    }

    #[test]
    fn seeded_sequences_repeat_and_stay_in_range() {
        let (a, b) = (Rng::seeded(9), Rng::seeded(9));
        let xs: Vec<usize> = (0..50).map(|_| a.below(7)).collect();
        let ys: Vec<usize> = (0..50).map(|_| b.below(7)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|x| *x < 7));
        assert_eq!(Rng::Thread.below(0), 0);
        let hits = (0..10_000).filter(|_| a.chance(0.25)).count();
        assert!((2_300..=2_700).contains(&hits), "{hits}");
        assert!((0..100).all(|_| a.chance(1.0) && !a.chance(0.0)));
        assert!(Rng::from_seed(Some(1)).is_seeded() && !Rng::from_seed(None).is_seeded());
        for count in 0..6 {
            let picked = a.distinct(4, count);
            assert_eq!(picked.len(), count.min(4));
            let distinct: std::collections::HashSet<_> = picked.iter().collect();
            assert_eq!(distinct.len(), picked.len());
            assert!(picked.iter().all(|&i| i < 4));
        }
    }
}
