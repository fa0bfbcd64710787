//! A served call's context: its deadline and its cancellation.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_call_past_its_deadline_is_stopped() {
    let shared = shared();
    let (status, _) = status_of(&shared, &call("sleep", 50, &10_000u64)).await;
    assert_eq!(status, "DeadlineExceeded");
    assert_eq!(shared.served.in_flight.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn a_cancelled_call_is_aborted_while_running_and_skipped_if_it_comes_later() {
    let shared = std::sync::Arc::new(shared());
    // Running: the cancellation aborts the handler long before its 10 s deadline.
    let running = {
        let shared = std::sync::Arc::clone(&shared);
        tokio::spawn(async move { status_of(&shared, &call("sleep", 10_000, &5_000u64)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(shared.calls.cancel(1), "the call was running");
    let (status, _) = tokio::time::timeout(Duration::from_secs(1), running)
        .await
        .expect("aborted at once")
        .unwrap();
    assert_eq!(status, "DeadlineExceeded");
    assert_eq!(shared.served.in_flight.load(Ordering::Relaxed), 0);
    // Cancelled before it arrives: skipped without running (an echo would reply Ok).
    assert!(!shared.calls.cancel(1));
    let (status, _) = status_of(&shared, &call("echo", 1000, &"late".to_string())).await;
    assert_eq!(status, "DeadlineExceeded");
    // The id is forgotten once used: a new call with it runs.
    let (status, _) = status_of(&shared, &call("echo", 1000, &"again".to_string())).await;
    assert_eq!(status, "Ok");
}

/// Hands its call's context to the test (through `slot`), then waits for its cancellation
/// and replies how much time was left when it started, in ms (`None`: no deadline).
struct Watch(std::sync::Arc<std::sync::Mutex<Option<crate::CallContext>>>);
impl RemoteFunction for Watch {
    const NAME: &'static str = "watch";
    type Args = bool;
    type Reply = Option<u64>;
    async fn call(&self, wait: bool) -> Result<Option<u64>, FunctionError> {
        let context = crate::CallContext::current();
        *self.0.lock().unwrap() = Some(context.clone());
        let left = context.time_left().map(|left| left.as_millis() as u64);
        if wait {
            context.cancelled().await;
        }
        Ok(left)
    }
}

fn watched() -> (
    std::sync::Arc<Transport>,
    std::sync::Arc<std::sync::Mutex<Option<crate::CallContext>>>,
) {
    let shared = shared();
    let slot = std::sync::Arc::default();
    shared
        .registry
        .register(Watch(std::sync::Arc::clone(&slot)))
        .unwrap();
    (std::sync::Arc::new(shared), slot)
}

#[tokio::test]
async fn a_served_call_sees_its_deadline_and_a_cast_has_none() {
    let (shared, slot) = watched();
    let (status, value) = status_of(&shared, &call("watch", 30_000, &false)).await;
    assert_eq!(status, "Ok");
    let left = postcard::from_bytes::<Option<u64>>(&value)
        .unwrap()
        .unwrap();
    assert!((20_000..=30_000).contains(&left), "{left} ms left");
    let context = slot.lock().unwrap().take().unwrap();
    assert!(
        !context.is_cancelled(),
        "a call that returned is not cancelled"
    );
    // Deadline 0: a cast.
    let (status, value) = status_of(&shared, &call("watch", 0, &false)).await;
    assert_eq!(status, "Ok");
    assert_eq!(postcard::from_bytes::<Option<u64>>(&value).unwrap(), None);
    let context = slot.lock().unwrap().take().unwrap();
    assert_eq!(context.deadline(), None);
}

/// The context `Watch` handed over, once its call has started (≤ 5 s).
async fn started(slot: &std::sync::Mutex<Option<crate::CallContext>>) -> crate::CallContext {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(context) = slot.lock().unwrap().take() {
            return context;
        }
        assert!(tokio::time::Instant::now() < deadline, "the call started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn a_served_calls_context_is_cancelled_by_its_caller_its_deadline_and_an_abandoned_drain() {
    let (shared, slot) = watched();
    // The caller cancels (the cancel control request).
    let running = {
        let shared = std::sync::Arc::clone(&shared);
        tokio::spawn(async move { status_of(&shared, &call("watch", 10_000, &true)).await })
    };
    let context = started(&slot).await;
    assert!(!context.is_cancelled());
    assert!(shared.calls.cancel(1));
    let (status, _) = running.await.unwrap();
    assert_eq!(status, "DeadlineExceeded");
    assert!(context.is_cancelled(), "cancelled by its caller");

    // The deadline passes on this node (the function, awaiting its cancellation, may end
    // first and reply).
    let _ = status_of(&shared, &call("watch", 30, &true)).await;
    assert!(
        started(&slot).await.is_cancelled(),
        "cancelled at its deadline"
    );

    // The drain gives up on it (a cast: no deadline); the function ends on the signal.
    let abandoned = std::sync::Arc::new(crate::function::Signal::default());
    let running = {
        let shared = std::sync::Arc::clone(&shared);
        let abandoned = std::sync::Arc::clone(&abandoned);
        tokio::spawn(
            async move { serve_call_in(&shared, call("watch", 0, &true), abandoned).await },
        )
    };
    let context = started(&slot).await;
    assert!(!context.is_cancelled());
    abandoned.fire();
    let reply = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .expect("the function saw its cancellation")
        .unwrap();
    assert_eq!(reply::decode(&reply).unwrap().0, ReplyStatus::Ok);
    assert!(context.is_cancelled(), "cancelled by the abandoned drain");
}
