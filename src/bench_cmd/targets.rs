//! What the cases call — the two targets' raw floor actors, the node, and the two balancers
//! — how one call of each case is made and checked, and the setup that waits for them.

use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use ractor::ActorRef;
use rpc_load_balancer::{Balancer, BalancerConfig, Node, Payload, RoundRobin};

use super::{Case, BENCH_BALANCER, LOCAL_BALANCER, READY_TIMEOUT};
use crate::functions::BytesEcho;
use crate::load::{self, Amount, Failure, LoadReport, Outcome};
use crate::raw_floor::{self, RawFloorMsg};
use crate::CmdResult;

/// A case's reply: the raw floor's bytes or the library's payload (compared as they are, so
/// no case pays a conversion).
enum Reply {
    Raw(Vec<u8>),
    Payload(Payload),
}

impl Reply {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Raw(bytes) => bytes,
            Self::Payload(payload) => payload,
        }
    }
}

/// What the cases call.
pub(super) struct Targets {
    pub(super) node: Node,
    /// The two targets' full names.
    pub(super) names: [Arc<str>; 2],
    /// Their raw floor actors.
    pub(super) raw: [ActorRef<RawFloorMsg>; 2],
    /// RoundRobin over the two targets.
    pub(super) balanced: Balancer,
    /// This node as its only member.
    pub(super) local: Balancer,
    pub(super) timeout: Duration,
}

impl Targets {
    /// Makes one call of `case` with a copy of `payload` to target `which` (0 or 1; the
    /// balancers choose their own) and checks the reply: its length, or with `check_all`
    /// every byte.
    async fn call(&self, case: Case, which: usize, payload: &[u8], check_all: bool) -> Outcome {
        let (reply, node) = match case {
            Case::Raw => {
                let reply =
                    raw_floor::call(&self.raw[which], payload.to_vec(), self.timeout).await?;
                (Reply::Raw(reply), Arc::clone(&self.names[which]))
            }
            Case::Direct => {
                let reply = self
                    .node
                    .call::<BytesEcho>(&*self.names[which], Payload::from_slice(payload))
                    .timeout(self.timeout)
                    .await?;
                (Reply::Payload(reply), Arc::clone(&self.names[which]))
            }
            Case::Balanced | Case::Local => {
                let balancer = if case == Case::Balanced {
                    &self.balanced
                } else {
                    &self.local
                };
                let (reply, node) = balancer
                    .call::<BytesEcho>(Payload::from_slice(payload))
                    .timeout(self.timeout)
                    .with_node()
                    .await?;
                (Reply::Payload(reply), node)
            }
        };
        let reply = reply.bytes();
        let right = if check_all {
            reply == payload
        } else {
            reply.len() == payload.len()
        };
        if right {
            Ok(node)
        } else {
            Err(Failure::new(
                "wrong_reply",
                format!(
                    "{} from {node}: {} bytes back for {} sent, or other bytes",
                    case.name(),
                    reply.len(),
                    payload.len()
                ),
            ))
        }
    }
}

/// Runs `case` once: `concurrency` callers until `amount`. A single caller alternates
/// between the targets call by call; with several, caller *i* calls target *i* mod 2.
pub(super) async fn run_case(
    targets: &Arc<Targets>,
    case: Case,
    payload: &Arc<[u8]>,
    concurrency: u32,
    amount: Amount,
    check_all: bool,
) -> LoadReport {
    let (targets, payload) = (Arc::clone(targets), Arc::clone(payload));
    let mut report = load::drive(
        concurrency,
        amount,
        &ProgressBar::hidden(),
        move |caller, n| {
            let (targets, payload) = (Arc::clone(&targets), Arc::clone(&payload));
            let which = if concurrency == 1 {
                (n % 2) as usize
            } else {
                (caller % 2) as usize
            };
            async move { targets.call(case, which, &payload, check_all).await }
        },
    )
    .await;
    report.algorithm = case.name().to_string();
    report
}

/// Waits (≤ [`READY_TIMEOUT`] in all) until both targets' raw floor actors are known here and
/// a direct call to each target succeeds.
pub(super) async fn find_targets(
    node: &Node,
    names: &[Arc<str>; 2],
) -> CmdResult<[ActorRef<RawFloorMsg>; 2]> {
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    let raw = loop {
        if let (Some(first), Some(second)) =
            (raw_floor::find(&names[0]), raw_floor::find(&names[1]))
        {
            break [first, second];
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the raw floor actors of {} and {} did not show up within {} s",
                names[0],
                names[1],
                READY_TIMEOUT.as_secs()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for name in names {
        loop {
            let probe = node
                .call::<BytesEcho>(&**name, Payload::from_slice(&[1, 2, 3]))
                .timeout(Duration::from_secs(2))
                .await;
            match probe {
                Ok(_) => break,
                Err(error) if tokio::time::Instant::now() >= deadline => {
                    return Err(format!("{name} does not answer calls: {error}").into())
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    Ok(raw)
}

/// Starts the bench node's balancers and waits for their members.
pub(super) async fn start_balancers(names: &[Arc<str>; 2]) -> CmdResult<(Balancer, Balancer)> {
    // Caller only: its members are the children that match TARGETS_REGEX.
    let balanced = Balancer::start(
        BalancerConfig::new(BENCH_BALANCER)
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await?;
    // Nobody else runs it: this node is its only member.
    let local =
        Balancer::start(BalancerConfig::new(LOCAL_BALANCER).algorithm(RoundRobin::new())).await?;
    load::wait_for_members(&balanced, 2, READY_TIMEOUT).await?;
    load::wait_for_members(&local, 1, READY_TIMEOUT).await?;
    let mut members = balanced.members().nodes();
    members.sort();
    let mut expected: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    expected.sort();
    if members != expected {
        return Err(format!(
            "balancer {BENCH_BALANCER} has members {members:?}, expected {expected:?}"
        )
        .into());
    }
    Ok((balanced, local))
}
