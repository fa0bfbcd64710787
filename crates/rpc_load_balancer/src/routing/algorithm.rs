//! [`Algorithm`]: the configuration of a way to pick members, which builds one
//! [`Selector`] per balancer.

use std::time::Duration;

use super::{Clock, Rng, Selector};
use crate::Error;

/// A selection algorithm as configured: its options, checked and turned into one
/// [`Selector`] per balancer by [`build`](Self::build) (tower's `MakeBalance` idea). One
/// instance may configure many balancers; each gets its own selector and state.
pub trait Algorithm: Send + Sync + 'static {
    /// A short name for logs and the `algorithm` metric label, e.g. `"round_robin"`.
    fn name(&self) -> &'static str;

    /// Checks the options and builds the selector of one balancer (when it starts).
    ///
    /// Errors: [`Error::InvalidConfig`] naming the option when an option is invalid; the
    /// balancer then does not start.
    fn build(&self, context: &BuildContext<'_>) -> Result<Box<dyn Selector>, Error>;

    /// What the balancer must keep in the member views for this algorithm's selectors; asked
    /// once when the balancer starts. Default: nothing.
    fn needs(&self) -> Needs {
        Needs::default()
    }

    /// `true` makes every routed call and cast run on the calling node without selection
    /// ([`CallDirect`](crate::CallDirect)). Default `false`. Explicit selections
    /// (`Balancer::select_node`, `select_nodes`) still ask the selector.
    fn is_local(&self) -> bool {
        false
    }
}

/// What a balancer keeps in its member views for an algorithm (see [`Algorithm::needs`]).
/// [`Default`]: nothing.
///
/// ```
/// use rpc_load_balancer::routing::Needs;
///
/// let needs = Needs::default().in_flight();
/// assert!(needs.in_flight && needs.cpu.is_none());
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Needs {
    /// Count each member's selections in flight
    /// ([`MemberView::in_flight`](super::MemberView::in_flight)): taken at each pick,
    /// released when its guard drops — an atomic shared by the threads that pick that member.
    /// (A balancer's `max_in_flight_per_member` turns counting on too.)
    pub in_flight: bool,
    /// Keep each member's node's CPU reading in its view
    /// ([`MemberView::cpu`](super::MemberView::cpu)), fetched by a Poller actor the balancer
    /// runs beside the selector, with these settings.
    pub cpu: Option<CpuPolling>,
    /// Keep each member's [`LoadReport`](crate::LoadReport) in its view
    /// ([`MemberView::report`](super::MemberView::report)) at least this often even when
    /// its calls bring none: an [actor group](crate::group)'s replies carry no report, so the
    /// group asks each member's node for its load every this long, at most every 100 ms (a
    /// balancer ignores it: every reply of its members carries one).
    pub reports: Option<Duration>,
}

impl Needs {
    /// Nothing needed.
    pub const NONE: Needs = Needs {
        in_flight: false,
        cpu: None,
        reports: None,
    };

    /// Also count in-flight selections per member.
    pub const fn in_flight(mut self) -> Self {
        self.in_flight = true;
        self
    }

    /// Also keep CPU readings, polled as `polling` says.
    pub const fn cpu(mut self, polling: CpuPolling) -> Self {
        self.cpu = Some(polling);
        self
    }

    /// Also keep load reports fresh where calls bring none, asked for every `period` (see
    /// [`Needs::reports`]).
    pub const fn reports(mut self, period: Duration) -> Self {
        self.reports = Some(period);
        self
    }
}

/// How the balancer's Poller fetches its members' CPU readings (see [`Needs::cpu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuPolling {
    /// Period of the Poller's fixed-rate ticks (> 0; checked at start, see [`Self::validate`]).
    pub poll_interval: Duration,
    /// The first poll comes after a uniform random delay in [0, this]; zero polls at once.
    pub poll_startup_jitter: Duration,
    /// The oldest reading the selector counts (> 0); readings older than 3 × the largest TTL in
    /// use are evicted from the node's cache.
    pub cpu_cache_ttl: Duration,
}

impl CpuPolling {
    /// Checks the polling options, as the balancer does at start for any algorithm whose
    /// [`Needs::cpu`] asks for them.
    ///
    /// Errors: [`Error::InvalidConfig`] naming `poll_interval` or `cpu_cache_ttl` when it is
    /// zero.
    pub fn validate(&self) -> Result<(), Error> {
        for (option, value) in [
            ("poll_interval", self.poll_interval),
            ("cpu_cache_ttl", self.cpu_cache_ttl),
        ] {
            if value.is_zero() {
                return Err(Error::InvalidConfig {
                    option,
                    reason: "must be above 0 ms".into(),
                });
            }
        }
        Ok(())
    }
}

/// What [`Algorithm::build`] gets to build a selector with.
#[derive(Debug, Clone)]
pub struct BuildContext<'a> {
    /// The balancer's name.
    pub balancer: &'a str,
    /// The clock the selector reads (never `Instant::now()` directly): the process clock on
    /// a node, a manual clock in the test kit or a simulator.
    pub clock: Clock,
    /// A seed for the selector's random numbers: `Some` for a reproducible run (test kit,
    /// simulator), overriding the algorithm's own; `None` on a node.
    pub seed: Option<u64>,
    /// This node's CPU sampling interval, for options checked against it (LeastCpu's
    /// `cpu_cache_ttl`); `None` when there is no node (test kit, simulator).
    pub cpu_sample_interval: Option<Duration>,
}

impl<'a> BuildContext<'a> {
    /// A context for balancer `balancer` as on a node without one: the system clock, no
    /// seed, no CPU sampling interval (e.g. to check an algorithm's options early).
    pub fn new(balancer: &'a str) -> Self {
        Self {
            balancer,
            clock: Clock::system(),
            seed: None,
            cpu_sample_interval: None,
        }
    }

    /// The selector's generator: seeded from [`seed`](Self::seed) if set, else from `own`
    /// (the algorithm's own seed, if it was built seeded), else thread-local.
    pub fn rng(&self, own: Option<u64>) -> Rng {
        Rng::from_seed(self.seed.or(own))
    }
}
