//! A load run through a balancer: a [`DemoCall`] streamed from concurrent callers, and the
//! wait for the balancer's members before it.

use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use rpc_load_balancer::{Balancer, Error};

use super::{drive_until, progress_bar, Amount, DemoCall, Failure, LoadReport};

/// Streams `call` through `balancer` from `concurrency` callers until `amount` is reached.
/// Shows a progress bar on stderr when `progress` (and stderr is a terminal).
pub async fn run(
    balancer: &Balancer,
    call: &DemoCall,
    amount: Amount,
    concurrency: u32,
    timeout: Duration,
    progress: bool,
) -> LoadReport {
    run_until(
        balancer,
        call,
        amount,
        concurrency,
        timeout,
        progress,
        std::future::pending(),
    )
    .await
    .0
}

/// [`run`] that also ends when `stop` resolves: the report then counts the calls that had
/// ended, and the second value is `true` (see [`drive_until`]).
pub async fn run_until(
    balancer: &Balancer,
    call: &DemoCall,
    amount: Amount,
    concurrency: u32,
    timeout: Duration,
    progress: bool,
    stop: impl std::future::Future<Output = ()>,
) -> (LoadReport, bool) {
    let bar = match (progress, amount) {
        (true, Amount::Calls(n)) => progress_bar(n, false, balancer_algorithm(balancer)),
        (true, Amount::Duration(d)) => progress_bar(
            d.as_secs_f64().ceil().max(1.0) as u64,
            true,
            balancer_algorithm(balancer),
        ),
        (false, _) => ProgressBar::hidden(),
    };
    let (balancer_ref, call_ref) = (balancer.clone(), Arc::new(call.clone()));
    let (mut report, stopped) = drive_until(concurrency, amount, &bar, stop, move |_caller, n| {
        let (balancer, call) = (balancer_ref.clone(), Arc::clone(&call_ref));
        async move { call.run(&balancer, timeout, n).await.map_err(Failure::from) }
    })
    .await;
    report.algorithm = balancer_algorithm(balancer);
    bar.finish_and_clear();
    (report, stopped)
}

fn balancer_algorithm(balancer: &Balancer) -> String {
    balancer.algorithm_name().to_string()
}

/// Waits until `balancer` has at least `count` members, at most `timeout`.
///
/// Errors: [`Error::NoMembers`] if it does not.
pub async fn wait_for_members(
    balancer: &Balancer,
    count: usize,
    timeout: Duration,
) -> Result<(), Error> {
    let mut members = balancer.watch_members();
    let reached = tokio::time::timeout(timeout, members.wait_for(|m| m.len() >= count)).await;
    match reached {
        Ok(Ok(_)) => Ok(()),
        _ => Err(Error::NoMembers {
            balancer: balancer.name().to_string(),
        }),
    }
}
