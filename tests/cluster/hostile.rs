//! Hostile input on the wire: a raw TCP client sending garbage, or half a frame, to a node's
//! port disturbs none of the node's other sessions — balanced calls through it keep
//! succeeding.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{Balancer, BalancerConfig, RoundRobin};
use rpclb::harness::Cluster;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::{Whoami, BIN, MESH_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_half_frames_on_a_nodes_port_disturb_no_session() {
    let cluster = Cluster::start(BIN, 2, &["--balancer", "work"])
        .await
        .unwrap();
    let target = cluster.nodes[0].addr().to_string();
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    let work = Balancer::start(
        BalancerConfig::new("work")
            .algorithm(RoundRobin::new())
            .node_match_list(Vec::<String>::new()),
    )
    .await
    .unwrap();
    work.wait_for_members(2, MESH_TIMEOUT).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (work, stop) = (work.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u32, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    match work
                        .call::<Whoami>(())
                        .timeout(Duration::from_secs(5))
                        .await
                    {
                        Ok(_) => ok += 1,
                        Err(e) => failed.push(e.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    // Garbage: pseudo-random bytes, then hang up.
    let mut garbage = TcpStream::connect(&target).await.unwrap();
    let bytes: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let _ = garbage.write_all(&bytes).await;
    drop(garbage);
    // Half a frame: a length prefix promising 64 KiB, 10 bytes of it, then silence.
    let mut half = TcpStream::connect(&target).await.unwrap();
    let _ = half.write_all(&65_536u64.to_be_bytes()).await;
    let _ = half.write_all(&[7u8; 10]).await;
    // A huge length prefix.
    let mut huge = TcpStream::connect(&target).await.unwrap();
    let _ = huge.write_all(&u64::MAX.to_be_bytes()).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ok, mut failed) = (0, Vec::new());
    for caller in callers {
        let (o, f) = caller.await.unwrap();
        ok += o;
        failed.extend(f);
    }
    assert!(
        failed.is_empty(),
        "{} calls failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert!(ok > 100, "only {ok} calls in 1.5 s");
    assert_eq!(work.members().len(), 2, "a member was lost");
    drop((half, huge));
    work.stop().await;
    me.shutdown().await;
    cluster.shutdown().await;
}

/// Waits at most `bound` for the node to close `stream` (a read returns end of file or an
/// error); whether it did.
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> bool {
    let mut buf = [0u8; 256];
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match tokio::time::timeout_at(deadline, tokio::io::AsyncReadExt::read(stream, &mut buf))
            .await
        {
            Err(_elapsed) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue, // whatever the node says before closing
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_are_closed_and_never_keep_peers_out() {
    let cluster = Cluster::start(BIN, 1, &[]).await.unwrap();
    let target = cluster.nodes[0].addr().to_string();
    // 200 connections that send nothing, one that sends half a frame and one byte-at-a-time
    // header, all held open.
    let mut silent = Vec::new();
    for _ in 0..200 {
        silent.push(TcpStream::connect(&target).await.unwrap());
    }
    let mut half = TcpStream::connect(&target).await.unwrap();
    half.write_all(&1_000u32.to_be_bytes()).await.unwrap();
    half.write_all(&[7u8; 10]).await.unwrap();
    let mut trickle = TcpStream::connect(&target).await.unwrap();
    trickle.write_all(&[0u8]).await.unwrap();

    // Meanwhile a node joins through it at once.
    let me = cluster.join("tester", MESH_TIMEOUT).await.unwrap();
    assert_eq!(
        me.call::<Whoami>(cluster.names()[0].clone(), ())
            .await
            .unwrap(),
        cluster.names()[0]
    );
    // Each stalled connection is closed once connect_timeout (5 s) has passed (+2 s slack).
    let bound = Duration::from_secs(7);
    assert!(
        closed_within(&mut half, bound).await,
        "half frame kept open"
    );
    assert!(
        closed_within(&mut trickle, bound).await,
        "trickle kept open"
    );
    for (i, stream) in silent.iter_mut().enumerate() {
        assert!(
            closed_within(stream, Duration::from_secs(2)).await,
            "silent connection {i} kept open"
        );
    }
    // The session that did authenticate is untouched.
    assert_eq!(me.nodes(), cluster.names());
    me.shutdown().await;
    cluster.shutdown().await;
}
