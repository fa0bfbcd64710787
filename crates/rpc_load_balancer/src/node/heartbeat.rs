//! Heartbeats: ractor_cluster never notices a hung peer (a paused process keeps its TCP
//! connection open), so its members would stay listed and calls to it would wait out their
//! timeouts. A peer that serves rpc and has not been heard from for `heartbeat_timeout` has
//! its session stopped: its members leave every snapshot here and the calls in flight to it
//! fail with [`Error::ServiceUnavailable`](crate::Error::ServiceUnavailable). If it comes
//! back, it reconnects as any peer that lost its session does.
//!
//! **Heard from** means: its session came up, it answered one of our heartbeats, one of its
//! heartbeats reached us, or the session read anything from it (whatever the peer sends — a
//! reply, a call, ractor_cluster's own session ping — shows it is alive; `stream.rs` notes
//! when, for the sessions on the node's own streams). Every `heartbeat_interval` this node
//! sends a heartbeat ([`ControlRequest::Heartbeat`], answered like a ping) to each peer whose
//! own heartbeat has not reached it within the interval (and a half, for its timer's slack),
//! and from which nothing was read within half an interval (half: the reply to this node's
//! own last heartbeat is read too, and must not stop the next) — so of two nodes, once one
//! heartbeats the other, that one stops sending its own: at most one round trip per pair of
//! nodes per interval, none while other traffic flows. A silent peer's own stalls are
//! excused up to one more `heartbeat_timeout`. A peer older than this request answers it with an error, which is an answer all
//! the same.
//!
//! **One task for all peers**, not a timer per peer: it keeps each peer's last time heard,
//! sends the heartbeats due together once per interval (one wake of the node for all of them,
//! not one per peer; the first tick at a random point of the first interval, so nodes do not
//! tick together), sleeps in between until the next tick or the earliest silence deadline
//! (deadlines less than [`BATCH`] apart are handled in one wake) and has the heartbeats in
//! flight as futures of its own. A peer is stopped within `heartbeat_timeout` (+ [`BATCH`])
//! of when it was last heard from.
//!
//! **A starved node blames no peer.** While a mesh of many nodes forms on few cores, a node's
//! own process may not run for a while: its timer fires late, and the answers waiting for it
//! are not read. Heartbeats from then are not the peers' fault. So this node measures how late
//! its own timer fires: lateness beyond [`STALL_SLACK`] is added to every peer's allowed
//! silence. A peer that is really gone is still stopped once this node runs normally again.
//! And while the mesh around the node forms — many sessions coming up at once, every node
//! busy with handshakes — a peer gets twice `heartbeat_timeout` ([`Forming`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use ractor::{ActorCell, ActorId};
use tokio::time::Instant;

use super::shared::NodeShared;
use crate::control::ControlRequest;
use crate::Error;

/// Deadlines less than this apart are handled in one wake of the heartbeat task.
const BATCH: Duration = Duration::from_millis(20);

/// How late the heartbeat task's own timer may fire before the node counts itself starved
/// (and excuses its peers' silence by the rest of the delay).
const STALL_SLACK: Duration = Duration::from_millis(50);

/// What the heartbeat task knows of one peer's session.
struct Beat {
    session_id: ActorId,
    session: ActorCell,
    /// When the peer was last heard from (see the module docs).
    heard: Instant,
    /// The node's own stalled time ([`Stall::total`]) when `heard` was set.
    stalled_then: Duration,
    /// When the session last read bytes from the peer, if the node's own stream carries it.
    activity: Option<Arc<super::stream::Activity>>,
    /// A heartbeat to it is in flight.
    in_flight: bool,
}

impl Beat {
    /// When the peer's silence reaches `timeout` (see [`silence_ends`]).
    fn deadline(&self, timeout: Duration, stall: &Stall) -> Instant {
        silence_ends(self.heard, self.stalled_then, timeout, stall)
    }
}

/// Whether the mesh around this node is forming: at least [`FORMING_SESSIONS`] sessions came
/// up within one `heartbeat_timeout`. Every node of a forming mesh of many is busy with
/// handshakes, and a peer may not answer in time only because its process did not get to run:
/// while forming (and for one `heartbeat_timeout` after), a peer may be silent for twice
/// `heartbeat_timeout`.
///
/// Under churn (sessions coming and going all the time) the node would be lenient for good,
/// and a hung peer dropped only after twice the timeout: so one stretch of leniency lasts at
/// most [`FORMING_LIMIT`] timeouts; a new one starts only after a quiet timeout.
#[derive(Default)]
struct Forming {
    /// When the recent sessions came up (those within one timeout of the latest).
    ups: std::collections::VecDeque<Instant>,
    /// Lenient until then.
    until: Option<Instant>,
    /// When the current stretch of leniency began.
    since: Option<Instant>,
}

