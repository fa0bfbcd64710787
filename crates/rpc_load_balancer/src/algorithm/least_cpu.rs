//! LeastCpu: a member among the least CPU-loaded, by readings polled in the background.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use crossbeam_utils::CachePadded;

use self::track::{Base, ByNode, Track, Tracks};
use crate::load::NEUTRAL_CPU;
use crate::routing::{
    Algorithm, BuildContext, Change, Clock, CpuPolling, Derived, Explanation, MemberView, Needs,
    Request, Rng, Selector,
};
use crate::Error;

mod track;

/// Most members whose values one selection keeps on the stack; larger pools read twice.
const STACK_MEMBERS: usize = 64;

/// Picks uniformly at random among the members whose CPU utilisation is within
/// `cpu_threshold` percentage points of the least loaded one (the original's LeastCpu; the
/// random band keeps callers from herding onto one "coldest" node between polls), each
/// member's reading projected by this caller's picks since it changed.
///
/// Readings come from each node's own [`CpuSampler`](crate::cpu::CpuSampler): every reply
/// reports its node's ([load reports](crate::LoadReport)), and this balancer's Poller (an
/// actor its supervisor runs and restarts alone, because this algorithm
/// [needs](crate::routing::Needs::cpu) CPU readings) fetches the others every
/// `poll_interval` into the process-wide cache (see [`crate::cpu`]); the balancer gives each
/// member view its node's reading ([`MemberView::cpu`]). Selection does no I/O, takes no lock
/// and allocates nothing up to 64 members. One member is picked without reading anything.
///
/// A member's value starts from its reading if it is at most `cpu_cache_ttl` old at its
/// source; from the median of the fresh readings (the lower middle one) for a member never
/// read (50 % when no member has a reading, [`NEUTRAL_CPU`](crate::cpu::NEUTRAL_CPU)); from
/// 50 %, or the old reading when higher, for one whose reading aged out. It is then
/// **projected**: a reading is the node's CPU over its last sampling interval, late by up to
/// that interval, and every caller reads the same values — the original's rule sends them
/// all to the least loaded member until its next reading shows the herd (old load
/// information makes herds: M. Mitzenmacher, "How Useful Is Old Information?", IEEE TPDS
/// 11(1), 2000). So the value is the reading × this caller's picks of the member over the
/// last period ÷ its picks in the period the reading was taken in (both plus one; a reading
/// under 5 % scales as 5 %), taking this caller's change of rate for every caller's (they read
/// the same values); it falls at most 2 × `cpu_threshold` below the reading (a node loaded by
/// another process is not relieved by fewer calls; a reading from 99.5 % up does not fall),
/// and a stale member's only rises. A member never read counts its picks against an even
/// share of this caller's picks. With [slow start](crate::SlowStart), a ramping member's
/// value (at least 5 %) is divided by its factor. The design, its limits and its lab
/// figures: docs/how-to/least-cpu.md.
///
/// Options (validated when the balancer starts, [`Error::InvalidConfig`] naming the option):
///
/// | option | default | meaning |
/// |---|---|---|
/// | `poll_interval` | 5,000 ms | period of the Poller's fixed-rate ticks (> 0) |
/// | `poll_startup_jitter` | 60,000 ms | first poll after a uniform random delay in [0, this]; 0 = at once |
/// | `cpu_cache_ttl` | 10,000 ms | oldest reading that counts; must exceed the node's `cpu_sample_interval`; keep it above `poll_interval` (a WARN event says when it is not) |
/// | `cpu_threshold` | 5.0 points | width of the band above the minimum (≥ 0, finite) |
///
/// ```
/// use std::time::Duration;
/// use rpc_load_balancer::LeastCpu;
///
/// let least_cpu = LeastCpu::new()
///     .poll_interval(Duration::from_millis(1_000))
///     .poll_startup_jitter(Duration::ZERO)
///     .cpu_cache_ttl(Duration::from_millis(3_000))
///     .cpu_threshold(10.0);
/// assert_eq!(least_cpu.options().cpu_threshold, 10.0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LeastCpu {
    options: LeastCpuOptions,
    seed: Option<u64>,
}

/// [`LeastCpu`]'s options (see its table). [`Default`] gives the defaults below.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeastCpuOptions {
    /// Period of the Poller's ticks (default 5,000 ms; must be above 0 ms).
    pub poll_interval: Duration,
    /// Largest random delay of the first poll (default 60,000 ms; zero polls at once).
    pub poll_startup_jitter: Duration,
    /// Oldest reading that counts, by its age at the source (default 10,000 ms; must be
    /// above the node's `cpu_sample_interval`).
    pub cpu_cache_ttl: Duration,
    /// Width of the band above the least loaded member, in percentage points (default 5.0;
    /// finite and ≥ 0).
    pub cpu_threshold: f64,
}

