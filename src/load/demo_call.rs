//! The demo function a load run calls (`--function`, `--arg`).

use std::sync::Arc;
use std::time::Duration;

use rpc_load_balancer::{Balancer, Error, RemoteFunction};

use crate::functions::{Burn, Echo, Sleep, Whoami};

/// Which demo function each call runs.
#[derive(Debug, Clone)]
pub enum DemoCall {
    /// `whoami`.
    Whoami,
    /// `echo` with this text.
    Echo(String),
    /// `sleep` this many ms.
    Sleep(u64),
    /// `burn` this many ms.
    Burn(u64),
}

impl DemoCall {
    /// Parses `--function F [--arg X]`.
    ///
    /// Errors: a message for an unknown function or a bad argument.
    pub fn parse(function: &str, arg: Option<&str>) -> Result<DemoCall, String> {
        let number = |what: &str| -> Result<u64, String> {
            let arg = arg.ok_or_else(|| format!("{what} needs --arg MS"))?;
            arg.parse()
                .map_err(|e| format!("{what}: {arg:?} is not a number: {e}"))
        };
        match function {
            "whoami" => Ok(DemoCall::Whoami),
            "echo" => Ok(DemoCall::Echo(arg.unwrap_or("hello").to_string())),
            "sleep" => Ok(DemoCall::Sleep(number("sleep")?)),
            "burn" => Ok(DemoCall::Burn(number("burn")?)),
            other => Err(format!(
                "unknown load function {other:?} (whoami, echo, sleep, burn)"
            )),
        }
    }

    /// Runs one call through `balancer`; the serving node on success.
    pub(super) async fn run(
        &self,
        balancer: &Balancer,
        timeout: Duration,
        key: u64,
    ) -> Result<Arc<str>, Error> {
        let key = key.to_be_bytes();
        match self {
            DemoCall::Whoami => keyed_call::<Whoami>(balancer, (), key, timeout).await,
            DemoCall::Echo(text) => keyed_call::<Echo>(balancer, text.clone(), key, timeout).await,
            DemoCall::Sleep(ms) => keyed_call::<Sleep>(balancer, *ms, key, timeout).await,
            DemoCall::Burn(ms) => keyed_call::<Burn>(balancer, *ms, key, timeout).await,
        }
    }
}

/// One call of `F` with `args` through `balancer`, with `key` as its routing key (HashRing)
/// and `timeout`; the serving node on success.
async fn keyed_call<F: RemoteFunction>(
    balancer: &Balancer,
    args: F::Args,
    key: [u8; 8],
    timeout: Duration,
) -> Result<Arc<str>, Error> {
    balancer
        .call::<F>(args)
        .key(key)
        .timeout(timeout)
        .with_node()
        .await
        .map(|r| r.1)
}
