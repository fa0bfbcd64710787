//! The raw floor of `rpclb bench` (its case `raw`): a plain ractor_cluster RPC echo actor that
//! every `rpclb node` runs beside the library's endpoint. It shows what a remote call costs
//! without our layer — no header, no function registry, no balancer, no reply envelope — but
//! served like our endpoint serves a call: each call on its own tokio task.
//!
//! The actor is named `rpclb/raw_floor/<node>` (the node's full name, so a caller can tell
//! which node a member is on) and joins group [`RAW_FLOOR_GROUP`] of pg scope
//! [`RAW_FLOOR_SCOPE`], its own scope beside the library's, so the library never sees it.

use std::time::Duration;

use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SpawnErr};
use ractor_cluster::RactorClusterMessage;

use crate::load::Failure;

/// The pg scope of the raw floor actors.
pub const RAW_FLOOR_SCOPE: &str = "rpclb";

/// The pg group (in [`RAW_FLOOR_SCOPE`]) every node's raw floor actor joins.
pub const RAW_FLOOR_GROUP: &str = "@raw_floor";

/// Prefix of a raw floor actor's registered name; the node's full name follows it.
const NAME_PREFIX: &str = "rpclb/raw_floor/";

/// The registered name of `node`'s raw floor actor.
pub fn actor_name(node: &str) -> String {
    format!("{NAME_PREFIX}{node}")
}

/// The raw floor actor's message. The variant name is its identity on the wire.
#[derive(RactorClusterMessage)]
pub enum RawFloorMsg {
    /// Echo: the reply port gets the same bytes back.
    #[rpc]
    Echo(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

/// The raw floor actor: answers every [`RawFloorMsg::Echo`] on its own tokio task.
#[derive(Debug)]
pub struct RawFloor;

impl Actor for RawFloor {
    type Msg = RawFloorMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<RawFloorMsg>,
        _: (),
    ) -> Result<(), ActorProcessingErr> {
        ractor::pg::join_scoped(
            RAW_FLOOR_SCOPE.to_string(),
            RAW_FLOOR_GROUP.to_string(),
            vec![myself.get_cell()],
        );
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<RawFloorMsg>,
        message: RawFloorMsg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RawFloorMsg::Echo(bytes, reply) => {
                tokio::spawn(async move {
                    // The caller may have given up; nothing to do then.
                    let _ = reply.send(bytes);
                });
            }
        }
        Ok(())
    }
}

/// Starts this process's raw floor actor for the node named `node` (full name) and joins it
/// to the group; stop the returned actor to leave.
///
/// Errors: the spawn error (e.g. one already runs for that node).
pub async fn start(node: &str) -> Result<ActorRef<RawFloorMsg>, SpawnErr> {
    let (actor, _) = Actor::spawn(Some(actor_name(node)), RawFloor, ()).await?;
    Ok(actor)
}

/// The raw floor actor of `node` (full name) among the group's members this process knows,
/// local or remote.
pub fn find(node: &str) -> Option<ActorRef<RawFloorMsg>> {
    let name = actor_name(node);
    ractor::pg::get_scoped_members(&RAW_FLOOR_SCOPE.to_string(), &RAW_FLOOR_GROUP.to_string())
        .into_iter()
        .find(|cell| cell.get_name().as_deref() == Some(name.as_str()))
        .map(ActorRef::from)
}

/// One raw echo call of `payload` to `actor`, waiting at most `timeout`; the reply bytes.
///
/// Errors: a [`Failure`] of kind `request_timeout` (no reply in time), `connection_lost`
/// (the reply port was dropped: the node went away) or `service_unavailable` (the message
/// could not be sent).
pub async fn call(
    actor: &ActorRef<RawFloorMsg>,
    payload: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, Failure> {
    match actor
        .call(|reply| RawFloorMsg::Echo(payload, reply), Some(timeout))
        .await
    {
        Ok(CallResult::Success(reply)) => Ok(reply),
        Ok(CallResult::Timeout) => Err(Failure::new(
            "request_timeout",
            format!("no raw echo reply within {} ms", timeout.as_millis()),
        )),
        Ok(CallResult::SenderError) => Err(Failure::new(
            "connection_lost",
            "the raw echo's reply port was dropped",
        )),
        Err(error) => Err(Failure::new(
            "service_unavailable",
            format!("cannot send the raw echo: {error}"),
        )),
    }
}