impl Default for LeastCpuOptions {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_millis(5_000),
            poll_startup_jitter: Duration::from_millis(60_000),
            cpu_cache_ttl: Duration::from_millis(10_000),
            cpu_threshold: 5.0,
        }
    }
}

impl Default for LeastCpu {
    fn default() -> Self {
        Self::new()
    }
}

impl LeastCpu {
    /// LeastCpu with the default options, drawing from a thread-local generator.
    pub fn new() -> Self {
        Self {
            options: LeastCpuOptions::default(),
            seed: None,
        }
    }

    /// A reproducible pick sequence from `seed` (SplitMix64 over a shared counter).
    pub fn seeded(seed: u64) -> Self {
        Self {
            seed: Some(seed),
            ..Self::new()
        }
    }

    /// Sets `poll_interval` (default 5,000 ms).
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `poll_interval` when it is zero.
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.options.poll_interval = interval;
        self
    }

    /// Sets `poll_startup_jitter` (default 60,000 ms; zero polls at once).
    pub fn poll_startup_jitter(mut self, jitter: Duration) -> Self {
        self.options.poll_startup_jitter = jitter;
        self
    }

    /// Sets `cpu_cache_ttl` (default 10,000 ms).
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `cpu_cache_ttl` when it is zero or not above the
    /// node's [`cpu_sample_interval`](crate::NodeConfig::cpu_sample_interval).
    pub fn cpu_cache_ttl(mut self, ttl: Duration) -> Self {
        self.options.cpu_cache_ttl = ttl;
        self
    }

    /// Sets `cpu_threshold` in percentage points (default 5.0).
    ///
    /// Errors: [`Balancer::start`](crate::Balancer::start) fails with
    /// [`Error::InvalidConfig`] naming `cpu_threshold` when it is negative, NaN or infinite.
    pub fn cpu_threshold(mut self, points: f64) -> Self {
        self.options.cpu_threshold = points;
        self
    }

    /// The options as set (not yet validated: that happens when the balancer starts).
    pub fn options(&self) -> &LeastCpuOptions {
        &self.options
    }

    /// Checks the options against a node sampling every `sample_interval`.
    fn validate(&self, sample_interval: Option<Duration>) -> Result<(), Error> {
        let invalid =
            |option: &'static str, reason: String| Error::InvalidConfig { option, reason };
        let o = &self.options;
        if o.poll_interval.is_zero() {
            return Err(invalid("poll_interval", "must be above 0 ms".into()));
        }
        if o.cpu_cache_ttl.is_zero() {
            return Err(invalid("cpu_cache_ttl", "must be above 0 ms".into()));
        }
        if let Some(sample) = sample_interval {
            if o.cpu_cache_ttl <= sample {
                return Err(invalid(
                    "cpu_cache_ttl",
                    format!(
                        "{} ms is not above the node's cpu_sample_interval ({} ms): every reading would age out between samples",
                        o.cpu_cache_ttl.as_millis(),
                        sample.as_millis()
                    ),
                ));
            }
        }
        if !o.cpu_threshold.is_finite() || o.cpu_threshold < 0.0 {
            return Err(invalid(
                "cpu_threshold",
                format!("{} is not a finite number ≥ 0", o.cpu_threshold),
            ));
        }
        if o.cpu_cache_ttl <= o.poll_interval {
            // Allowed (tests and rarely polled balancers want it), but usually a mistake.
            tracing::warn!(
                cpu_cache_ttl_ms = o.cpu_cache_ttl.as_millis() as u64,
                poll_interval_ms = o.poll_interval.as_millis() as u64,
                "LeastCpu cpu_cache_ttl is not above poll_interval: remote members' readings age out between polls and count as 50 %"
            );
        }
        Ok(())
    }
}

