//! The peer table: who this node is connected to, and what it knows of the peers it is not —
//! the ones it is dialling, redialling, has refused, or that said they were leaving — plus the
//! pause of all dials while this node's name is taken.
//!
//! The connected peers are read lock-free on the call path (an `ArcSwap` the ClusterManager
//! republishes whole, `cluster.rs`); the other sets change only when sessions come and go and
//! sit behind plain mutexes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use ractor::{ActorId, ActorRef};
use tokio::sync::watch;

use crate::wire::RpcMessage;
use crate::Error;

/// One connected peer, as the call path sees it.
#[derive(Clone)]
pub(crate) struct Peer {
    /// The session actor currently carrying traffic to the peer.
    pub(crate) session_id: ActorId,
    /// That session actor (stopped when the peer stops answering heartbeats).
    pub(crate) session: ractor::ActorCell,
    /// The `host:port` the peer advertises.
    pub(crate) connection_string: String,
    /// The session's peer address (`ip:port` of the other end of its connection), which its
    /// read activity is found by (`stream::activity_of`).
    pub(crate) peer_addr: String,
    /// The peer's rpc endpoint, once its pg membership is known.
    pub(crate) endpoint: Option<ActorRef<RpcMessage>>,
}

/// Connected peers by full name (hashed with foldhash: looked up on every call to a peer).
pub(crate) type PeerMap = HashMap<String, Peer, foldhash::fast::RandomState>;

/// The peers of a node: connected ones, and the name sets about the others.
pub(crate) struct PeerTable {
    /// Connected peers by full name, republished whole on every change.
    connected: ArcSwap<PeerMap>,
    /// Names of the connected peers, sorted, for `Node::nodes` and its watchers.
    node_list: watch::Sender<Arc<[String]>>,
    /// Peers that are client nodes (seen in the `@clients` pg group): not redialled, not
    /// introduced to other nodes.
    clients: Mutex<HashSet<String>>,
    /// Peers that announced they are leaving (shutting down after draining).
    left: Mutex<HashSet<String>>,
    /// When each peer in `left` went down (its last session closed), for [`Self::just_left`].
    left_down_at: Mutex<HashMap<String, Instant>>,
    /// Peers refused for speaking another wire version, with the error (until one passes the
    /// check).
    refused: Mutex<HashMap<String, (Error, Instant)>>,
    /// Addresses a dial is in flight to (one at a time per address).
    dialing: Mutex<HashSet<String>>,
    /// Peers lost uncleanly that a reconnect task is redialling (`reconnect.rs`).
    redialing: Mutex<HashSet<String>>,
    /// Peers learnt through the mesh that a mesh dial task waits to dial or dials
    /// (`mesh.rs`: one task per name, however many peers list it).
    mesh_dials: Mutex<HashSet<String>>,
    /// The peer's name for each session that authenticated and is not ready yet (nor
    /// closed): a session on its way up, which a dial to the same peer would only duplicate.
    authenticating: Mutex<HashMap<ActorId, String>>,
    /// Set while this node's name is known to be taken by another process (see
    /// `connect.rs`): (no dial before, current backoff).
    name_taken: Mutex<(Option<Instant>, Duration)>,
    /// The peer's full name for each authenticated session, by the NodeServer's session number
    /// (`NodeServerSessionInformation::node_id`: the `node_id` of the remote actors that
    /// session carries, `ActorId::Remote`); written by the ClusterManager, read lock-free when
    /// an actor group resolves its members' nodes.
    session_nodes: ArcSwap<HashMap<u64, Arc<str>>>,
    /// When each connected peer's last heartbeat arrived (`ControlRequest::Heartbeat`, see
    /// `heartbeat.rs`); forgotten when it goes down.
    heard: Mutex<HashMap<String, Instant>>,
    /// The labels of connected peers, once learnt (`labels.rs`); forgotten when they go down.
    labels: Mutex<HashMap<String, crate::node::Labels>>,
    /// Bumped whenever an entry of `labels` is set or removed.
    labels_version: watch::Sender<u64>,
}

