//! Plain load data shared by the node's CPU cache ([`crate::cpu`]) and the routing core
//! ([`crate::routing`]): a CPU reading, the lock-free slot one node's reading lives in, and the
//! coarse monotonic clock slot times are on. A bottom leaf: it names no other module of the
//! crate, so both the cpu module (which fills slots) and the routing core (which reads them)
//! can use it.

pub(crate) mod clock;
mod report;

pub(crate) use report::{as_wire, ReportSlot, WireReport, MAX_WIRE_LEN};
pub use report::{LoadReport, ReportReading};

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// What a missing or stale reading counts as: 50 % (the original's rule). It is neutral only
/// among members near 50 %: when every member with a fresh reading is above
/// 50 + `cpu_threshold`, a member without one — a node just started, one whose sampler fails,
/// or one that hangs — gets the calls, until heartbeats drop a hung node
/// (`NodeConfig::heartbeat_timeout`, 3 s by default).
pub const NEUTRAL_CPU: f64 = 50.0;

/// One node's CPU reading as held or reported: utilisation in percent (0–100) and its age in
/// ms (time since the node's sampler took it, as of when this value was produced).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuReading {
    /// CPU utilisation, % (0–100), to 0.01.
    pub cpu: f64,
    /// Age of the sample, ms.
    pub age_ms: u64,
}

/// Bits of a packed slot word that hold the sample time (ms, 48 bits ≈ 8,900 years).
const TIME_BITS: u32 = 48;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

/// One node's latest reading: `cpu` in hundredths of a percent (high 16 bits) and the clock
/// ms at which it was sampled at its source (low 48 bits; 0 = no reading). Times are on the
/// clock of whoever writes and reads it: the process clock ([`clock::now_ms`]) on a node, a
/// manual clock's ms in the test kit or a simulator.
#[derive(Debug, Default)]
pub(crate) struct CpuSlot(AtomicU64);

impl CpuSlot {
    /// Stores `cpu` (%, clamped to 0–100) sampled `age_ms` before `now_ms`.
    pub(crate) fn store(&self, cpu: f64, age_ms: u64, now_ms: u64) {
        let hundredths = (cpu.clamp(0.0, 100.0) * 100.0).round() as u64;
        let at = now_ms.saturating_sub(age_ms).max(1) & TIME_MASK;
        self.0
            .store((hundredths << TIME_BITS) | at, Ordering::Release);
    }

    /// Forgets the reading.
    pub(crate) fn clear(&self) {
        self.0.store(0, Ordering::Release);
    }

    /// `(cpu %, sampled at ms)`, if there is a reading.
    #[inline]
    pub(crate) fn load(&self) -> Option<(f64, u64)> {
        let word = self.0.load(Ordering::Acquire);
        let at = word & TIME_MASK;
        if at == 0 {
            return None;
        }
        Some(((word >> TIME_BITS) as f64 / 100.0, at))
    }

    /// The reading's CPU if it is at most `ttl_ms` old at `now_ms` (inclusive), else `None`.
    #[inline]
    pub(crate) fn fresh(&self, now_ms: u64, ttl_ms: u64) -> Option<f64> {
        let (cpu, at) = self.load()?;
        (now_ms.saturating_sub(at) <= ttl_ms).then_some(cpu)
    }

    /// The reading with its age at `now_ms`.
    pub(crate) fn reading(&self, now_ms: u64) -> Option<CpuReading> {
        self.load().map(|(cpu, at)| CpuReading {
            cpu,
            age_ms: now_ms.saturating_sub(at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_packs_cpu_and_time_and_judges_freshness() {
        let slot = CpuSlot::default();
        assert_eq!(slot.load(), None);
        slot.store(42.567, 100, 1_000);
        assert_eq!(slot.load(), Some((42.57, 900)));
        assert_eq!(
            slot.fresh(1_900, 1_000),
            Some(42.57),
            "age 1,000 = ttl is fresh"
        );
        assert_eq!(slot.fresh(1_901, 1_000), None, "one ms older is stale");
        assert_eq!(
            slot.reading(1_000),
            Some(CpuReading {
                cpu: 42.57,
                age_ms: 100
            })
        );
        slot.store(150.0, 0, 5);
        assert_eq!(slot.load(), Some((100.0, 5)), "clamped to 100");
        slot.clear();
        assert_eq!(slot.load(), None);
    }
}
