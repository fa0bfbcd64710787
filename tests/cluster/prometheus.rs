//! The Prometheus example serves the library's series with the `le` bounds of `describe()`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rpc_load_balancer::telemetry::{describe, SeriesKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// `target/<profile>/examples/prometheus`, built by cargo with the tests.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    profile_dir.join("examples").join("prometheus")
}

async fn scrape(addr: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await?;
    Ok(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prometheus_example_exposes_the_described_buckets() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(example())
        .args(["--listen", &addr, "--calls", "100", "--serve-secs", "20"])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("examples/prometheus is built with the tests");
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        if let Ok(body) = scrape(&addr).await {
            if body.contains("rpc_load_balancer_rpc_request_stop_count") {
                break body;
            }
        }
        assert!(Instant::now() < deadline, "no metrics served at {addr}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = child.start_kill();

    // (LeastCpu's Poller series appear only with a LeastCpu balancer, which the example has
    // not; ejection's, slow start's and pushback's only with those options.)
    let described = describe().into_iter().filter(|s| !crate::optional(s.name));
    for series in described {
        let name = series.name.replace('.', "_");
        assert!(
            body.contains(&format!("# TYPE {name}")),
            "{name} missing:\n{body}"
        );
        if series.kind == SeriesKind::Histogram {
            for bound in series.buckets.unwrap() {
                let le = format!("le=\"{bound}\"");
                assert!(
                    body.lines()
                        .any(|l| l.starts_with(&format!("{name}_bucket")) && l.contains(&le)),
                    "{name} has no bucket {le}"
                );
            }
        }
    }
    assert!(body.contains(r#"status="ok""#));
}
