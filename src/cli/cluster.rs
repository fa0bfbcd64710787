//! Options of every command that joins a cluster: the cookie and TLS.

use std::path::PathBuf;

use clap::Args;
use rpc_load_balancer::{NodeConfig, TlsConfig};

/// The cookie of every `rpclb` command not given `--cookie` or `$RPCLB_COOKIE`: for
/// development only, since anyone can read it here. `rpclb node` warns at start when it runs
/// with it.
pub const DEV_COOKIE: &str = "rpclb-dev-cookie";

/// Options shared by every command that joins a cluster.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// The cluster's shared secret.
    #[arg(long, env = "RPCLB_COOKIE", default_value = DEV_COOKIE)]
    pub cookie: String,
    /// TLS: this node's certificate chain, a PEM file (its certificate first, then any
    /// intermediates). With --tls-key and --tls-ca (all three or none), every session is
    /// mutual TLS 1.3: the node presents this certificate and accepts only peers whose
    /// certificate the CA signed, so plaintext nodes and nodes of another CA cannot connect;
    /// the cookie still applies. A dialled peer's certificate must name the host dialled (IP
    /// address or DNS SAN), unless --tls-server-name is given.
    #[arg(
        long,
        env = "RPCLB_TLS_CERT",
        value_name = "PEM_FILE",
        requires_all = ["tls_key", "tls_ca"]
    )]
    pub tls_cert: Option<PathBuf>,
    /// TLS: this node's private key, a PEM file (PKCS#8, PKCS#1 or SEC1), matching --tls-cert.
    #[arg(
        long,
        env = "RPCLB_TLS_KEY",
        value_name = "PEM_FILE",
        requires_all = ["tls_cert", "tls_ca"]
    )]
    pub tls_key: Option<PathBuf>,
    /// TLS: the CA certificate(s) every peer's certificate must be signed by, a PEM file.
    #[arg(
        long,
        env = "RPCLB_TLS_CA",
        value_name = "PEM_FILE",
        requires_all = ["tls_cert", "tls_key"]
    )]
    pub tls_ca: Option<PathBuf>,
    /// TLS: the name every dialled peer's certificate must carry (DNS name or IP address),
    /// instead of the host part of the address dialled. Needs --tls-cert.
    #[arg(
        long,
        env = "RPCLB_TLS_SERVER_NAME",
        value_name = "NAME",
        requires = "tls_cert"
    )]
    pub tls_server_name: Option<String>,
}

impl ClusterArgs {
    /// The TLS settings of `--tls-cert`, `--tls-key` and `--tls-ca` (and
    /// `--tls-server-name`); `None` without them (plain TCP).
    pub fn tls(&self) -> Option<TlsConfig> {
        let (Some(cert), Some(key), Some(ca)) = (&self.tls_cert, &self.tls_key, &self.tls_ca)
        else {
            return None;
        };
        let tls = TlsConfig::from_pem_files(cert, key, ca);
        Some(match &self.tls_server_name {
            Some(name) => tls.server_name(name),
            None => tls,
        })
    }

    /// Logs a warning when the cookie is [`DEV_COOKIE`] (call once, at start).
    pub fn warn_if_dev_cookie(&self) {
        if self.cookie == DEV_COOKIE {
            tracing::warn!(
                cookie = DEV_COOKIE,
                "this node uses the default development cookie: any process that knows it can \
                 join the cluster and call every function; set --cookie or RPCLB_COOKIE to the \
                 cluster's own secret"
            );
        }
    }

    /// `config` with this cookie and, if given, TLS.
    pub fn apply(&self, config: NodeConfig) -> NodeConfig {
        let config = config.cookie(&self.cookie);
        match self.tls() {
            Some(tls) => config.tls(tls),
            None => config,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::cli::node::tests::node_args;
    use clap::Parser as _;

    use crate::cli::{Cli, Command};

    #[test]
    fn tls_flags_come_all_three_or_none() {
        assert!(node_args(&[]).unwrap().cluster.tls().is_none());
        let tls = [
            "--tls-cert",
            "n.crt",
            "--tls-key",
            "n.key",
            "--tls-ca",
            "ca.crt",
        ];
        let args = node_args(&tls).unwrap();
        assert_eq!(args.cluster.tls_cert, Some(PathBuf::from("n.crt")));
        assert_eq!(args.cluster.tls_key, Some(PathBuf::from("n.key")));
        assert_eq!(args.cluster.tls_ca, Some(PathBuf::from("ca.crt")));
        let shown = format!("{:?}", args.cluster.tls().unwrap());
        assert!(shown.contains("n.key"), "{shown}");
        let named = node_args(&[&tls[..], &["--tls-server-name", "box"]].concat()).unwrap();
        assert_eq!(named.cluster.tls_server_name.as_deref(), Some("box"));
        for partial in [&tls[..2], &tls[2..4], &tls[4..], &tls[..4], &tls[2..]] {
            let error = node_args(partial).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::MissingRequiredArgument,
                "{partial:?}: {error}"
            );
        }
        assert!(node_args(&["--tls-server-name", "box"]).is_err());
        // Client commands take them too.
        let call = Cli::try_parse_from(
            ["rpclb", "call", "--peer", "h:1", "--node", "a@h", "whoami"]
                .iter()
                .chain(&tls),
        );
        match call.map(|cli| cli.command) {
            Ok(Command::Call(args)) => assert!(args.cluster.tls().is_some()),
            other => panic!("{other:?}"),
        }
    }
}
