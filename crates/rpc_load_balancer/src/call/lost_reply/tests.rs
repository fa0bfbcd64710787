use super::*;

fn remote(failure: RemoteFailure, message: &str) -> Result<(), Error> {
    Err(Error::Remote {
        node: "n".into(),
        function: "f".into(),
        failure,
        message: message.into(),
    })
}

#[test]
fn only_a_failure_with_the_set_message_reads_as_lost_and_the_message_is_set_once() {
    // (Process-wide: the one test of this binary that sets it.)
    let marker = "lost_reply test: read me as a lost connection";
    assert!(read_failures_as_lost_connections(marker));
    assert!(read_failures_as_lost_connections(marker), "the same again");
    assert!(!read_failures_as_lost_connections("another"), "set once");
    assert!(is_lost(&remote(RemoteFailure::Failed, marker)));
    assert!(!is_lost(&remote(RemoteFailure::Failed, "another")));
    assert!(
        !is_lost(&remote(RemoteFailure::Panicked, marker)),
        "a panic ran"
    );
    assert!(!is_lost(&Ok::<(), Error>(())));
    assert!(!is_lost(&Err::<(), Error>(Error::BadRequest {
        node: "n".into(),
        message: marker.into(),
    })));
}
