//! What a run takes from a scenario: its loads, the capacity the open-loop fractions are
//! of, and whether its cluster changes.

use serde::{Deserialize, Serialize};

use super::{Action, Scenario};

impl Scenario {
    /// Members present at the start (those with no `join` event).
    pub fn initial_members(&self) -> usize {
        (0..self.members)
            .filter(|m| {
                !self
                    .event
                    .iter()
                    .any(|e| e.member == *m && e.action == Action::Join)
            })
            .count()
    }

    /// The capacity of a uniform cluster of the members present at the start, calls/s:
    /// members × capacity ÷ mean service time (the base of the open-loop fractions).
    pub fn uniform_capacity_per_s(&self) -> f64 {
        self.initial_members() as f64 * f64::from(self.capacity) / (self.service.mean_ms() / 1e3)
    }

    /// Whether the cluster changes during the run (events): its reports then carry shares
    /// per time bucket.
    pub fn changes(&self) -> bool {
        !self.event.is_empty()
    }

    /// Its deterministic subsetting (`subset`, `subset_scheme`), or `None`: every caller
    /// balances over every member.
    pub fn subsetting(&self) -> Option<rpc_load_balancer::routing::Subsetting> {
        self.subset.map(|size| {
            rpc_load_balancer::routing::Subsetting::with(
                self.subset_scheme.unwrap_or_default().library(),
                size,
            )
        })
    }

    /// The loads to run, in order: each open-loop fraction, then the closed loop.
    pub fn loads(&self) -> Vec<LoadPoint> {
        let mut loads: Vec<LoadPoint> = self
            .load
            .open_loop
            .iter()
            .map(|&fraction| LoadPoint::Open { fraction })
            .collect();
        if let Some(tasks) = self.load.closed_loop_tasks {
            loads.push(LoadPoint::Closed { tasks });
        }
        loads
    }
}

/// One load a scenario runs under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum LoadPoint {
    /// Poisson arrivals at `fraction` of [`Scenario::uniform_capacity_per_s`].
    Open {
        /// The fraction (0.5 = 50 %).
        fraction: f64,
    },
    /// `tasks` tasks, each one call at a time.
    Closed {
        /// How many.
        tasks: usize,
    },
}

impl LoadPoint {
    /// A short label: `open 50%`, `closed 16`.
    pub fn label(&self) -> String {
        match self {
            LoadPoint::Open { fraction } => format!("open {}%", libm::round(fraction * 100.0)),
            LoadPoint::Closed { tasks } => format!("closed {tasks}"),
        }
    }
}