impl Algorithm for LeastCpu {
    fn name(&self) -> &'static str {
        "least_cpu"
    }

    /// Errors: [`Error::InvalidConfig`] naming `poll_interval`, `cpu_cache_ttl` (zero, or not
    /// above this node's `cpu_sample_interval`) or `cpu_threshold`.
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error> {
        self.validate(context.cpu_sample_interval)?;
        Ok(Box::new(LeastCpuSelector {
            threshold: self.options.cpu_threshold,
            ttl_ms: self.options.cpu_cache_ttl.as_millis() as u64,
            clock: context.clock.clone(),
            rng: context.rng(self.seed),
            by_node: ArcSwap::from_pointee(ByNode::default()),
            all: CachePadded::new(AtomicU64::new(0)),
        }))
    }

    fn needs(&self) -> Needs {
        Needs::NONE.cpu(CpuPolling {
            poll_interval: self.options.poll_interval,
            poll_startup_jitter: self.options.poll_startup_jitter,
            cpu_cache_ttl: self.options.cpu_cache_ttl,
        })
    }
}

/// One balancer's [`LeastCpu`]: the band rule over its member views' readings, projected by
/// its own picks since each reading (see [`Track::value`]).
#[derive(Debug)]
struct LeastCpuSelector {
    threshold: f64,
    ttl_ms: u64,
    clock: Clock,
    rng: Rng,
    /// Every member's track by node (carried from list to list; read by a pick over a list
    /// that is no published one).
    by_node: ArcSwap<ByNode>,
    /// This selector's picks so far (on its own cache line: every pick writes it).
    all: CachePadded<AtomicU64>,
}

impl LeastCpuSelector {
    /// The stand-in for members never heard from: the median of the fresh readings in
    /// `readings` (the lower one of an even count; NaN is no fresh reading), or
    /// [`NEUTRAL_CPU`] when none is.
    fn stand_in(readings: &mut [f64]) -> f64 {
        let mut known = 0;
        for i in 0..readings.len() {
            if !readings[i].is_nan() {
                readings.swap(known, i);
                known += 1;
            }
        }
        if known == 0 {
            return NEUTRAL_CPU;
        }
        let known = &mut readings[..known];
        let (_, median, _) = known.select_nth_unstable_by((known.len() - 1) / 2, f64::total_cmp);
        *median
    }

    /// Fills `values` with the members' values at `now`: each one's fresh reading; for a member
    /// never heard from, the [stand-in](Self::stand_in); for one whose reading is older than
    /// the TTL, [`NEUTRAL_CPU`] (the original's rule) or that reading when higher (a node last
    /// read busy is not taken for half idle because nobody asked it since: only a new reading,
    /// from a reply or the Poller, clears it) — each projected by its track (when there is
    /// one, see [`Track::value`]).
    #[inline]
    fn values(
        &self,
        members: &[MemberView],
        tracks: Option<&Tracks>,
        by_node: Option<&ByNode>,
        now: u64,
        values: &mut [f64],
    ) {
        // NaN: no fresh reading (never read, or stale: told apart below).
        for (value, member) in values.iter_mut().zip(members) {
            *value = member.cpu(now, self.ttl_ms).unwrap_or(f64::NAN);
        }
        let stand_in = if values.iter().any(|v| v.is_nan()) {
            if values.len() <= STACK_MEMBERS {
                let mut scratch = [0.0f64; STACK_MEMBERS];
                let scratch = &mut scratch[..values.len()];
                scratch.copy_from_slice(values);
                Self::stand_in(scratch)
            } else {
                Self::stand_in(&mut values.to_vec())
            }
        } else {
            NEUTRAL_CPU
        };
        let all = self.all.load(Ordering::Relaxed);
        for (i, value) in values.iter_mut().enumerate() {
            let base = if !value.is_nan() {
                Base::Reading(*value)
            } else {
                match members[i].cpu_reading(now) {
                    Some(old) => Base::Stale(NEUTRAL_CPU.max(old.cpu)),
                    None => Base::Unknown(stand_in),
                }
            };
            *value = match self.track(tracks, by_node, members, i) {
                Some(track) => track.value(
                    base,
                    now,
                    self.threshold,
                    (all, members.len()),
                    members[i].slow_start_factor(),
                ),
                None => match base {
                    Base::Reading(cpu) | Base::Unknown(cpu) | Base::Stale(cpu) => cpu,
                },
            };
        }
    }

