//! Request bodies against a real server, each test ending with a normal
//! request answered correctly: the nastiest malformed bodies (deep nesting,
//! numbers out of range, broken text, duplicate keys, the size limit),
//! clients that disconnect mid-body, and many concurrent 8 MiB bodies
//! (memory measured on the binary).
//!
//! Everything talks to 127.0.0.1 only. The heavier tests take a lock so
//! their memory figures do not disturb one another. Findings and numbers:
//! docs/robustness.md (`-- --nocapture` prints them).

use crate::admission_bodies;
use crate::https_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use https_support::binary::Binary;
use https_support::body::Stalled;
use https_support::{
    Client, TestServer, admin_get, fixture_json, metric_value, normal_request, response_for,
};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pipelinerollout_webhook::admission::Webhook;
use pipelinerollout_webhook::policy::Policy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serialises the tests whose timings or memory figures the others would
/// disturb on a 2-core machine.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

static POLICY: LazyLock<Policy> = LazyLock::new(Policy::built_in);

async fn in_flight(admin: SocketAddr) -> f64 {
    let (_, _, metrics) = admin_get(admin, "/metrics").await;
    metric_value(&metrics, "pipelinerollout_webhook_requests_in_flight ")
        .unwrap_or_else(|| panic!("no in-flight gauge in\n{metrics}"))
}

// ---------------------------------------------------------------------------
// the nastiest bodies

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nastiest_bodies_over_https_leave_the_server_serving() {
    let server = TestServer::start(Policy::built_in()).await;
    let client: Client = server.client();
    let mut report = Vec::new();
    for (what, path, body) in admission_bodies::nasty::nasty_bodies() {
        let webhook = if path == "/mutate" {
            Webhook::Mutate
        } else {
            Webhook::Validate
        };
        let expected = https_support::answer_now(webhook, &POLICY, &body);
        let answer = client.post(path, body.clone()).await;
        match expected {
            Ok((_, outcome)) => {
                assert_eq!(answer.status, StatusCode::OK, "{what}: {}", answer.text());
                assert_eq!(
                    answer.body.as_ref(),
                    outcome.body.as_slice(),
                    "{what}: the server answers as answer() does"
                );
            }
            Err(_) => {
                assert!(
                    answer.status.is_client_error(),
                    "{what}: {} {}",
                    answer.status,
                    answer.text()
                );
            }
        }
        let summary = if answer.status == StatusCode::OK {
            let response = &answer.json()["response"];
            format!(
                "allowed {}, {}",
                response["allowed"],
                response["status"]["message"]
                    .as_str()
                    .or_else(|| response["warnings"][0].as_str())
                    .unwrap_or("")
            )
        } else {
            answer.text()
        };
        let summary: String = summary.trim().chars().take(110).collect();
        report.push(format!(
            "{what} ({} bytes): {} {summary}",
            body.len(),
            answer.status.as_u16()
        ));
    }
    eprintln!("nastiest bodies over HTTPS:\n  {}", report.join("\n  "));
    // Still serving, and correctly.
    let request = fixture_json("01-create-kubectl-apply-validate.json");
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], true);
    let (status, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        metrics.contains("pipelinerollout_webhook_requests_in_flight 0"),
        "{metrics}"
    );
}

// ---------------------------------------------------------------------------
// (b) disconnect mid-body

/// (b) 50 clients (25 over HTTP/1.1, 25 over HTTP/2) announce 100,000 bytes,
/// send 1,000 and disconnect: the in-flight gauge counts them and returns
/// to 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_disconnect_mid_body_leave_nothing_in_flight() {
    let _heavy = HEAVY.lock().await;
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    normal_request(&client).await;
    let chunk = vec![b' '; 1000];

    let mut h1 = Vec::new();
    for _ in 0..25 {
        let (mut tls, _) = client.connect_tls().await.expect("connect");
        let head = "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n";
        tls.write_all(head.as_bytes()).await.expect("head");
        tls.write_all(&chunk).await.expect("1000 bytes");
        tls.flush().await.expect("flush");
        h1.push(tls);
    }
    let mut h2 = Vec::new();
    for _ in 0..25 {
        let (tls, _) = client.connect_tls().await.expect("connect");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .expect("h2 handshake");
        let conn = tokio::spawn(conn);
        let request = Request::post(format!("https://localhost:{}/validate", server.addr.port()))
            .header("content-type", "application/json")
            .header("content-length", "100000")
            .body(Stalled(Some(Bytes::from(chunk.clone())), 100_000))
            .expect("request");
        let pending = tokio::spawn(async move { sender.send_request(request).await });
        h2.push((conn, pending));
    }

    // All 50 are in flight (their handlers wait for the rest of the body).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut peak = 0.0;
    while peak < 50.0 {
        assert!(Instant::now() < deadline, "only {peak} requests in flight");
        tokio::time::sleep(Duration::from_millis(50)).await;
        peak = in_flight(server.admin_addr).await;
    }

    // Now they all vanish without finishing.
    let dropped = Instant::now();
    drop(h1);
    for (conn, pending) in h2 {
        conn.abort();
        pending.abort();
    }
    let mut now = peak;
    while now > 0.0 {
        assert!(
            dropped.elapsed() < Duration::from_secs(5),
            "{now} requests still in flight 5s after their clients left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        now = in_flight(server.admin_addr).await;
    }
    let (_, _, metrics) = server.admin_get("/metrics").await;
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("pipelinerollout_webhook_requests_total"))
        .collect();
    eprintln!(
        "mid-body disconnects: in flight peaked at {peak}, back to 0 after {:?}; {counted:?}",
        dropped.elapsed()
    );
    normal_request(&client).await;
    assert_eq!(in_flight(server.admin_addr).await, 0.0);
}

