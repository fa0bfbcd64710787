//! The worker actors of `rpclb node --group-workers N` (a hidden test flag): N plain ractor
//! actors joined to a `ractor::pg` group (`--group-scope`, `--group-name`), which callers
//! balance over with the library's actor groups
//! ([`ActorGroup`](rpc_load_balancer::group::ActorGroup)). Each answers a
//! [`GroupWork::Who`] with its member id, `"{node}#{pid}"` — the id a caller's group gives it.

use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

/// A worker's message; it crosses nodes (`ractor_cluster` serializes it).
#[derive(ractor_cluster::RactorClusterMessage)]
pub enum GroupWork {
    /// Answer `"{node}#{pid}"` (this worker's member id) after the given delay in ms.
    #[rpc]
    Who(u64, RpcReplyPort<String>),
}

/// One worker actor.
pub struct GroupWorker;

/// A worker's state: its member id and the pg group it joined.
pub struct Worker {
    id: String,
}

/// What a worker joins: the node's full name, the pg scope and the group.
pub struct WorkerArgs {
    /// The node's full name.
    pub node: String,
    /// The pg scope.
    pub scope: String,
    /// The pg group.
    pub group: String,
}

impl Actor for GroupWorker {
    type Msg = GroupWork;
    type State = Worker;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<GroupWork>,
        args: WorkerArgs,
    ) -> Result<Worker, ActorProcessingErr> {
        ractor::pg::join_scoped(args.scope, args.group, vec![myself.get_cell()]);
        Ok(Worker {
            id: format!("{}#{}", args.node, myself.get_id().pid()),
        })
    }

    async fn handle(
        &self,
        _: ActorRef<GroupWork>,
        message: GroupWork,
        worker: &mut Worker,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            GroupWork::Who(delay_ms, reply) => {
                if delay_ms > 0 {
                    let id = worker.id.clone();
                    // Answered from a task: the worker takes more calls meanwhile.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                        let _ = reply.send(id);
                    });
                } else {
                    let _ = reply.send(worker.id.clone());
                }
            }
        }
        Ok(())
    }
}

/// Starts `count` workers in pg group `group` of `scope` on the node named `node`.
///
/// Errors: a worker that cannot start.
pub async fn start(
    node: &str,
    scope: &str,
    group: &str,
    count: usize,
) -> Result<(), ractor::SpawnErr> {
    for _ in 0..count {
        let args = WorkerArgs {
            node: node.to_string(),
            scope: scope.to_string(),
            group: group.to_string(),
        };
        Actor::spawn(None, GroupWorker, args).await?;
    }
    Ok(())
}