impl Forming {
    /// Notes that a session came up `now`.
    fn up(&mut self, now: Instant, timeout: Duration) {
        self.ups.push_back(now);
        while self
            .ups
            .front()
            .is_some_and(|at| now.saturating_duration_since(*at) > timeout)
        {
            self.ups.pop_front();
        }
        if self.ups.len() >= FORMING_SESSIONS {
            if self.until.is_none_or(|until| now >= until) {
                self.since = Some(now);
            }
            self.until = Some(now + timeout);
        }
    }

    /// The silence allowed on top of `timeout` at `now`.
    fn extra(&self, now: Instant, timeout: Duration) -> Duration {
        let within_limit = self
            .since
            .is_some_and(|since| now.saturating_duration_since(since) < timeout * FORMING_LIMIT);
        match self.until {
            Some(until) if now < until && within_limit => timeout,
            _ => Duration::ZERO,
        }
    }
}

/// Most `heartbeat_timeout`s one stretch of forming leniency lasts (see [`Forming`]): a mesh
/// of 96 forms within 2 of them on 2 cores.
const FORMING_LIMIT: u32 = 5;

/// How many sessions coming up within one `heartbeat_timeout` make a forming mesh (see
/// [`Forming`]).
const FORMING_SESSIONS: usize = 8;

/// When the silence of a peer last heard from at `heard`, when this node had stalled for
/// `stalled_then` in all, reaches `timeout` — this node's stalls since counted as time the
/// peer was not silent, up to one more `timeout` (a node whose own timer is always late still
/// drops a dead peer within twice the timeout).
fn silence_ends(
    heard: Instant,
    stalled_then: Duration,
    timeout: Duration,
    stall: &Stall,
) -> Instant {
    heard + timeout + stall.total.saturating_sub(stalled_then).min(timeout)
}

/// Whether a peer needs no heartbeat from this node at `now`: it heartbeats this node (its
/// latest at `theirs`, within an interval and a half: half an interval of slack for its
/// timer), or something else was read from its session within half an interval (`read`).
/// Half, not a whole interval: the reply to this node's own heartbeat is read too, and it
/// must not stop the next one, or a pair of idle peers would go two intervals without a word
/// and a peer pausing for little more than `timeout − 2 × interval` would be dropped.
fn heard_enough(
    now: Instant,
    theirs: Option<Instant>,
    read: Option<Instant>,
    interval: Duration,
) -> bool {
    theirs.is_some_and(|at| now.saturating_duration_since(at) < interval + interval / 2)
        || read.is_some_and(|at| now.saturating_duration_since(at) < interval / 2)
}

/// How long this node's own heartbeat task was held up beyond [`STALL_SLACK`], in all.
#[derive(Default)]
struct Stall {
    total: Duration,
}

impl Stall {
    /// Notes that a timer set for `due` fired at `now`.
    fn fired(&mut self, due: Instant, now: Instant) {
        let late = now.saturating_duration_since(due);
        self.total += late.saturating_sub(STALL_SLACK);
    }
}

/// Longest sender name, in bytes, a heartbeat is looked up by (longer ones are not recorded).
pub(crate) const MAX_SENDER_NAME_BYTES: usize = 255;

/// Records the heartbeat ([`ControlRequest::Heartbeat`]) of `sender` if it came, as far as
/// this node can tell, over `sender`'s own session: `sender` (at most
/// [`MAX_SENDER_NAME_BYTES`]) is a connected peer whose session is on the node's own streams
/// and read bytes — the heartbeat's own — within a heartbeat interval (a busy node may handle
/// the heartbeat a while after reading it; a hung sender's session reads nothing, so its
/// silence still shows within `heartbeat_timeout`). ractor_cluster
/// does not say which session a message came over, so that read is the check: a peer cannot
/// keep a silent node's session alive by sending heartbeats in its name. A heartbeat not
/// recorded is still answered; this node then heartbeats `sender` itself.
pub(crate) fn on_heartbeat(shared: &NodeShared, sender: &str) {
    if sender.len() > MAX_SENDER_NAME_BYTES {
        return;
    }
    let Some(peer_addr) = shared.peers.load().get(sender).map(|p| p.peer_addr.clone()) else {
        return;
    };
    let window = shared.config.heartbeat_interval;
    let read_now = super::stream::activity_of(&peer_addr)
        .and_then(|activity| activity.last())
        .is_some_and(|at| at.elapsed() < window);
    if read_now {
        shared.peers.heard_from(sender);
    }
}

