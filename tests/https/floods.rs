//! Floods against a real server: large bodies against the body budget and
//! the request limit (memory measured on the binary), requests that wait
//! for budget past their deadline, and too many requests at once.
//!
//! Everything talks to 127.0.0.1 only. The floods take a lock so their
//! timings and memory figures do not disturb one another. Findings and
//! numbers: docs/robustness.md (`-- --nocapture` prints them).

use crate::https_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use http_body_util::Full;
use https_support::binary::Binary;
use https_support::body::Stalled;
use https_support::exchange::{Ended, ended, post};
use https_support::{Client, TestServer, admin_get, fixture_json, metric_value, response_for};
use hyper::StatusCode;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use pipelinerollout_webhook::policy::Policy;
use serde_json::Value;

/// Serialises the floods.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MIB: usize = 1024 * 1024;

/// The small request sent during the floods: an allowed CREATE.
const SMALL: &str = "01-create-kubectl-apply-validate.json";

/// The large request: fixture 07 (an UPDATE) padded with spaces.
fn large_body(size: usize) -> (Value, Bytes) {
    let request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let mut body = request.to_string().into_bytes();
    body.resize(size, b' ');
    (request, Bytes::from(body))
}

/// One request on a new HTTP/1.1 connection, answered within `limit`.
async fn h1_request(client: &Client, path: &str, body: Bytes, request: &Value) -> Ended {
    let limit = Duration::from_secs(40);
    let sent = async {
        let (tls, _) = match client.connect_tls().await {
            Ok(c) => c,
            Err(e) => return Ended::Failed(format!("connect: {e}")),
        };
        let (mut sender, conn) =
            match hyper::client::conn::http1::handshake(TokioIo::new(tls)).await {
                Ok(pair) => pair,
                Err(e) => return Ended::Failed(format!("handshake: {e}")),
            };
        tokio::spawn(conn);
        ended(
            sender
                .send_request(post(path, Full::new(body), false))
                .await,
            request,
        )
        .await
    };
    tokio::time::timeout(limit, sent)
        .await
        .unwrap_or_else(|_| Ended::Failed("no answer in 40s".to_owned()))
}

/// `streams` concurrent requests on one new HTTP/2 connection.
async fn h2_requests(
    client: &Client,
    path: &str,
    body: Bytes,
    request: &Value,
    streams: usize,
) -> Vec<Ended> {
    let (tls, _) = client.connect_tls().await.expect("connect");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let (mut sender, body, request, path) = (
            sender.clone(),
            body.clone(),
            request.clone(),
            path.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let sent = async {
                if let Err(e) = sender.ready().await {
                    return Ended::Failed(format!("not ready: {e}"));
                }
                ended(
                    sender
                        .send_request(post(&path, Full::new(body), true))
                        .await,
                    &request,
                )
                .await
            };
            tokio::time::timeout(Duration::from_secs(40), sent)
                .await
                .unwrap_or_else(|_| Ended::Failed("no answer in 40s".to_owned()))
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.push(task.await.expect("stream task"));
    }
    all
}

/// Small requests on one kept-alive HTTP/1.1 connection every 50 ms until
/// `stop`: how long each took. Each must be answered correctly.
async fn probe(client: Client, stop: Arc<AtomicBool>) -> Vec<Duration> {
    let request = fixture_json(SMALL);
    let mut conn = client.connect().await;
    let mut took = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let (status, body) = conn
            .post("/validate?timeout=10s", request.to_string())
            .await
            .expect("a small request during the flood is answered");
        took.push(started.elapsed());
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    took
}

async fn metrics_of(admin: SocketAddr) -> String {
    admin_get(admin, "/metrics").await.2
}

fn metric(metrics: &str, line_start: &str) -> f64 {
    metric_value(metrics, line_start).unwrap_or(0.0)
}

/// Checks a flood's outcome: every request answered with 200 (its uid
/// echoed) or 503 with a one-line reason, none failed. Returns (200s, 503s).
fn check_outcomes(what: &str, all: &[Ended]) -> (usize, usize) {
    let (mut ok, mut busy) = (0, 0);
    for e in all {
        match e {
            Ended::Answered => ok += 1,
            Ended::Unavailable(text) => {
                assert_eq!(text.trim_end().lines().count(), 1, "{what}: {text:?}");
                busy += 1;
            }
            other => panic!("{what}: a request ended with {other}"),
        }
    }
    assert!(ok > 0, "{what}: no request answered 200");
    (ok, busy)
}

