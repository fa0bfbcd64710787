//! [`LoadReport`]: the serving node's load as every reply carries it (what gRPC's ORCA per-call
//! reports carry, gRFC A51), its wire form (at most [`MAX_WIRE_LEN`] bytes), and the slot a
//! caller keeps the latest report of a member in ([`ReportSlot`]).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The serving node's load when it sent a reply, measured there.
///
/// Every reply to a call carries one (a field appended to the reply's status, see the wire
/// module): a caller keeps the latest per member ([`MemberView::report`]) and gives it to
/// learning selectors with the call's outcome ([`Outcome::report`]). Values are saturated to
/// what the wire holds: counts to 65,535 in flight and 2,097,151 calls per second, CPU to
/// 0.5 %, utilization to 0.001 up to 16.382.
///
/// [`MemberView::report`]: crate::routing::MemberView::report
/// [`Outcome::report`]: crate::routing::Outcome::report
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadReport {
    /// Calls of the balancer the call came through (all calls, for a direct call) running on
    /// the serving node as the reply left, that call not counted.
    pub in_flight: u32,
    /// Every call running on the serving node as the reply left, that call not counted.
    pub node_in_flight: u32,
    /// Calls the serving node finished in the last whole second (every function, every
    /// caller): its queries per second.
    pub qps: u32,
    /// Of those, the calls that did not return a value (the function's error, a panic, a
    /// deadline passed, a bad request): its errors per second.
    pub eps: u32,
    /// The serving node's CPU utilisation, % (0–100), from its sampler
    /// (`NodeConfig::cpu_sampler`); `None` while it has no sample.
    pub cpu: Option<f64>,
    /// The application utilization the serving node set
    /// ([`Node::set_application_utilization`](crate::Node::set_application_utilization)):
    /// a load figure of the service's own, 1.0 meaning fully used (it may exceed 1); `None`
    /// when unset.
    pub utilization: Option<f64>,
}

/// The most bytes a report takes on the wire.
pub(crate) const MAX_WIRE_LEN: usize = 16;

/// The largest count a report carries per second (a 3-byte varint).
const MAX_RATE: u32 = (1 << 21) - 1;
/// The largest utilization code (a 2-byte varint): 16.382 after the offset of one.
const MAX_UTILIZATION_CODE: u16 = (1 << 14) - 1;

/// The report as sent: counts saturated, CPU in half percent + 1 (0: none), utilization in
/// thousandths + 1 (0: none). Postcard varints: at most 3 + 3 + 3 + 3 + 1 + 2 = 15 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireReport(u16, u16, u32, u32, u8, u16);

/// Serde of a [`LoadReport`] as its wire form, for the control reply that carries one
/// (`#[serde(with = "as_wire")]`): a decoded report is saturated and clamped as a reply's is.
pub(crate) mod as_wire {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{LoadReport, WireReport};

    pub(crate) fn serialize<S: Serializer>(report: &LoadReport, s: S) -> Result<S::Ok, S::Error> {
        report.to_wire().serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LoadReport, D::Error> {
        WireReport::deserialize(d).map(LoadReport::from_wire)
    }
}

impl LoadReport {
    /// The report's wire form.
    pub(crate) fn to_wire(self) -> WireReport {
        let count = |n: u32| u16::try_from(n).unwrap_or(u16::MAX);
        WireReport(
            count(self.in_flight),
            count(self.node_in_flight),
            self.qps.min(MAX_RATE),
            self.eps.min(MAX_RATE),
            cpu_code(self.cpu),
            utilization_code(self.utilization),
        )
    }

    /// The report a wire form carries (codes out of range are clamped).
    pub(crate) fn from_wire(wire: WireReport) -> LoadReport {
        let WireReport(in_flight, node_in_flight, qps, eps, cpu, utilization) = wire;
        LoadReport {
            in_flight: u32::from(in_flight),
            node_in_flight: u32::from(node_in_flight),
            qps: qps.min(MAX_RATE),
            eps: eps.min(MAX_RATE).min(qps),
            cpu: cpu_of(cpu),
            utilization: utilization_of(utilization),
        }
    }
}

/// CPU % as its one-byte code: 0 for none, else 1 + half percents (0–100 % → 1–201).
fn cpu_code(cpu: Option<f64>) -> u8 {
    match cpu {
        Some(cpu) if cpu.is_finite() => 1 + (cpu.clamp(0.0, 100.0) * 2.0).round() as u8,
        _ => 0,
    }
}

fn cpu_of(code: u8) -> Option<f64> {
    (code != 0).then(|| f64::from(code.min(201) - 1) / 2.0)
}

/// Utilization as its code: 0 for none, else 1 + thousandths (saturating).
fn utilization_code(utilization: Option<f64>) -> u16 {
    match utilization {
        Some(u) if u.is_finite() => {
            let max = f64::from(MAX_UTILIZATION_CODE - 1);
            1 + (u.max(0.0) * 1000.0).round().min(max) as u16
        }
        _ => 0,
    }
}

fn utilization_of(code: u16) -> Option<f64> {
    (code != 0).then(|| f64::from(code.min(MAX_UTILIZATION_CODE) - 1) / 1000.0)
}

/// A member's latest report as a caller holds it, with its age.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportReading {
    /// The report.
    pub report: LoadReport,
    /// Time since it arrived, ms (on the clock it is read with).
    pub age_ms: u64,
}