/// The answer to one heartbeat: the peer, its session then, and whether it answered.
type Answer = (String, ActorId, bool);

/// Runs the heartbeats of this node until it stops (see the module docs).
pub(crate) async fn run(shared: Arc<NodeShared>, interval: Duration, timeout: Duration) {
    let request = ControlRequest::Heartbeat(shared.name.clone());
    let mut beats: HashMap<String, Beat> = HashMap::new();
    let mut in_flight = FuturesUnordered::new();
    let mut stall = Stall::default();
    let mut forming = Forming::default();
    // The peer table the beats were last matched with (compared by address).
    let mut seen: Option<Arc<super::peer_table::PeerMap>> = None;
    // This node's heartbeat ticks: at a random point of the first interval, then every
    // interval.
    let mut next_tick = Instant::now() + interval.mul_f64(rand::random::<f64>());
    let mut wake = next_tick;
    loop {
        tokio::select! {
            Some((name, session_id, answered)) = in_flight.next(), if !in_flight.is_empty() => {
                let answered: bool = answered;
                if let Some(beat) = beats.get_mut(&name).filter(|b: &&mut Beat| b.session_id == session_id) {
                    beat.in_flight = false;
                    if answered {
                        beat.heard = Instant::now();
                        beat.stalled_then = stall.total;
                    }
                }
                continue;
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
        let now = Instant::now();
        stall.fired(wake, now);
        if shared.transport.is_stopped() {
            return;
        }
        let peers = shared.peers.load_full();
        if !seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, &peers)) {
            for _ in 0..match_peers(&mut beats, &peers, now, &stall) {
                forming.up(now, timeout);
            }
            seen = Some(peers);
        }
        // A tick: heartbeats go out together, so that the node wakes once for all of them.
        let tick = now >= next_tick;
        if tick {
            next_tick = (next_tick + interval).max(now + BATCH);
        }
        let mut next_wake = next_tick;
        let mut closed = Vec::new();
        for (name, beat) in beats.iter_mut() {
            let theirs = shared.peers.heard_at(name).map(Instant::from_std);
            let read = beat
                .activity
                .as_ref()
                .and_then(|a| a.last())
                .map(Instant::from_std);
            if let Some(at) = theirs.max(read).filter(|at| *at > beat.heard) {
                beat.heard = at;
                beat.stalled_then = stall.total;
            }
            let deadline = beat.deadline(timeout, &stall) + forming.extra(now, timeout);
            if deadline <= now {
                closed.push(name.clone());
                continue;
            }
            next_wake = next_wake.min(deadline);
            // The peer heartbeats us, or sent something else lately: no need to ask it.
            let heartbeats_us = heard_enough(now, theirs, read, interval);
            if tick && !beat.in_flight && !heartbeats_us {
                beat.in_flight = true;
                in_flight.push(heartbeat(
                    Arc::clone(&shared),
                    name.clone(),
                    beat.session_id,
                    request.clone(),
                    timeout,
                ));
            }
        }
        for name in closed {
            let Some(beat) = beats.remove(&name) else {
                continue;
            };
            // Still the session the peer table has? (It may have been replaced meanwhile.)
            let same = shared
                .peers
                .load()
                .get(&name)
                .is_some_and(|p| p.session_id == beat.session_id);
            if same {
                let silent = now.saturating_duration_since(beat.heard);
                tracing::warn!(
                    node = %name,
                    silent_ms = silent.as_millis() as u64,
                    own_stall_ms = stall.total.saturating_sub(beat.stalled_then).as_millis() as u64,
                    "peer did not answer heartbeats; closing its session"
                );
                beat.session.stop(Some("heartbeat timeout".into()));
            }
        }
        wake = next_wake.max(now + BATCH);
    }
}

/// Adds a beat for each peer serving rpc that has none or a new session (heard from now) and
/// drops those of peers gone; returns how many were added.
fn match_peers(
    beats: &mut HashMap<String, Beat>,
    peers: &super::peer_table::PeerMap,
    now: Instant,
    stall: &Stall,
) -> usize {
    let mut added = 0;
    beats.retain(|name, beat| {
        peers
            .get(name)
            .is_some_and(|p| p.endpoint.is_some() && p.session_id == beat.session_id)
    });
    for (name, peer) in peers.iter() {
        if peer.endpoint.is_none() || beats.contains_key(name) {
            continue;
        }
        let beat = Beat {
            session_id: peer.session_id,
            session: peer.session.clone(),
            heard: now,
            stalled_then: stall.total,
            activity: super::stream::activity_of(&peer.peer_addr),
            in_flight: false,
        };
        beats.insert(name.clone(), beat);
        added += 1;
    }
    added
}

