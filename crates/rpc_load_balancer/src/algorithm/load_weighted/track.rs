//! What [`LoadWeighted`](super::LoadWeighted) keeps of one member between recomputations:
//! its weight from its latest non-empty report, since when its reports are non-empty (the
//! blackout), when the latest arrived (the expiry), and the weight its picks use.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::schedule::MAX_SCALED;
use super::Options;
use crate::routing::{LoadReport, MemberView};

/// How much of a member's weight a new report's weight makes (the rest: the weight before
/// it). A report's qps covers the node's last whole second and its CPU the sampler's last
/// interval, at another phase: when a member's share changed between the two windows, one
/// report's weight is off by about the change, and taken whole it makes the next change —
/// shares that swing every second instead of settling (in the lab's `uneven-capacity`, closed
/// loop: 15–30 % off in 4 of 10 seeds). Half damps that to nothing within a few periods.
pub(super) const NEW_REPORT_SHARE: f64 = 0.5;

/// A member's weight from `report`: qps / (utilization + eps / qps × `penalty`), where
/// utilization is the application utilization when set and above 0, else CPU ÷ 100; `None`
/// for an empty report (qps or utilization 0 or missing), which teaches nothing.
pub(super) fn weight_of(report: &LoadReport, penalty: f64) -> Option<f64> {
    let utilization = match report.utilization {
        Some(u) if u > 0.0 => u,
        _ => report.cpu? / 100.0,
    };
    if report.qps == 0 || utilization.is_nan() || utilization <= 0.0 {
        return None;
    }
    let qps = f64::from(report.qps);
    let errors = f64::from(report.eps.min(report.qps)) / qps * penalty;
    let weight = qps / (utilization + errors);
    (weight.is_finite() && weight > 0.0).then_some(weight)
}

/// Where a member's weight stands at a time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Standing {
    /// Its weight counts.
    Usable(f64),
    /// No non-empty report yet.
    NoReport,
    /// Its first non-empty report is younger than the blackout: usable in `left_ms`.
    Blackout { left_ms: u64 },
    /// No non-empty report within the expiry; the blackout starts again with the next.
    Expired,
}

impl Standing {
    /// The weight, if usable.
    pub(super) fn usable(self) -> Option<f64> {
        match self {
            Standing::Usable(weight) => Some(weight),
            _ => None,
        }
    }
}

impl std::fmt::Display for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Standing::Usable(weight) => write!(f, "usable {weight:.3}"),
            Standing::NoReport => f.write_str("unknown (no report with qps and utilization)"),
            Standing::Blackout { left_ms } => {
                write!(f, "unknown (blackout, usable in {left_ms} ms)")
            }
            Standing::Expired => f.write_str("unknown (expired: no report within the expiry)"),
        }
    }
}

/// One member's record (times in ms on the selector's clock, 0 = never; weights as `f64`
/// bits). Written by the recomputation (one at a time), read by picks and explanations.
#[derive(Debug)]
pub(super) struct Track {
    /// When the latest report looked at arrived.
    seen_at_ms: AtomicU64,
    /// The weight its latest non-empty report gave, and when that report arrived.
    weight: AtomicU64,
    updated_at_ms: AtomicU64,
    /// When its first non-empty report (since it joined or its weight expired) arrived.
    non_empty_since_ms: AtomicU64,
    /// The weight its picks use (after the mean and the clamp; before slow start's factor).
    in_use: AtomicU64,
    /// `in_use` × the member's slow-start factor, scaled so the heaviest member of the list
    /// has [`MAX_SCALED`]: what the stride schedule reads.
    scaled: AtomicU32,
}

impl Default for Track {
    fn default() -> Self {
        Self {
            seen_at_ms: AtomicU64::new(0),
            weight: AtomicU64::new(0),
            updated_at_ms: AtomicU64::new(0),
            non_empty_since_ms: AtomicU64::new(0),
            in_use: AtomicU64::new(1.0f64.to_bits()),
            // Until a recomputation: as heavy as any (round robin).
            scaled: AtomicU32::new(MAX_SCALED),
        }
    }
}

impl Track {
    /// Takes in `member`'s latest report if it is new, drops a weight past its expiry, and
    /// says where the weight stands at `now_ms`.
    pub(super) fn refresh(&self, member: &MemberView, now_ms: u64, options: &Options) -> Standing {
        if let Some(reading) = member.report(now_ms) {
            let at = now_ms.saturating_sub(reading.age_ms).max(1);
            if self.seen_at_ms.swap(at, Ordering::Relaxed) != at {
                if let Some(weight) = weight_of(&reading.report, options.penalty) {
                    // Averaged with the weight before, unless that one expired (see
                    // `NEW_REPORT_SHARE`).
                    let before = f64::from_bits(self.weight.load(Ordering::Relaxed));
                    let weight =
                        if before > 0.0 && self.non_empty_since_ms.load(Ordering::Relaxed) != 0 {
                            before + NEW_REPORT_SHARE * (weight - before)
                        } else {
                            weight
                        };
                    self.weight.store(weight.to_bits(), Ordering::Relaxed);
                    self.updated_at_ms.store(at, Ordering::Relaxed);
                    if self.non_empty_since_ms.load(Ordering::Relaxed) == 0 {
                        self.non_empty_since_ms.store(at, Ordering::Relaxed);
                    }
                }
            }
        }
        let standing = self.standing(now_ms, options);
        if standing == Standing::Expired {
            self.non_empty_since_ms.store(0, Ordering::Relaxed);
        }
        standing
    }

    /// Where the weight stands at `now_ms` (changes nothing).
    pub(super) fn standing(&self, now_ms: u64, options: &Options) -> Standing {
        let updated = self.updated_at_ms.load(Ordering::Relaxed);
        if updated == 0 {
            return Standing::NoReport;
        }
        let since = self.non_empty_since_ms.load(Ordering::Relaxed);
        if since == 0 || now_ms.saturating_sub(updated) >= options.expiration_ms {
            return Standing::Expired;
        }
        let age = now_ms.saturating_sub(since);
        if age < options.blackout_ms {
            return Standing::Blackout {
                left_ms: options.blackout_ms - age,
            };
        }
        Standing::Usable(f64::from_bits(self.weight.load(Ordering::Relaxed)))
    }

    /// Sets the weight picks use (before slow start's factor).
    pub(super) fn set_in_use(&self, weight: f64) {
        self.in_use.store(weight.to_bits(), Ordering::Relaxed);
    }

    /// Sets the scaled weight the stride schedule reads (the weight in use × the member's
    /// slow-start factor, scaled).
    pub(super) fn set_scaled(&self, scaled: u32) {
        self.scaled.store(scaled, Ordering::Relaxed);
    }

    /// The weight picks use (before slow start's factor).
    pub(super) fn in_use(&self) -> f64 {
        f64::from_bits(self.in_use.load(Ordering::Relaxed))
    }

    /// The scaled weight the stride schedule reads (1 ..= [`MAX_SCALED`]).
    #[inline]
    pub(super) fn scaled(&self) -> u32 {
        self.scaled.load(Ordering::Relaxed)
    }
}
