//! Loading TLS settings: every bad input is an `InvalidConfig` naming its option.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::ServerName;

use super::*;
use crate::{Node, NodeConfig};

/// PEM text of a CA, and of two leaves (SAN `localhost`, `127.0.0.1`) it signed.
struct Pems {
    ca: String,
    cert: String,
    key: String,
    other_cert: String,
    other_key: String,
}

fn pems() -> Pems {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = || {
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let ((cert, key), (other_cert, other_key)) = (leaf(), leaf());
    Pems {
        ca: ca.pem(),
        cert,
        key,
        other_cert,
        other_key,
    }
}

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "rpclb-tls-unit-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn option_of(tls: &TlsConfig) -> (&'static str, String) {
    match tls.load() {
        Err(Error::InvalidConfig { option, reason }) => (option, reason),
        Err(other) => panic!("expected InvalidConfig, got {other:?}"),
        Ok(_) => panic!("expected InvalidConfig, got a loaded config"),
    }
}

/// A PEM block of `label` whose contents are not DER.
fn garbage_block(label: &str) -> String {
    format!("-----BEGIN {label}-----\nAAECAwQFBgcICQ==\n-----END {label}-----\n")
}

#[test]
fn valid_files_and_bytes_load() {
    let p = pems();
    let dir = TempDir::new();
    let files = TlsConfig::from_pem_files(
        dir.write("node.crt", &p.cert),
        dir.write("node.key", &p.key),
        dir.write("ca.crt", &p.ca),
    );
    assert!(files.load().is_ok());
    assert!(files.acceptor().is_ok());
    let bytes = TlsConfig::from_pem(&p.cert, &p.key, &p.ca).server_name("localhost");
    assert!(bytes.load().is_ok());
    // A chain with the CA after the leaf, and several CAs, are fine too.
    let chain = format!("{}{}", p.cert, p.ca);
    let cas = format!("{}{}", p.ca, p.ca);
    assert!(TlsConfig::from_pem(chain, &p.key, cas).load().is_ok());
}

#[test]
fn missing_files_name_their_option() {
    let p = pems();
    let dir = TempDir::new();
    let (cert, key, ca) = (
        dir.write("node.crt", &p.cert),
        dir.write("node.key", &p.key),
        dir.write("ca.crt", &p.ca),
    );
    let missing = dir.0.join("missing.pem");
    let cases = [
        (TlsConfig::from_pem_files(&missing, &key, &ca), "tls.cert"),
        (TlsConfig::from_pem_files(&cert, &missing, &ca), "tls.key"),
        (TlsConfig::from_pem_files(&cert, &key, &missing), "tls.ca"),
    ];
    for (tls, expected) in cases {
        let (option, reason) = option_of(&tls);
        assert_eq!(option, expected, "{reason}");
        assert!(reason.contains("cannot read"), "{reason}");
        assert!(reason.contains("missing.pem"), "names the file: {reason}");
    }
}

#[test]
fn bad_pem_names_its_option() {
    let p = pems();
    let not_pem = "this is not PEM\n";
    let cases = [
        (TlsConfig::from_pem(not_pem, &p.key, &p.ca), "tls.cert"),
        (TlsConfig::from_pem(&p.key, &p.key, &p.ca), "tls.cert"),
        (
            TlsConfig::from_pem(garbage_block("CERTIFICATE"), &p.key, &p.ca),
            "tls.cert",
        ),
        (TlsConfig::from_pem(&p.cert, not_pem, &p.ca), "tls.key"),
        (TlsConfig::from_pem(&p.cert, &p.cert, &p.ca), "tls.key"),
        (
            TlsConfig::from_pem(&p.cert, garbage_block("PRIVATE KEY"), &p.ca),
            "tls.key",
        ),
        (TlsConfig::from_pem(&p.cert, &p.key, not_pem), "tls.ca"),
        (TlsConfig::from_pem(&p.cert, &p.key, ""), "tls.ca"),
        (
            TlsConfig::from_pem(&p.cert, &p.key, garbage_block("CERTIFICATE")),
            "tls.ca",
        ),
    ];
    for (i, (tls, expected)) in cases.into_iter().enumerate() {
        let (option, reason) = option_of(&tls);
        assert_eq!(option, expected, "case {i}: {reason}");
    }
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let p = pems();
    let (option, reason) = option_of(&TlsConfig::from_pem(&p.cert, &p.other_key, &p.ca));
    assert_eq!(option, "tls.key", "{reason}");
    assert!(reason.contains("not the key"), "{reason}");
    assert!(TlsConfig::from_pem(&p.other_cert, &p.other_key, &p.ca)
        .load()
        .is_ok());
}

#[test]
fn a_bad_server_name_is_refused() {
    let p = pems();
    let tls = TlsConfig::from_pem(&p.cert, &p.key, &p.ca).server_name("not a name!");
    assert_eq!(option_of(&tls).0, "tls.server_name");
}