// ---------------------------------------------------------------------------
// (d) many 8 MiB bodies

/// Sends `body` with a raw HTTP/1.1 request and returns the status line
/// (empty if the server closed without answering).
async fn raw_post(client: &Client, body: &[u8]) -> String {
    let (mut tls, _) = client.connect_tls().await.expect("connect");
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let _ = tls.write_all(head.as_bytes()).await;
    let _ = tls.write_all(body).await;
    let _ = tls.flush().await;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(30), tls.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => answer.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// (d) 16 concurrent 8 MiB AdmissionReviews (the largest accepted), then 16
/// just over the limit, against the binary: all answered, normal requests
/// still served meanwhile, and the peak RSS stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_8mib_bodies_keep_memory_bounded() {
    const LIMIT: usize = 8 * 1024 * 1024;
    let _heavy = HEAVY.lock().await;
    let binary = Binary::start(None).await;
    normal_request(&binary.client).await;
    let idle_kib = binary.status_kib("VmRSS");

    let request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let mut body = request.to_string().into_bytes();
    body.resize(LIMIT, b' ');
    let body = Bytes::from(body);

    let big_done = Arc::new(AtomicUsize::new(0));
    let mut big = Vec::new();
    let started = Instant::now();
    for _ in 0..16 {
        let (client, body, done) = (binary.client.clone(), body.clone(), Arc::clone(&big_done));
        big.push(tokio::spawn(async move {
            let answer = client.post("/validate", body).await;
            done.fetch_add(1, Ordering::SeqCst);
            answer
        }));
    }
    // Normal requests meanwhile, and the RSS sampled.
    let mut normal = Vec::new();
    let mut peak_sampled = 0;
    while big_done.load(Ordering::SeqCst) < 16 {
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "8 MiB bodies not answered"
        );
        peak_sampled = peak_sampled.max(binary.status_kib("VmRSS"));
        normal.push(normal_request(&binary.client).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let big_took = started.elapsed();
    let peak_accepted_kib = binary.status_kib("VmHWM");
    for task in big {
        let answer = task.await.expect("big request");
        let response = response_for(&request, &answer);
        assert!(response["allowed"].is_boolean());
    }

    // Just over the limit: refused with 413 (or closed), never buffered whole.
    let mut over = Vec::new();
    let mut too_big = body.to_vec();
    too_big.push(b' ');
    let too_big = Bytes::from(too_big);
    for _ in 0..16 {
        let (client, body) = (binary.client.clone(), too_big.clone());
        over.push(tokio::spawn(async move { raw_post(&client, &body).await }));
    }
    let mut statuses = Vec::new();
    for task in over {
        statuses.push(task.await.expect("over-limit request"));
    }
    for status in &statuses {
        assert!(
            status.is_empty() || status.starts_with("HTTP/1.1 413"),
            "over the limit: {status:?}"
        );
    }
    let peak_kib = binary.status_kib("VmHWM");
    normal_request(&binary.client).await;
    let after_kib = binary.status_kib("VmRSS");
    let worst = normal.iter().max().copied().unwrap_or_default();
    eprintln!(
        "8 MiB bodies: 16 answered in {big_took:?}; {} normal requests meanwhile, worst {worst:?}; \
         RSS idle {} MiB, peak (VmHWM) {} MiB after the 16 accepted and {} MiB after the 16 \
         over the limit, sampled peak {} MiB, after {} MiB; over-limit answers: {} x 413, {} closed",
        normal.len(),
        idle_kib / 1024,
        peak_accepted_kib / 1024,
        peak_kib / 1024,
        peak_sampled / 1024,
        after_kib / 1024,
        statuses
            .iter()
            .filter(|s| s.starts_with("HTTP/1.1 413"))
            .count(),
        statuses.iter().filter(|s| s.is_empty()).count(),
    );
    assert!(
        peak_kib < 400 * 1024,
        "peak RSS {} MiB with 16 x 8 MiB bodies",
        peak_kib / 1024
    );
    assert!(!normal.is_empty(), "no normal request was sent meanwhile");
}