/// Sends one heartbeat to `name` and reports whether it answered (any answer: an error from
/// a node older than the request says it is alive too) within twice `timeout` — a late
/// answer still counts when it comes, the deadline is the heartbeat task's.
async fn heartbeat(
    shared: Arc<NodeShared>,
    name: String,
    session_id: ActorId,
    request: ControlRequest,
    timeout: Duration,
) -> Answer {
    let answer = crate::call::control(&shared.transport, &name, &request, timeout * 2).await;
    let answered = match answer {
        Ok(_) => true,
        Err(Error::RequestTimeout { .. } | Error::ServiceUnavailable { .. }) => false,
        Err(_) => true,
    };
    (name, session_id, answered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lateness_beyond_the_slack_counts_as_a_stall() {
        let mut stall = Stall::default();
        let due = Instant::now();
        stall.fired(due, due + STALL_SLACK);
        assert_eq!(stall.total, Duration::ZERO, "ordinary scheduling delay");
        stall.fired(due, due + STALL_SLACK + Duration::from_millis(700));
        assert_eq!(stall.total, Duration::from_millis(700));
        stall.fired(due + Duration::from_secs(1), due);
        assert_eq!(stall.total, Duration::from_millis(700), "early is not late");
    }

    #[test]
    fn many_sessions_coming_up_at_once_make_a_forming_mesh_for_one_timeout() {
        let timeout = Duration::from_secs(3);
        let start = Instant::now();
        let mut forming = Forming::default();
        // Sessions one per second: never 8 within 3 s.
        for i in 0..20 {
            forming.up(start + Duration::from_secs(i), timeout);
        }
        assert_eq!(
            forming.extra(start + Duration::from_secs(20), timeout),
            Duration::ZERO
        );
        // 8 within 3 s: lenient until 3 s after the 8th.
        let burst = start + Duration::from_secs(30);
        for i in 0..8 {
            forming.up(burst + Duration::from_millis(100 * i), timeout);
        }
        let eighth = burst + Duration::from_millis(700);
        assert_eq!(forming.extra(eighth, timeout), timeout);
        assert_eq!(forming.extra(eighth + timeout, timeout), Duration::ZERO);
    }

    #[test]
    fn under_churn_the_forming_leniency_ends_after_its_limit_until_a_quiet_timeout() {
        let timeout = Duration::from_secs(3);
        let start = Instant::now();
        let mut forming = Forming::default();
        // A session up every 300 ms for a minute: 10 per timeout, lenient all the while…
        let mut at = start;
        while at < start + Duration::from_secs(60) {
            forming.up(at, timeout);
            at += Duration::from_millis(300);
        }
        let limit = timeout * FORMING_LIMIT;
        assert_eq!(forming.extra(start + limit / 2, timeout), timeout);
        // …but only for the limit.
        assert_eq!(forming.extra(at, timeout), Duration::ZERO);
        // After a quiet timeout, a new burst is lenient again.
        let later = at + timeout + Duration::from_secs(1);
        for i in 0..8 {
            forming.up(later + Duration::from_millis(10 * i), timeout);
        }
        assert_eq!(
            forming.extra(later + Duration::from_millis(100), timeout),
            timeout
        );
    }

    #[test]
    fn a_peer_gets_its_silence_extended_by_the_stalls_since_it_was_heard() {
        let mut stall = Stall::default();
        let now = Instant::now();
        stall.total = Duration::from_millis(200);
        let then = stall.total;
        let timeout = Duration::from_secs(3);
        assert_eq!(silence_ends(now, then, timeout, &stall), now + timeout);
        stall.total += Duration::from_secs(2);
        assert_eq!(
            silence_ends(now, then, timeout, &stall),
            now + timeout + Duration::from_secs(2)
        );
        // However late this node's own timer, a silent peer is dropped within twice the
        // timeout.
        stall.total += Duration::from_secs(60);
        assert_eq!(
            silence_ends(now, then, timeout, &stall),
            now + timeout + timeout
        );
    }

    #[test]
    fn the_reply_to_our_own_heartbeat_does_not_stop_the_next_one() {
        let (interval, now) = (Duration::from_secs(1), Instant::now());
        let ago = |ms: u64| Some(now - Duration::from_millis(ms));
        // Our heartbeat went out a tick ago; its reply was read 990 ms ago: send again.
        assert!(!heard_enough(now, None, ago(990), interval));
        // Other traffic read within half an interval, or the peer's own heartbeats: skip.
        assert!(heard_enough(now, None, ago(400), interval));
        assert!(heard_enough(now, ago(1_400), None, interval));
        assert!(!heard_enough(now, ago(1_600), ago(600), interval));
    }
}