/// Locks `set`, taking it over from a thread that panicked holding it (each update is one
/// insert or remove, so the set is whole).
fn lock<T>(set: &Mutex<T>) -> MutexGuard<'_, T> {
    set.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for PeerTable {
    fn default() -> Self {
        Self {
            connected: ArcSwap::default(),
            node_list: watch::channel(Arc::from(Vec::new())).0,
            clients: Default::default(),
            left: Default::default(),
            left_down_at: Default::default(),
            refused: Default::default(),
            dialing: Default::default(),
            redialing: Default::default(),
            mesh_dials: Default::default(),
            authenticating: Default::default(),
            name_taken: Mutex::new((None, Duration::ZERO)),
            session_nodes: ArcSwap::default(),
            heard: Default::default(),
            labels: Default::default(),
            labels_version: watch::channel(0).0,
        }
    }
}

impl PeerTable {
    // --- Sessions' node ids ---

    /// Records that session number `node_id` (an authenticated session) carries peer `name`.
    pub(crate) fn note_session_node(&self, node_id: u64, name: &str) {
        self.session_nodes.rcu(|map| {
            let mut map = HashMap::clone(map);
            map.insert(node_id, Arc::from(name));
            map
        });
    }

    /// Forgets session number `node_id` (its session closed).
    pub(crate) fn forget_session_node(&self, node_id: u64) {
        if self.session_nodes.load().contains_key(&node_id) {
            self.session_nodes.rcu(|map| {
                let mut map = HashMap::clone(map);
                map.remove(&node_id);
                map
            });
        }
    }

    /// The full name of the peer whose session has number `node_id`, if that session is
    /// authenticated and open (lock-free).
    pub(crate) fn session_node(&self, node_id: u64) -> Option<Arc<str>> {
        self.session_nodes.load().get(&node_id).cloned()
    }

    // --- Connected peers ---

    /// The connected peers by full name, as last published (lock-free).
    pub(crate) fn load(&self) -> arc_swap::Guard<Arc<PeerMap>> {
        self.connected.load()
    }

    /// The connected peers by full name, as last published, as an `Arc` of its own (compared
    /// by address to tell whether the table changed).
    pub(crate) fn load_full(&self) -> Arc<PeerMap> {
        self.connected.load_full()
    }

    /// Whether `name` is a connected peer.
    pub(crate) fn is_connected(&self, name: &str) -> bool {
        self.connected.load().contains_key(name)
    }

    /// Replaces the connected peers with `table` and, if the names changed, tells the
    /// watchers of the node list.
    pub(crate) fn publish(&self, table: PeerMap) {
        let mut names: Vec<String> = table.keys().cloned().collect();
        names.sort();
        self.connected.store(Arc::new(table));
        self.node_list.send_if_modified(|current| {
            if current[..] == names[..] {
                false
            } else {
                *current = Arc::from(names);
                true
            }
        });
    }

    /// The names of the connected peers, sorted, as last told to the node list's watchers.
    pub(crate) fn node_list(&self) -> Vec<String> {
        self.node_list.borrow().to_vec()
    }

    /// A watch of [`node_list`](Self::node_list).
    pub(crate) fn watch_node_list(&self) -> watch::Receiver<Arc<[String]>> {
        self.node_list.subscribe()
    }