/// What the peak RSS may exceed the idle RSS by, beyond the body budget:
/// HTTP/2 windows (1 MiB per connection), HTTP/1.1 and TLS buffers,
/// allocator slack. Without the budget, the floods below go 58 MiB (HTTP/1.1)
/// and 120 MiB (HTTP/2) over the idle RSS.
const OVERHEAD_MIB: u64 = 24;

/// Runs `flood` against the binary started with a body budget of
/// `budget_mib` while probing it; checks memory (the peak at most
/// [`OVERHEAD_MIB`] over idle plus the budget), the probes and the metrics,
/// and reports.
async fn flood_the_binary<F, Fut>(what: &str, budget_mib: u64, flood: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Vec<Ended>>,
{
    let _heavy = HEAVY.lock().await;
    let budget = format!("{budget_mib}Mi");
    let binary = Binary::start_with(None, &["--max-inflight-body-bytes", &budget]).await;
    let request = fixture_json(SMALL);
    response_for(
        &request,
        &binary.client.post("/validate", request.to_string()).await,
    );
    let idle_kib = binary.status_kib("VmHWM");
    let stop = Arc::new(AtomicBool::new(false));
    let prober = tokio::spawn(probe(binary.client.clone(), Arc::clone(&stop)));
    let started = Instant::now();
    let all = flood(binary.client.clone()).await;
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let probes = prober.await.expect("probe task");
    let peak_kib = binary.status_kib("VmHWM");
    let (ok, busy) = check_outcomes(what, &all);
    let metrics = metrics_of(binary.admin).await;
    let waits = metric(
        &metrics,
        "pipelinerollout_webhook_body_budget_waits_total{lane=\"large\"}",
    );
    let worst = probes.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{what}: {ok} x 200 and {busy} x 503 in {took:?}; VmHWM {} MiB idle, {} MiB peak; \
         {waits} waited for budget; {} small requests meanwhile, worst {worst:?}",
        idle_kib / 1024,
        peak_kib / 1024,
        probes.len(),
    );
    assert!(
        peak_kib <= idle_kib + (budget_mib + OVERHEAD_MIB) * 1024,
        "{what}: peak RSS {} MiB, {} MiB idle",
        peak_kib / 1024,
        idle_kib / 1024
    );
    assert!(waits > 0.0, "{what}: the budget never made a body wait");
    assert!(!probes.is_empty(), "{what}: no small request meanwhile");
    assert!(
        worst < Duration::from_secs(1),
        "{what}: a small request took {worst:?}"
    );
    for gauge in [
        "pipelinerollout_webhook_body_budget_reserved_bytes ",
        "pipelinerollout_webhook_requests_in_flight ",
    ] {
        assert_eq!(metric(&metrics, gauge), 0.0, "{gauge}");
    }
}

