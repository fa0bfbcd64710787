//! Stand-in members: actors in this process joined to a balancer's group under another
//! node's member name.

/// An actor standing in for a member on another node, for single-process tests and benches
/// of selection: it is joined to a balancer's pg group under a member name
/// (`rpc_load_balancer/<balancer>/stand-in<i>@127.0.0.1`) and never expects a call.
#[derive(Debug)]
pub struct StandIn;

impl ractor::Actor for StandIn {
    type Msg = rpc_load_balancer::RpcMessage;
    type State = ();
    type Arguments = ();
    async fn pre_start(
        &self,
        _: ractor::ActorRef<rpc_load_balancer::RpcMessage>,
        _: (),
    ) -> Result<(), ractor::ActorProcessingErr> {
        Ok(())
    }
}

/// The full node name of stand-in `i`.
pub fn stand_in_node(i: usize) -> String {
    format!("stand-in{i}@127.0.0.1")
}

/// Spawns stand-in members `ids` of `balancer` and joins them to its group; stop an actor to
/// make its member leave.
///
/// Errors: the spawn error (e.g. a stand-in of that name already runs).
pub async fn join_stand_ins(
    balancer: &str,
    ids: impl IntoIterator<Item = usize>,
) -> Result<Vec<ractor::ActorRef<rpc_load_balancer::RpcMessage>>, ractor::SpawnErr> {
    let mut actors = Vec::new();
    for i in ids {
        let name = format!("rpc_load_balancer/{balancer}/{}", stand_in_node(i));
        let (actor, _) = ractor::Actor::spawn(Some(name), StandIn, ()).await?;
        ractor::pg::join_scoped(
            rpc_load_balancer::SCOPE.to_string(),
            balancer.to_string(),
            vec![actor.get_cell()],
        );
        actors.push(actor);
    }
    Ok(actors)
}
