//! The algorithms' source of randomness: a thread-local generator (no shared state, so callers
//! on many threads never contend), or a seeded SplitMix64 sequence for exact tests.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng as _;

/// Where an algorithm's random numbers come from.
#[derive(Debug, Default)]
pub(crate) enum Rng {
    /// `rand`'s thread-local generator.
    #[default]
    Thread,
    /// SplitMix64 over a shared counter: reproducible, one atomic per draw.
    Seeded(AtomicU64),
}

impl Rng {
    pub(crate) fn seeded(seed: u64) -> Self {
        Rng::Seeded(AtomicU64::new(seed))
    }

    /// A uniform number in `0..n` (`n` > 0).
    pub(crate) fn below(&self, n: usize) -> usize {
        match self {
            Rng::Thread => rand::rng().random_range(0..n),
            Rng::Seeded(state) => {
                let x = splitmix64(state.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed));
                ((u128::from(x) * n as u128) >> 64) as usize
            }
        }
    }

    /// 64 uniform random bits.
    pub(crate) fn next_u64(&self) -> u64 {
        match self {
            Rng::Thread => rand::rng().random::<u64>(),
            Rng::Seeded(state) => {
                splitmix64(state.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed))
            }
        }
    }

    pub(crate) fn is_seeded(&self) -> bool {
        matches!(self, Rng::Seeded(_))
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
