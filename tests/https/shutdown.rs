//! SIGTERM while requests are in flight: the binary keeps answering during
//! the shutdown delay, loses no request, and exits 0.

use crate::https_support;

use std::process::Command;
use std::time::{Duration, Instant};

use envtest::{ServeCommand, Served};
use https_support::{Client, admin_get, fixture_json, response_for};
use hyper::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends one AdmissionReview padded to about 1 MiB, trickling the body over
/// `spread`, and returns the answer's status line and JSON body.
async fn slow_request(client: Client, request: Value, spread: Duration) -> (String, Value) {
    let mut body = request.to_string().into_bytes();
    body.resize(1024 * 1024, b' ');
    let (mut tls, _) = client.connect_tls().await.expect("connect");
    let head = format!(
        "POST /validate?timeout=30s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.expect("head");
    let chunks = 20;
    let chunk = body.len().div_ceil(chunks);
    for piece in body.chunks(chunk) {
        tls.write_all(piece).await.expect("body chunk");
        tls.flush().await.expect("flush");
        tokio::time::sleep(spread / chunks as u32).await;
    }
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tls.read(&mut buf).await.expect("read answer");
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some(at) = text.find("\r\n\r\n") {
            let length: usize = text[..at]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if answer.len() >= at + 4 + length {
                let status = text.lines().next().unwrap_or_default().to_owned();
                let json =
                    serde_json::from_slice(&answer[at + 4..at + 4 + length]).unwrap_or(Value::Null);
                return (status, json);
            }
        }
    }
    (String::from_utf8_lossy(&answer).into_owned(), Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_loses_no_in_flight_request_and_exits_zero() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("dir");
    let log = dir.path().join("webhook.log");
    let mut command = ServeCommand::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"));
    command.args = [
        "--shutdown-delay",
        "2s",
        "--shutdown-grace",
        "10s",
        "--dev-certs-dir",
        &dir.path().display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let mut served = tokio::task::spawn_blocking({
        let log = log.clone();
        move || {
            let mut served = Served::start("webhook", &command, &log)?;
            served.wait_for("/readyz", Duration::from_secs(20))?;
            Ok::<_, String>(served)
        }
    })
    .await
    .expect("the launcher's thread")
    .unwrap_or_else(|why| panic!("server never became ready: {why}"));
    let (addr, admin) = (served.bound().webhook, served.bound().admin);
    let ca = std::fs::read_to_string(dir.path().join("ca.crt")).expect("ca");
    let client = Client::build(addr, &[&ca], None);

    // Eight requests whose bodies take 4s to arrive: in flight across the
    // signal, the 2s delay and the listener's close.
    let fixtures = [
        "01-create-kubectl-apply-validate.json",
        "02-update-timeout-kubectl-apply-validate.json",
        "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
        "04-allow-data-loss-argocd-server-action-validate.json",
    ];
    let mut slow = Vec::new();
    for i in 0..8 {
        let request = fixture_json(fixtures[i % fixtures.len()]);
        let mut request = request.clone();
        request["request"]["uid"] = Value::String(format!("slow-{i}"));
        slow.push(tokio::spawn(slow_request(
            client.clone(),
            request,
            Duration::from_secs(4),
        )));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let pid = served.pid().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    tokio::time::sleep(Duration::from_millis(300)).await;

    // During the delay: not ready, but new requests are still answered.
    assert_eq!(
        admin_get(admin, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let request = fixture_json("01-create-kubectl-apply-validate.json");
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(
        response["allowed"], true,
        "answered during the shutdown delay"
    );

    for (i, task) in slow.into_iter().enumerate() {
        let (status, json) = task.await.expect("slow client");
        assert!(status.starts_with("HTTP/1.1 200"), "request {i}: {status}");
        assert_eq!(
            json["response"]["uid"],
            format!("slow-{i}"),
            "request {i} answered"
        );
    }
    let started = Instant::now();
    let status = loop {
        if let Some(status) = served.try_wait() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "did not exit");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("shutdown requested"), "{stderr}");
}