/// One member's latest report, lock-free: two packed words and the arrival time (ms on the
/// reader's clock; 0 = none). Written by the reply that carried it, read by selectors; a
/// reader racing a writer may see the two words of different reports — estimates both.
#[derive(Debug, Default)]
pub(crate) struct ReportSlot {
    /// in_flight (16) | node_in_flight (16) | cpu code (8) | utilization code (16).
    counts: AtomicU64,
    /// qps (32) | eps (32).
    rates: AtomicU64,
    at_ms: AtomicU64,
}

impl ReportSlot {
    /// Keeps `report`, arrived at `now_ms` (> 0).
    pub(crate) fn store(&self, report: &LoadReport, now_ms: u64) {
        let WireReport(in_flight, node, qps, eps, cpu, utilization) = report.to_wire();
        let counts = u64::from(in_flight)
            | u64::from(node) << 16
            | u64::from(cpu) << 32
            | u64::from(utilization) << 40;
        self.counts.store(counts, Ordering::Relaxed);
        self.rates
            .store(u64::from(qps) | u64::from(eps) << 32, Ordering::Relaxed);
        self.at_ms.store(now_ms.max(1), Ordering::Release);
    }

    /// When the latest report arrived (ms), if one did.
    #[inline]
    pub(crate) fn at_ms(&self) -> Option<u64> {
        match self.at_ms.load(Ordering::Acquire) {
            0 => None,
            at => Some(at),
        }
    }

    /// The latest report with its age at `now_ms`.
    pub(crate) fn reading(&self, now_ms: u64) -> Option<ReportReading> {
        let at = self.at_ms()?;
        let counts = self.counts.load(Ordering::Relaxed);
        let rates = self.rates.load(Ordering::Relaxed);
        let wire = WireReport(
            counts as u16,
            (counts >> 16) as u16,
            rates as u32,
            (rates >> 32) as u32,
            (counts >> 32) as u8,
            (counts >> 40) as u16,
        );
        Some(ReportReading {
            report: LoadReport::from_wire(wire),
            age_ms: now_ms.saturating_sub(at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> LoadReport {
        LoadReport {
            in_flight: u32::MAX,
            node_in_flight: 70_000,
            qps: u32::MAX,
            eps: u32::MAX,
            cpu: Some(100.0),
            utilization: Some(1e9),
        }
    }

    #[test]
    fn the_largest_report_fits_in_sixteen_bytes() {
        let bytes = postcard::to_allocvec(&full().to_wire()).unwrap();
        assert!(bytes.len() <= MAX_WIRE_LEN, "{} bytes", bytes.len());
        let small = postcard::to_allocvec(&LoadReport::default().to_wire()).unwrap();
        assert_eq!(small.len(), 6, "an idle node's report: one byte a field");
    }

    #[test]
    fn values_round_trip_to_the_wire_resolution_and_saturate() {
        let report = LoadReport {
            in_flight: 12,
            node_in_flight: 40,
            qps: 9_000,
            eps: 30,
            cpu: Some(42.3),
            utilization: Some(0.8125),
        };
        let back = LoadReport::from_wire(report.to_wire());
        assert_eq!((back.in_flight, back.node_in_flight), (12, 40));
        assert_eq!((back.qps, back.eps), (9_000, 30));
        assert_eq!(back.cpu, Some(42.5));
        assert_eq!(back.utilization, Some(0.813));
        let top = LoadReport::from_wire(full().to_wire());
        assert_eq!((top.in_flight, top.node_in_flight), (65_535, 65_535));
        assert_eq!((top.qps, top.eps), (MAX_RATE, MAX_RATE));
        assert_eq!(top.cpu, Some(100.0));
        assert_eq!(top.utilization, Some(16.382));
        let none = LoadReport::from_wire(LoadReport::default().to_wire());
        assert_eq!((none.cpu, none.utilization), (None, None));
        let odd = LoadReport {
            cpu: Some(f64::NAN),
            utilization: Some(-3.0),
            ..LoadReport::default()
        };
        let odd = LoadReport::from_wire(odd.to_wire());
        assert_eq!((odd.cpu, odd.utilization), (None, Some(0.0)));
    }

    #[test]
    fn hostile_codes_decode_to_bounded_values() {
        let wire = WireReport(1, 2, u32::MAX, u32::MAX, u8::MAX, u16::MAX);
        let report = LoadReport::from_wire(wire);
        assert_eq!(report.cpu, Some(100.0));
        assert_eq!(report.utilization, Some(16.382));
        assert!(report.eps <= report.qps && report.qps == MAX_RATE);
    }

    #[test]
    fn a_slot_keeps_the_latest_report_and_its_age() {
        let slot = ReportSlot::default();
        assert_eq!(slot.reading(10), None);
        let report = LoadReport {
            in_flight: 3,
            node_in_flight: 5,
            qps: 100,
            eps: 2,
            cpu: Some(50.0),
            utilization: None,
        };
        slot.store(&report, 1_000);
        let reading = slot.reading(1_250).unwrap();
        assert_eq!(reading.report, report);
        assert_eq!(reading.age_ms, 250);
        assert_eq!(slot.at_ms(), Some(1_000));
    }
}
