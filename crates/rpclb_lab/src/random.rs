//! Random numbers: ChaCha8 streams (portable: the same seed gives the same numbers on any
//! machine) and the distributions of the model, with `libm` for the floating-point functions.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One independent stream of a run's random numbers. Each concern (arrivals, service times,
/// faults, keys) draws from its own stream, so changing the algorithm changes no arrival or
/// service time: every algorithm meets the same traffic under a seed (common random numbers).
pub(crate) struct Stream(ChaCha8Rng);

/// The streams of a run.
#[derive(Clone, Copy)]
#[repr(u64)]
pub(crate) enum StreamId {
    Arrivals = 1,
    Service = 2,
    Faults = 3,
    Keys = 4,
    Phases = 5,
}

impl Stream {
    /// Stream `id` of seed `seed`.
    pub(crate) fn new(seed: u64, id: StreamId) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(id as u64);
        Self(rng)
    }

    /// 64 uniform bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in (0, 1] (never 0, so its logarithm is finite).
    pub(crate) fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// `true` with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() <= p
    }

    /// Exponential with mean `mean`.
    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        -mean * libm::log(self.unit())
    }

    /// A standard normal (Box–Muller, one of the pair).
    pub(crate) fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        libm::sqrt(-2.0 * libm::log(u)) * libm::cos(std::f64::consts::TAU * v)
    }

    /// Lognormal with median `median` and shape `sigma`: `median · e^(σ·Z)`.
    pub(crate) fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * libm::exp(sigma * self.normal())
    }
}

/// Zipf's law over `n` keys with exponent `s`: key `k` (0-based) has weight `1 / (k+1)^s`.
/// A cumulative table (8 bytes a key) searched by bisection: O(log n) a draw.
pub(crate) struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    /// The table for `n ≥ 1` keys and `s ≥ 0`.
    pub(crate) fn new(n: u64, s: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|k| {
                total += 1.0 / libm::pow(k as f64, s);
                total
            })
            .collect();
        Self { cumulative }
    }

    /// A key drawn from `stream`.
    pub(crate) fn draw(&self, stream: &mut Stream) -> u64 {
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let target = stream.unit() * total;
        self.cumulative
            .partition_point(|&c| c < target)
            .min(self.cumulative.len().saturating_sub(1)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_numbers_and_streams_differ() {
        let a: Vec<u64> = {
            let mut s = Stream::new(7, StreamId::Service);
            (0..4).map(|_| s.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut s = Stream::new(7, StreamId::Service);
            (0..4).map(|_| s.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut s = Stream::new(7, StreamId::Arrivals);
            (0..4).map(|_| s.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn distributions_have_their_moments() {
        let mut s = Stream::new(1, StreamId::Service);
        let n = 200_000;
        let mean = (0..n).map(|_| s.exponential(2.0)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.03, "exponential mean {mean}");
        let mut draws: Vec<f64> = (0..n).map(|_| s.lognormal(1.0, 0.5)).collect();
        draws.sort_by(f64::total_cmp);
        let median = draws[n / 2];
        assert!((median - 1.0).abs() < 0.01, "lognormal median {median}");
        let zipf = Zipf::new(100, 1.0);
        let mut counts = [0u32; 100];
        for _ in 0..100_000 {
            counts[zipf.draw(&mut s) as usize] += 1;
        }
        // Key 0 weighs twice key 1 under s = 1.
        let ratio = f64::from(counts[0]) / f64::from(counts[1]);
        assert!((ratio - 2.0).abs() < 0.15, "zipf ratio {ratio}");
    }
}