    /// `members[index]`'s track: from the list's derived tracks, else by node (`by_node` is
    /// loaded only for a list that has none).
    #[inline(always)]
    fn track<'a>(
        &self,
        tracks: Option<&'a Tracks>,
        by_node: Option<&'a ByNode>,
        members: &[MemberView],
        index: usize,
    ) -> Option<&'a Track> {
        match tracks {
            Some(list) => list.get(index).map(|t| &**t),
            None => by_node?.get(members.get(index)?.id()).map(|t| &**t),
        }
    }

    /// The band rule over `values`: uniform random among those within the threshold of the
    /// minimum (inclusive).
    fn pick_in_band(&self, values: &[f64]) -> usize {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let limit = min + self.threshold;
        let in_band = values.iter().filter(|v| **v <= limit).count();
        let mut nth = self.rng.below(in_band.max(1));
        for (i, v) in values.iter().enumerate() {
            if *v <= limit {
                if nth == 0 {
                    return i;
                }
                nth -= 1;
            }
        }
        0
    }

    /// Rare: more members than fit on the stack.
    #[cold]
    fn pick_large(
        &self,
        members: &[MemberView],
        tracks: Option<&Tracks>,
        by_node: Option<&ByNode>,
        now: u64,
    ) -> usize {
        let mut values = vec![0.0; members.len()];
        self.values(members, tracks, by_node, now, &mut values);
        self.pick_in_band(&values)
    }
}

impl Selector for LeastCpuSelector {
    /// The band rule over the members' readings: no lock, no allocation up to 64 members.
    #[inline]
    fn pick(&self, members: &[MemberView], request: &Request<'_>) -> Result<usize, Error> {
        if members.len() <= 1 {
            return Ok(0);
        }
        let now = self.clock.now_ms();
        let tracks = request
            .derived_as::<Tracks>()
            .filter(|list| list.len() == members.len());
        let guard = tracks.is_none().then(|| self.by_node.load());
        let by_node = guard.as_ref().map(|g| &***g);
        let chosen = if members.len() > STACK_MEMBERS {
            self.pick_large(members, tracks, by_node, now)
        } else {
            let mut values = [0.0f64; STACK_MEMBERS];
            self.values(members, tracks, by_node, now, &mut values[..members.len()]);
            self.pick_in_band(&values[..members.len()])
        };
        if let Some(track) = self.track(tracks, by_node, members, chosen) {
            track.picked();
        }
        self.all.fetch_add(1, Ordering::Relaxed);
        Ok(chosen)
    }

    /// A ramping member's picks count 1 / its factor times ([`Track::value`]): slow start
    /// need not skip its picks.
    fn applies_slow_start(&self) -> bool {
        true
    }

    fn members_changed(&self, change: &Change<'_>) {
        let before = self.by_node.load();
        let now = self.clock.now_ms();
        let next: ByNode = change
            .members
            .iter()
            .map(|m| {
                let track = before
                    .get(m.id())
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Track::new(now)));
                (Arc::clone(m.id_arc()), track)
            })
            .collect();
        self.by_node.store(Arc::new(next));
    }

    fn derive(&self, change: &Change<'_>) -> Option<Derived> {
        let by_node = self.by_node.load();
        let now = self.clock.now_ms();
        let list: Tracks = change
            .members
            .iter()
            .map(|m| {
                by_node
                    .get(m.id())
                    .cloned()
                    .unwrap_or_else(|| Arc::new(Track::new(now)))
            })
            .collect();
        Some(Arc::new(list))
    }

    fn explain(&self, members: &[MemberView], chosen: usize, request: &Request<'_>) -> Explanation {
        let now = self.clock.now_ms();
        let tracks = request
            .derived_as::<Tracks>()
            .filter(|list| list.len() == members.len());
        let guard = tracks.is_none().then(|| self.by_node.load());
        let by_node = guard.as_ref().map(|g| &***g);
        let mut values = vec![0.0; members.len()];
        self.values(members, tracks, by_node, now, &mut values);
        let mut ages = Vec::new();
        let scores = members
            .iter()
            .enumerate()
            .map(|(i, member)| {
                let track = self.track(tracks, by_node, members, i);
                let reading = member
                    .cpu_reading(now)
                    .map_or("no reading".to_string(), |r| {
                        format!("{} % {} ms old", r.cpu, r.age_ms)
                    });
                let picks = track.map_or(String::new(), |t| {
                    let (sent, before, period) = t.counts();
                    format!(", {sent} picks since it changed, {before} in the {period} ms before")
                });
                ages.push(format!("{}: {reading}{picks}", member.id()));
                (member.id().to_string(), values[i])
            })
            .collect();
        Explanation {
            rule: format!(
                "uniform random within {} points of the least CPU (never read = the median of the fresh readings, {NEUTRAL_CPU} without any; older than {} ms = {NEUTRAL_CPU} or its reading if higher; each value projected by this caller's picks since it changed); picked {}; readings: {}",
                self.threshold,
                self.ttl_ms,
                members.get(chosen).map_or("?", |m| m.id()),
                ages.join(", ")
            ),
            scores,
        }
    }
}

#[cfg(test)]
mod tests;