    /// Names of connected peers, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.connected.load().keys().cloned().collect();
        names.sort();
        names
    }

    /// `(name, advertised address)` of connected peers other than client nodes, sorted by
    /// name (what a node joining through this one should dial).
    pub(crate) fn addresses(&self) -> Vec<(String, String)> {
        let clients = lock(&self.clients);
        let mut peers: Vec<(String, String)> = self
            .connected
            .load()
            .iter()
            .filter(|(name, _)| !clients.contains(name.as_str()))
            .map(|(name, peer)| (name.clone(), peer.connection_string.clone()))
            .collect();
        peers.sort();
        peers
    }

    /// Names of the connected peers that are client nodes, sorted (the nodes a join notice is
    /// passed on to: see `mesh.rs`).
    pub(crate) fn client_peers(&self) -> Vec<String> {
        let clients = lock(&self.clients);
        let mut found: Vec<String> = self
            .connected
            .load()
            .keys()
            .filter(|name| clients.contains(name.as_str()))
            .cloned()
            .collect();
        found.sort();
        found
    }

    /// The connected peer whose advertised address `matches`, if any.
    pub(crate) fn peer_at(&self, matches: impl Fn(&str) -> bool) -> Option<String> {
        self.connected
            .load()
            .iter()
            .find(|(_, peer)| matches(&peer.connection_string))
            .map(|(name, _)| name.clone())
    }

    /// The address this node has on record for the connected peer `name`.
    pub(crate) fn connection_of(&self, name: &str) -> Option<String> {
        self.connected
            .load()
            .get(name)
            .map(|peer| peer.connection_string.clone())
    }

    // --- Heartbeats ---

    /// Records that a heartbeat of the connected peer `name` arrived now (a name that is not
    /// a connected peer is not recorded, so the map stays bounded by the peers).
    pub(crate) fn heard_from(&self, name: &str) {
        if self.is_connected(name) {
            lock(&self.heard).insert(name.to_string(), Instant::now());
        }
    }

    /// When the last heartbeat of the peer `name` arrived, if it sent one since it came up.
    pub(crate) fn heard_at(&self, name: &str) -> Option<Instant> {
        lock(&self.heard).get(name).copied()
    }

    // --- Labels ---

    /// Records the labels of the connected peer `name` (a peer that went down meanwhile is
    /// not recorded) and bumps the labels watch.
    pub(crate) fn set_labels(&self, name: &str, labels: crate::node::Labels) {
        if !self.is_connected(name) {
            return;
        }
        lock(&self.labels).insert(name.to_string(), labels);
        self.labels_version.send_modify(|v| *v += 1);
    }

    /// The labels of the peer `name`, if known.
    pub(crate) fn labels_of(&self, name: &str) -> Option<crate::node::Labels> {
        lock(&self.labels).get(name).cloned()
    }

    /// Forgets the labels of `name` (its last session closed).
    pub(crate) fn forget_labels(&self, name: &str) {
        if lock(&self.labels).remove(name).is_some() {
            self.labels_version.send_modify(|v| *v += 1);
        }
    }

    /// A watch bumped whenever a peer's labels are set or forgotten.
    pub(crate) fn watch_labels(&self) -> watch::Receiver<u64> {
        self.labels_version.subscribe()
    }

    // --- Client nodes ---

    /// Records whether the peer `name` is a client node.
    pub(crate) fn set_client(&self, name: &str, client: bool) {
        let mut clients = lock(&self.clients);
        if client {
            clients.insert(name.to_string());
        } else {
            clients.remove(name);
        }
    }

    /// Records the peers `names` as client nodes.
    pub(crate) fn add_clients(&self, names: impl IntoIterator<Item = String>) {
        lock(&self.clients).extend(names);
    }

    /// Whether the peer `name` is a client node.
    pub(crate) fn is_client(&self, name: &str) -> bool {
        lock(&self.clients).contains(name)
    }

    // --- Peers that said they were leaving ---

    /// Records that `name` announced it is leaving.
    pub(crate) fn mark_leaving(&self, name: &str) {
        lock(&self.left).insert(name.to_string());
    }

    /// Whether `name` announced it was leaving (and has not come back since).
    pub(crate) fn has_left(&self, name: &str) -> bool {
        lock(&self.left).contains(name)
    }

    /// Takes `name` off the peers that said they were leaving (a configured peer dialled
    /// again); a down time recorded for it stays until [`forget_left`](Self::forget_left).
    pub(crate) fn clear_leaving(&self, name: &str) {
        lock(&self.left).remove(name);
    }

    /// Records that the last session to `name` closed: its last heartbeat is forgotten, a
    /// client node is forgotten (a new one
    /// has a new name, so these sets don't grow with every `rpclb call` made against this
    /// node), and a peer that announced it was leaving gets its down time (see
    /// [`just_left`](Self::just_left)).
    pub(crate) fn note_down(&self, name: &str) {
        lock(&self.heard).remove(name);
        if lock(&self.clients).remove(name) {
            lock(&self.left).remove(name);
        }
        if self.has_left(name) {
            lock(&self.left_down_at).insert(name.to_string(), Instant::now());
        }
    }

    /// Forgets that `name` announced it was leaving: it is back.
    pub(crate) fn forget_left(&self, name: &str) {
        lock(&self.left).remove(name);
        lock(&self.left_down_at).remove(name);
    }

    /// Whether `name` announced it was leaving and is still up, or went down less than
    /// `within` ago: a peer that has not seen it go yet may still list it. Past that, a peer
    /// that lists it has seen it come back (restarted under the same name).
    pub(crate) fn just_left(&self, name: &str, within: Duration) -> bool {
        if !self.has_left(name) {
            return false;
        }
        lock(&self.left_down_at)
            .get(name)
            .is_none_or(|down| down.elapsed() < within)
    }

    // --- Refused peers ---

    /// Records `name` as refused with `error` (see `version.rs`).
    pub(crate) fn refuse(&self, name: &str, error: &Error) {
        lock(&self.refused).insert(name.to_string(), (error.clone(), Instant::now()));
    }

    /// Ends the refusal of `name`: it passed the check.
    pub(crate) fn clear_refusal(&self, name: &str) {
        lock(&self.refused).remove(name);
    }

    /// Why the peer `name` was refused, if it was (see `version.rs`).
    pub(crate) fn refusal(&self, name: &str) -> Option<Error> {
        lock(&self.refused)
            .get(name)
            .map(|(error, _)| error.clone())
    }

    /// Whether `name` was refused less than `within` ago.
    pub(crate) fn refused_within(&self, name: &str, within: Duration) -> bool {
        lock(&self.refused)
            .get(name)
            .is_some_and(|(_, at)| at.elapsed() < within)
    }

    // --- Dials ---

    /// Marks `addr` as being dialled; `false` if a dial to it is already in flight.
    pub(crate) fn begin_dial(&self, addr: &str) -> bool {
        lock(&self.dialing).insert(addr.to_string())
    }

    /// Ends a dial started with [`begin_dial`](Self::begin_dial).
    pub(crate) fn end_dial(&self, addr: &str) {
        lock(&self.dialing).remove(addr);
    }

    /// Takes the redial slot of `name`; `false` if a reconnect task already redials it.
    pub(crate) fn begin_redial(&self, name: &str) -> bool {
        lock(&self.redialing).insert(name.to_string())
    }

    /// Frees the redial slot taken with [`begin_redial`](Self::begin_redial).
    pub(crate) fn end_redial(&self, name: &str) {
        lock(&self.redialing).remove(name);
    }

    /// Takes the mesh dial slot of `name`; `false` if a mesh dial task already has it.
    pub(crate) fn begin_mesh_dial(&self, name: &str) -> bool {
        lock(&self.mesh_dials).insert(name.to_string())
    }

    /// Frees the slot taken with [`begin_mesh_dial`](Self::begin_mesh_dial).
    pub(crate) fn end_mesh_dial(&self, name: &str) {
        lock(&self.mesh_dials).remove(name);
    }

    /// Records that `session` (of peer `name`) authenticated; it is on its way up until
    /// [`session_settled`](Self::session_settled).
    pub(crate) fn session_authenticated(&self, session: ActorId, name: &str) {
        lock(&self.authenticating).insert(session, name.to_string());
    }

    /// `session` became ready or closed: no longer on its way up.
    pub(crate) fn session_settled(&self, session: &ActorId) {
        lock(&self.authenticating).remove(session);
    }

    /// Whether a session of peer `name` has authenticated and is not ready yet.
    pub(crate) fn is_authenticating(&self, name: &str) -> bool {
        lock(&self.authenticating).values().any(|n| n == name)
    }

    /// How much longer no dial is made because this node's name is taken, if it is.
    pub(crate) fn name_taken_for(&self) -> Option<Duration> {
        let taken = lock(&self.name_taken);
        let left = taken.0?.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// Records that a peer has another node of this node's name: no dial for 5 s, doubling
    /// on each repeat up to 5 minutes — longer than the heartbeat timeout, so a hung
    /// predecessor is gone by the first retry. Returns the wait.
    pub(crate) fn note_name_taken(&self) -> Duration {
        let mut taken = lock(&self.name_taken);
        let backoff = (taken.1 * 2).clamp(NAME_TAKEN_FIRST, NAME_TAKEN_MAX);
        *taken = (Some(Instant::now() + backoff), backoff);
        backoff
    }

    /// A dial succeeded: the name is this node's again.
    pub(crate) fn name_free(&self) {
        *lock(&self.name_taken) = (None, Duration::ZERO);
    }
}

