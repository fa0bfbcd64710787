//! How `rpclb call`, `load`, `control`, `demo` and `bench` report a failure: the JSON error
//! object, the one document of a failed `demo --json` or `bench --json`, and the exit status.

use rpc_load_balancer::Error;
use serde_json::{json, Value};

/// The JSON form of an error: `{"kind","code","message","node"}`.
pub fn error_json(error: &Error) -> Value {
    json!({
        "kind": error.kind(),
        "code": error.code().as_str(),
        "message": error.to_string(),
        "node": error.node(),
    })
}

/// The one JSON document `demo --json` and `bench --json` print when they fail before their
/// report: `{"ok":false,"error":{"kind","code","message","node"}}` — the library's error as
/// [`error_json`] gives it (found through the harness's error too), else kind `"failed"` with
/// code and node null.
pub fn failure_document(error: &(dyn std::error::Error + 'static)) -> Value {
    let library = error.downcast_ref::<Error>().or_else(|| {
        match error.downcast_ref::<crate::harness::HarnessError>() {
            Some(crate::harness::HarnessError::Node(inner)) => Some(inner),
            _ => None,
        }
    });
    let error = match library {
        Some(error) => error_json(error),
        None => json!({"kind": "failed", "code": null, "message": error.to_string(), "node": null}),
    };
    json!({"ok": false, "error": error})
}

/// Why `call`, `control` or `load` could not do its work: the library's error (joining the
/// cluster, starting the client balancer, the call itself), or a usage error found after
/// parsing (an unknown demo function or control request, a bad argument).
#[derive(Debug)]
pub enum CmdFailure {
    /// The library's error: exit status 1.
    Error(Error),
    /// A usage error: exit status 2.
    Usage(String),
}

impl From<Error> for CmdFailure {
    fn from(error: Error) -> Self {
        Self::Error(error)
    }
}

impl CmdFailure {
    /// The JSON error object, as [`error_json`] gives it; a usage error is
    /// `{"kind":"usage","code":"bad_request","message":..,"node":null}`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Error(error) => error_json(error),
            Self::Usage(message) => json!({
                "kind": "usage",
                "code": rpc_load_balancer::ErrorCode::BadRequest.as_str(),
                "message": message,
                "node": null,
            }),
        }
    }

    /// The node the error is about, when there is one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Self::Error(error) => error.node(),
            Self::Usage(_) => None,
        }
    }

    /// The exit status: 1 for the library's errors, 2 for usage errors.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Error(_) => 1,
            Self::Usage(_) => 2,
        }
    }

    /// Prints `error: KIND: MESSAGE` (usage: `error: MESSAGE`) on stderr and returns the exit
    /// status.
    pub(crate) fn report(&self) -> i32 {
        match self {
            Self::Error(error) => eprintln!("error: {}: {error}", error.kind()),
            Self::Usage(usage) => eprintln!("error: {usage}"),
        }
        self.exit_code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_of_demo_and_bench_are_one_json_document() {
        let peers = Error::PeersNotReady {
            wanted: 3,
            connected: 2,
            timeout: std::time::Duration::from_secs(15),
        };
        let direct = failure_document(&peers);
        assert_eq!(direct["ok"], false);
        assert_eq!(direct["error"], error_json(&peers));
        let wrapped = crate::harness::HarnessError::Node(peers.clone());
        assert_eq!(failure_document(&wrapped), direct);
        let other: Box<dyn std::error::Error + Send + Sync> = "expected 3 nodes, have 2".into();
        let document = failure_document(other.as_ref());
        assert_eq!(document["error"]["kind"], "failed");
        assert_eq!(document["error"]["message"], "expected 3 nodes, have 2");
        assert!(document["error"]["code"].is_null() && document["error"]["node"].is_null());
    }

    #[test]
    fn failures_have_the_error_object_of_call_errors() {
        let error = Error::ConnectFailed {
            addr: "h:1".into(),
            reason: "wrong cookie".into(),
        };
        let failure = CmdFailure::from(error.clone());
        assert_eq!(failure.to_json(), error_json(&error));
        assert_eq!(failure.exit_code(), 1);
        let usage = CmdFailure::Usage("unknown control request".into());
        assert_eq!(
            usage.to_json(),
            json!({"kind": "usage", "code": "bad_request", "message": "unknown control request", "node": null})
        );
        assert_eq!(usage.exit_code(), 2);
        assert_eq!(usage.node(), None);
    }
}
