//! A selector's source of randomness: a thread-local generator (no shared state, so callers
//! on many threads never contend), or a seeded SplitMix64 sequence for exact tests and
//! simulations.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng as _;

/// Where a selector's random numbers come from. Build it from
/// [`BuildContext::rng`](super::BuildContext::rng) so a test kit or simulator can seed it.
#[derive(Debug, Default)]
pub enum Rng {
    /// `rand`'s thread-local generator.
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
        match self {
            Rng::Thread => rand::rng().random_range(0..n),
            Rng::Seeded(_) => ((u128::from(self.next_u64()) * n as u128) >> 64) as usize,
        }
    }

    /// 64 uniform random bits.
    #[inline]
    pub fn next_u64(&self) -> u64 {
        match self {
            Rng::Thread => rand::rng().random::<u64>(),
            Rng::Seeded(state) => {
                splitmix64(state.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed))
            }
        }
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
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_sequences_repeat_and_stay_in_range() {
        let (a, b) = (Rng::seeded(9), Rng::seeded(9));
        let xs: Vec<usize> = (0..50).map(|_| a.below(7)).collect();
        let ys: Vec<usize> = (0..50).map(|_| b.below(7)).collect();
        assert_eq!(xs, ys);
        assert!(xs.iter().all(|x| *x < 7));
        assert_eq!(Rng::Thread.below(0), 0);
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