/// First pause of all dials once this node's name is found taken.
const NAME_TAKEN_FIRST: Duration = Duration::from_secs(5);

/// Longest pause of all dials while this node's name stays taken.
const NAME_TAKEN_MAX: Duration = Duration::from_secs(300);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_going_down_is_forgotten_and_a_peer_that_left_gets_its_down_time() {
        let peers = PeerTable::default();
        // A client node that said it was leaving: both records go with its session.
        peers.set_client("c@h", true);
        peers.mark_leaving("c@h");
        peers.note_down("c@h");
        assert!(!peers.is_client("c@h"));
        assert!(!peers.has_left("c@h"));
        assert!(!peers.just_left("c@h", Duration::from_secs(60)));
        // A server node that said it was leaving: listed as just left while up, and for
        // `within` after it went down.
        peers.mark_leaving("s@h");
        assert!(peers.just_left("s@h", Duration::ZERO), "still up");
        peers.note_down("s@h");
        assert!(peers.just_left("s@h", Duration::from_secs(60)));
        assert!(!peers.just_left("s@h", Duration::ZERO));
        // Back: nothing is left of it.
        peers.forget_left("s@h");
        assert!(!peers.has_left("s@h"));
        // A peer that never said it was leaving gets no down time.
        peers.note_down("k@h");
        peers.mark_leaving("k@h");
        assert!(
            peers.just_left("k@h", Duration::ZERO),
            "up since it said so"
        );
    }

    #[test]
    fn refusals_dials_and_redials_are_one_at_a_time() {
        let peers = PeerTable::default();
        let refusal = Error::WireVersion {
            node: "r@h".into(),
            local: 1,
            remote: 2,
        };
        peers.refuse("r@h", &refusal);
        assert_eq!(peers.refusal("r@h"), Some(refusal));
        assert!(peers.refused_within("r@h", Duration::from_secs(60)));
        assert!(!peers.refused_within("r@h", Duration::ZERO));
        peers.clear_refusal("r@h");
        assert_eq!(peers.refusal("r@h"), None);

        assert!(peers.begin_dial("h:1"));
        assert!(!peers.begin_dial("h:1"), "one dial per address");
        peers.end_dial("h:1");
        assert!(peers.begin_dial("h:1"));
        assert!(peers.begin_redial("a@h"));
        assert!(!peers.begin_redial("a@h"), "one redial task per name");
        peers.end_redial("a@h");
        assert!(peers.begin_redial("a@h"));
        assert!(peers.begin_mesh_dial("a@h"));
        assert!(!peers.begin_mesh_dial("a@h"), "one mesh dial task per name");
        peers.end_mesh_dial("a@h");
        assert!(peers.begin_mesh_dial("a@h"));
    }

    #[test]
    fn a_session_is_on_its_way_up_from_authenticated_until_ready_or_closed() {
        let peers = PeerTable::default();
        let (one, two) = (ActorId::Local(1), ActorId::Local(2));
        assert!(!peers.is_authenticating("a@h"));
        peers.session_authenticated(one, "a@h");
        peers.session_authenticated(two, "a@h");
        assert!(peers.is_authenticating("a@h"));
        assert!(!peers.is_authenticating("b@h"));
        peers.session_settled(&one);
        assert!(
            peers.is_authenticating("a@h"),
            "the other is still on its way"
        );
        peers.session_settled(&two);
        assert!(!peers.is_authenticating("a@h"));
    }

    #[test]
    fn a_taken_name_pauses_dials_doubling_to_five_minutes() {
        let peers = PeerTable::default();
        assert_eq!(peers.name_taken_for(), None);
        let waits: Vec<u64> = (0..9).map(|_| peers.note_name_taken().as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert!(peers.name_taken_for().is_some());
        peers.name_free();
        assert_eq!(peers.name_taken_for(), None);
        assert_eq!(
            peers.note_name_taken().as_secs(),
            5,
            "starts over once free"
        );
    }
}