#[test]
fn the_server_name_defaults_to_the_dialled_host() {
    let p = pems();
    let tls = TlsConfig::from_pem(&p.cert, &p.key, &p.ca).load().unwrap();
    let name = |s: &str| ServerName::try_from(s.to_string()).unwrap();
    assert_eq!(tls.server_name_for("127.0.0.1:4100"), Ok(name("127.0.0.1")));
    assert_eq!(tls.server_name_for("[::1]:4100"), Ok(name("::1")));
    assert_eq!(tls.server_name_for("localhost:4100"), Ok(name("localhost")));
    assert!(tls.server_name_for("bad host:1").is_err());
    let fixed = TlsConfig::from_pem(&p.cert, &p.key, &p.ca)
        .server_name("cluster.internal")
        .load()
        .unwrap();
    assert_eq!(
        fixed.server_name_for("127.0.0.1:4100"),
        Ok(name("cluster.internal"))
    );
}

#[test]
fn debug_never_prints_key_material() {
    let p = pems();
    let shown = format!("{:?}", TlsConfig::from_pem(&p.cert, &p.key, &p.ca));
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    assert!(shown.contains("PEM in memory"), "{shown}");
    let files = format!(
        "{:?}",
        TlsConfig::from_pem_files("a.crt", Path::new("a.key"), "ca.crt")
    );
    assert!(files.contains("a.key"), "{files}");
}

#[tokio::test]
async fn node_start_fails_with_invalid_config() {
    let p = pems();
    let config = NodeConfig::new("tls_unit", "127.0.0.1:0")
        .cookie("c")
        .tls(TlsConfig::from_pem(&p.cert, &p.other_key, &p.ca));
    match Node::start(config).await {
        Err(Error::InvalidConfig {
            option: "tls.key", ..
        }) => {}
        other => panic!("expected InvalidConfig naming tls.key, got {other:?}"),
    }
    let missing =
        NodeConfig::new("tls_unit", "127.0.0.1:0")
            .cookie("c")
            .tls(TlsConfig::from_pem_files(
                "/nonexistent/a",
                "/nonexistent/b",
                "/nonexistent/c",
            ));
    match Node::start(missing).await {
        Err(Error::InvalidConfig {
            option: "tls.cert",
            reason,
        }) => assert!(reason.contains("/nonexistent/a"), "{reason}"),
        other => panic!("expected InvalidConfig naming tls.cert, got {other:?}"),
    }
}

/// PEM of a leaf for `names` (valid in 2020 only when `expired`), its key, and its CA.
fn leaf_for(names: &[&str], expired: bool) -> (String, String, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    if expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    let cert = params.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem(), ca.pem())
}

#[test]
fn a_certificate_peers_would_reject_is_refused_at_start() {
    let check = |names: &[&str], expired: bool, server_name: Option<&str>, host: &str| {
        let (cert, key, ca) = leaf_for(names, expired);
        let mut tls = TlsConfig::from_pem(cert, key, ca);
        if let Some(name) = server_name {
            tls = tls.server_name(name);
        }
        tls.load().unwrap().check_own_certificate(host)
    };
    // Naming the advertised host (an IP or a DNS name), or the fixed server name: fine.
    check(&["127.0.0.1"], false, None, "127.0.0.1").unwrap();
    check(&["box1"], false, None, "box1").unwrap();
    check(
        &["cluster.internal"],
        false,
        Some("cluster.internal"),
        "127.0.0.1",
    )
    .unwrap();
    // Another name, or expired: refused, naming the option and the reason.
    for (names, expired, server_name, host, why) in [
        (&["example.org"][..], false, None, "127.0.0.1", "127.0.0.1"),
        (
            &["box1"][..],
            false,
            Some("cluster.internal"),
            "box1",
            "cluster.internal",
        ),
        (&["127.0.0.1"][..], true, None, "127.0.0.1", "xpired"),
    ] {
        match check(names, expired, server_name, host) {
            Err(Error::InvalidConfig { option, reason }) => {
                assert_eq!(option, "tls.cert");
                assert!(reason.contains(why), "{reason}");
            }
            other => panic!("{names:?}: expected InvalidConfig, got {other:?}"),
        }
    }
}

#[test]
fn a_closed_handshake_names_every_likely_cause() {
    use std::io::{Error as IoError, ErrorKind};
    for kind in [
        ErrorKind::UnexpectedEof,
        ErrorKind::ConnectionReset,
        ErrorKind::ConnectionAborted,
    ] {
        let reason = tls_failure(&IoError::new(kind, "tls handshake eof"));
        assert!(
            reason.starts_with("TLS handshake failed: tls handshake eof; "),
            "{reason}"
        );
        // A plaintext peer is one cause among others, not the only one asserted.
        for cause in ["without TLS", "overloaded", "refused the connection"] {
            assert!(reason.contains(cause), "{kind:?}: {reason}");
        }
        assert!(!reason.contains("is it running without TLS?"), "{reason}");
    }
    let corrupt = tls_failure(&IoError::new(
        ErrorKind::InvalidData,
        "received corrupt message of type InvalidContentType",
    ));
    assert!(corrupt.contains("did not answer in TLS"), "{corrupt}");
    let other = tls_failure(&IoError::other("invalid peer certificate: UnknownIssuer"));
    assert_eq!(
        other,
        "TLS handshake failed: invalid peer certificate: UnknownIssuer"
    );
}