/// (f) 24 HTTP/1.1 clients each POST a 4 MiB AdmissionReview at once to
/// the binary with a 16 MiB body budget: every one is answered (200, or
/// 503 after waiting), none is reset, the peak RSS stays within the budget
/// and [`OVERHEAD_MIB`] of idle (96 MiB of bodies arrive), and small
/// requests meanwhile are answered promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_flood_of_large_bodies_stays_within_the_budget() {
    let (request, body) = large_body(4 * MIB);
    flood_the_binary("HTTP/1.1 flood, 24 x 4 MiB", 16, |client| async move {
        let mut tasks = Vec::new();
        for _ in 0..24 {
            let (client, body, request) = (client.clone(), body.clone(), request.clone());
            tasks.push(tokio::spawn(async move {
                h1_request(&client, "/validate?timeout=10s", body, &request).await
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.push(task.await.expect("request task"));
        }
        all
    })
    .await;
}

/// (g) 4 HTTP/2 connections with 16 concurrent 2 MiB streams each against
/// the binary with a 16 MiB body budget: as (f), 128 MiB of bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_flood_of_large_streams_stays_within_the_budget() {
    let (request, body) = large_body(2 * MIB);
    flood_the_binary("HTTP/2 flood, 4 x 16 x 2 MiB", 16, |client| async move {
        let client = client.http2();
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (client, body, request) = (client.clone(), body.clone(), request.clone());
            tasks.push(tokio::spawn(async move {
                h2_requests(&client, "/validate?timeout=10s", body, &request, 16).await
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("connection task"));
        }
        all
    })
    .await;
}

/// Starts a request on a new HTTP/1.1 connection that announces `announced`
/// bytes and sends 1,000: it holds its reservation (and its request slot)
/// until the returned task is aborted.
async fn stalled_request(client: &Client, announced: u64) -> tokio::task::JoinHandle<()> {
    let (tls, _) = client.connect_tls().await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .expect("handshake");
    let request = post(
        "/validate?timeout=30s",
        Stalled(Some(Bytes::from(vec![b' '; 1000])), announced),
        false,
    );
    tokio::spawn(async move {
        tokio::spawn(conn);
        let _ = sender.send_request(request).await;
    })
}

async fn wait_for_metric(admin: SocketAddr, line_start: &str, at_least: f64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if metric(&metrics_of(admin).await, line_start) >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{line_start} never reached {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// (h) A large body that cannot get budget before its deadline (the API
/// server's `?timeout=1s`) gets a 503 with a one-line reason, over HTTP/1.1
/// and HTTP/2 alike, shortly before the deadline; a small request meanwhile
/// is answered at once; afterwards the budget is whole again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_waits_past_its_deadline_gets_503() {
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.budget.max_inflight_body_bytes = 12 * MIB;
    })
    .await;
    let client = server.client();
    // An 8 MiB body that never arrives holds 8 of the 9 MiB large bodies
    // may use.
    let holder = stalled_request(&client, 8 * MIB as u64).await;
    let reserved = "pipelinerollout_webhook_body_budget_reserved_bytes ";
    wait_for_metric(server.admin_addr, reserved, (8 * MIB) as f64).await;

    let (request, body) = large_body(2 * MIB);
    let waiting_h1 = {
        let (client, body, request) = (client.clone(), body.clone(), request.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let e = h1_request(&client, "/validate?timeout=1s", body, &request).await;
            (e, started.elapsed())
        })
    };
    let waiting_h2 = {
        let (client, body, request) = (client.http2(), body.clone(), request.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let mut e = h2_requests(&client, "/validate?timeout=1s", body, &request, 1).await;
            (e.remove(0), started.elapsed())
        })
    };
    wait_for_metric(
        server.admin_addr,
        "pipelinerollout_webhook_body_budget_waits_total{lane=\"large\"}",
        2.0,
    )
    .await;
    let small = fixture_json(SMALL);
    let started = Instant::now();
    response_for(&small, &client.post("/validate", small.to_string()).await);
    let small_took = started.elapsed();

    for (protocol, task) in [("HTTP/1.1", waiting_h1), ("HTTP/2", waiting_h2)] {
        let (e, took) = task.await.expect("waiting request");
        let Ended::Unavailable(reason) = &e else {
            panic!("{protocol}: expected a 503, got {e}");
        };
        assert!(reason.contains("busy"), "{reason}");
        assert_eq!(reason.trim_end().lines().count(), 1, "{reason:?}");
        assert!(
            took >= Duration::from_millis(600) && took < Duration::from_secs(3),
            "{protocol}: answered after {took:?}"
        );
        eprintln!("{protocol}: 503 after {took:?}: {}", reason.trim_end());
    }
    eprintln!("a small request beside them took {small_took:?}");
    assert!(small_took < Duration::from_millis(500), "{small_took:?}");
    let metrics = metrics_of(server.admin_addr).await;
    assert_eq!(
        metric(
            &metrics,
            "pipelinerollout_webhook_limit_refusals_total{reason=\"body_budget\"}"
        ),
        2.0
    );
    holder.abort();
    let deadline = Instant::now() + Duration::from_secs(5);
    while metric(&metrics_of(server.admin_addr).await, reserved) > 0.0 {
        assert!(Instant::now() < deadline, "budget not given back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    response_for(&request, &client.post("/validate", body).await);
}

/// (i) With `--max-inflight-requests 2` and two requests in flight, a third
/// gets 503 at once; once they are gone, requests are served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_the_limit_get_503_at_once() {
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.budget.max_inflight_requests = 2
    })
    .await;
    let client = server.client();
    let holders = [
        stalled_request(&client, 100_000).await,
        stalled_request(&client, 100_000).await,
    ];
    wait_for_metric(
        server.admin_addr,
        "pipelinerollout_webhook_requests_in_flight ",
        2.0,
    )
    .await;
    let small = fixture_json(SMALL);
    let started = Instant::now();
    let answer = client.post("/validate", small.to_string()).await;
    let took = started.elapsed();
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        answer.text(),
        "too many requests in flight (the limit is 2); try again\n"
    );
    assert!(took < Duration::from_millis(500), "{took:?}");
    let metrics = metrics_of(server.admin_addr).await;
    assert_eq!(
        metric(
            &metrics,
            "pipelinerollout_webhook_limit_refusals_total{reason=\"requests_in_flight\"}"
        ),
        1.0
    );
    for holder in holders {
        holder.abort();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = client.post("/validate", small.to_string()).await;
        if answer.status == StatusCode::OK {
            response_for(&small, &answer);
            break;
        }
        assert!(Instant::now() < deadline, "slots never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
