//! Fault tests against a real server, each ending with a normal request
//! answered correctly: slow clients trickling headers, silent connections,
//! clients that disconnect mid-body, plain-text and garbage bytes on the TLS
//! port, many concurrent 8 MiB bodies (memory measured on the binary), and
//! running out of file descriptors (the binary under a low fd limit).
//!
//! Everything talks to 127.0.0.1 only. The heavier tests take a lock so
//! their timings do not disturb one another; the file runs in about 20s.
//! Findings and numbers: docs/robustness.md (`-- --nocapture` prints them).

mod https_support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use https_support::binary::Binary;
use https_support::body::Stalled;
use https_support::{Client, TestServer, admin_get, fixture_json, metric_value, response_for};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pipelinerollout_webhook::policy::Policy;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serialises the tests whose timings or memory figures the others would
/// disturb on a 2-core machine.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The fixture every "normal request" sends: an allowed CREATE.
const NORMAL: &str = "01-create-kubectl-apply-validate.json";

/// Sends the normal request and checks the answer; returns how long it took.
async fn normal_request(client: &Client) -> Duration {
    let request = fixture_json(NORMAL);
    let started = Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(20),
        client.post("/validate", request.to_string()),
    )
    .await
    .expect("a normal request is answered");
    let took = started.elapsed();
    let response = response_for(&request, &answer);
    assert_eq!(response["allowed"], true, "{response}");
    took
}

/// Reads until the peer closes the connection (EOF or an error) or `limit`
/// passes: how long it took, and the bytes received, or `None` if still open.
async fn wait_closed(
    stream: &mut (impl AsyncRead + Unpin),
    limit: Duration,
) -> Option<(Duration, Vec<u8>)> {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read_all).await.ok()?;
    Some((started.elapsed(), received))
}

async fn in_flight(admin: SocketAddr) -> f64 {
    let (_, _, metrics) = admin_get(admin, "/metrics").await;
    metric_value(&metrics, "pipelinerollout_webhook_requests_in_flight ")
        .unwrap_or_else(|| panic!("no in-flight gauge in\n{metrics}"))
}

/// A deterministic byte stream (xorshift), for "random" garbage.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------
// (a) slow clients

/// How a slow client behaves after its TLS handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slow {
    /// Sends an HTTP/1.1 request head one byte every 250 ms, never ending it.
    TrickleHeaders,
    /// Sends nothing at all.
    Silent,
    /// Sends the HTTP/2 connection preface one byte every 250 ms, then
    /// nothing.
    TricklePreface,
}

/// Runs one slow client: how long the server kept it before closing it, or
/// `None` if it was still open after `limit`.
async fn slow_client(
    client: Client,
    kind: Slow,
    connected: Arc<AtomicUsize>,
    limit: Duration,
) -> Option<Duration> {
    let (tls, _) = client.connect_tls().await.expect("slow client connects");
    let held_from = Instant::now();
    connected.fetch_add(1, Ordering::SeqCst);
    let (mut reader, mut writer) = tokio::io::split(tls);
    let bytes: Vec<u8> = match kind {
        Slow::TrickleHeaders => {
            let mut head = b"POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nx-slow: ".to_vec();
            head.extend(std::iter::repeat_n(b'a', 1000));
            head
        }
        Slow::Silent => Vec::new(),
        Slow::TricklePreface => b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
    };
    let trickle = async {
        for byte in bytes {
            if writer.write_all(&[byte]).await.is_err() || writer.flush().await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        std::future::pending::<()>().await;
    };
    tokio::select! {
        closed = wait_closed(&mut reader, limit) => closed.map(|_| held_from.elapsed()),
        () = trickle => None,
    }
}

/// (a) 300 slow clients hold connections; a normal client is still answered
/// in under a second, and the server cuts every slow client off after the
/// 10s header deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_do_not_delay_others_and_are_cut_off() {
    let _heavy = HEAVY.lock().await;
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    normal_request(&client).await;

    let connected = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut slow = Vec::new();
    for i in 0..300 {
        let kind = match i % 10 {
            0 => Slow::Silent,
            1 => Slow::TricklePreface,
            _ => Slow::TrickleHeaders,
        };
        slow.push((
            kind,
            tokio::spawn(slow_client(
                client.clone(),
                kind,
                Arc::clone(&connected),
                Duration::from_secs(16),
            )),
        ));
    }
    while connected.load(Ordering::SeqCst) < 300 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "slow clients could not connect"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_connected = started.elapsed();

    // While all 300 are connected and trickling: normal requests, each on a
    // new connection, are answered promptly.
    let mut worst = Duration::ZERO;
    for _ in 0..10 {
        worst = worst.max(normal_request(&client).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        worst < Duration::from_secs(1),
        "a normal request took {worst:?} beside 300 slow clients"
    );

    // Every slow client is cut off by the server: none holds a connection
    // (and a slot of --max-connections) for ever.
    let mut held = Vec::new();
    for (kind, task) in slow {
        let kept = task.await.expect("slow client task");
        let kept =
            kept.unwrap_or_else(|| panic!("a {kind:?} client was still connected after 16s"));
        held.push((kind, kept));
    }
    let range = |k: Slow| {
        let times: Vec<Duration> = held
            .iter()
            .filter(|(x, _)| *x == k)
            .map(|(_, d)| *d)
            .collect();
        (
            times.iter().min().copied().unwrap_or_default(),
            times.iter().max().copied().unwrap_or_default(),
        )
    };
    eprintln!(
        "slow clients: 300 connected in {all_connected:?}; worst normal request {worst:?}; \
         held (min, max): headers {:?}, silent {:?}, h2 preface {:?}",
        range(Slow::TrickleHeaders),
        range(Slow::Silent),
        range(Slow::TricklePreface)
    );
    normal_request(&client).await;
}

/// Silent connections fill every slot of --max-connections; they are cut
/// off after the first-request deadline, and a queued normal client is then
/// answered. (Without that deadline they would be held for ever, and the
/// server would accept nothing more.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_cannot_hold_every_slot() {
    let server = TestServer::start_with(Policy::built_in(), |o| o.max_connections = 8).await;
    let client = server.client();
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(client.connect_tls().await.expect("connect").0);
    }
    let started = Instant::now();
    let took = normal_request(&client).await;
    assert!(
        took < Duration::from_secs(15),
        "the queued client waited {took:?}"
    );
    for mut tls in silent {
        assert!(
            wait_closed(&mut tls, Duration::from_secs(2))
                .await
                .is_some(),
            "a silent connection is still open"
        );
    }
    eprintln!(
        "silent connections: a client queued behind 8 silent ones was answered after {:?}",
        started.elapsed()
    );
    normal_request(&client).await;
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
// (c) plain text and garbage on the TLS port

/// A TLS record that looks like the start of a ClientHello, then junk.
fn fake_client_hello(declared: u16, junk: usize) -> Vec<u8> {
    let [hi, lo] = declared.to_be_bytes();
    let mut record = vec![0x16, 0x03, 0x01, hi, lo, 0x01, 0x00, hi, lo, 0x03, 0x03];
    record.extend(noise(junk, 7));
    record
}

/// (c) Bytes that are not TLS, or are broken TLS, on the webhook port: the
/// server closes the connection promptly and keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_tls_port_is_closed_and_the_server_keeps_serving() {
    let _heavy = HEAVY.lock().await;
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let plain = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
        fixture_json(NORMAL).to_string().len(),
        fixture_json(NORMAL)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("plain HTTP/1.1 POST /validate", plain.into_bytes()),
        (
            "plain HTTP/2 preface",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
        ),
        ("64 KiB of random bytes", noise(64 * 1024, 1)),
        ("ClientHello record of junk", fake_client_hello(300, 300)),
        (
            "ClientHello record claiming 65,535 bytes",
            fake_client_hello(0xffff, 2000),
        ),
        (
            "ClientHello cut short, then FIN",
            fake_client_hello(300, 20),
        ),
        (
            "SSLv2-style hello",
            [&[0x80u8, 0x2e, 0x01, 0x00, 0x02][..], &noise(46, 3)].concat(),
        ),
        (
            "TLS alert record",
            vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
        ),
        ("a zero byte", vec![0]),
    ];
    let mut report = Vec::new();
    for (what, bytes) in &cases {
        let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
        // The server may close before everything is written.
        let _ = tcp.write_all(bytes).await;
        if *what == "ClientHello cut short, then FIN" {
            let _ = tcp.shutdown().await;
        }
        let (took, received) = wait_closed(&mut tcp, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("{what}: connection still open after 5s"));
        let alert = received.first() == Some(&0x15);
        report.push(format!(
            "{what}: closed after {took:?}{}",
            if alert { " with a TLS alert" } else { "" }
        ));
        normal_request(&client).await;
    }

    // A good handshake, then binary junk instead of HTTP.
    let (mut tls, _) = client.connect_tls().await.expect("connect");
    let _ = tls.write_all(&noise(4096, 9)).await;
    let _ = tls.flush().await;
    let (took, received) = wait_closed(&mut tls, Duration::from_secs(5))
        .await
        .expect("junk after a good handshake: connection still open after 5s");
    let status = String::from_utf8_lossy(&received)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        status.is_empty() || status.starts_with("HTTP/1.1 4"),
        "junk after a good handshake: {status}"
    );
    report.push(format!(
        "good handshake then junk: closed after {took:?}, answer {status:?}"
    ));
    eprintln!("garbage on the TLS port:\n  {}", report.join("\n  "));
    normal_request(&client).await;
}

// ---------------------------------------------------------------------------
// The binary, for memory and file descriptors

// `Binary` (tests/https_support/binary.rs) runs it.

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

// ---------------------------------------------------------------------------
// (e) out of file descriptors

/// (e) The binary under a 64-file limit: 100 connections exhaust it, accept
/// fails (logged), a normal client queues; once they close, the queued
/// client is answered and the server serves as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_accept_loop_survives_running_out_of_file_descriptors() {
    let _heavy = HEAVY.lock().await;
    let binary = Binary::start(Some(64)).await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", binary.pid())).expect("limits");
    let nofile = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("nofile line");
    assert!(
        nofile.split_whitespace().nth(3) == Some("64"),
        "limit not applied: {nofile}"
    );
    normal_request(&binary.client).await;
    let baseline = binary.open_fds();

    let addr = binary.addr;
    let mut flood = Vec::new();
    for _ in 0..100 {
        flood.push(TcpStream::connect(addr).await.expect("connect"));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !binary.log_text().contains("accept failed") {
        assert!(
            Instant::now() < deadline,
            "accept never failed; {} fds open: {}",
            binary.open_fds(),
            binary.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let exhausted = binary.open_fds();
    // A normal client now waits in the listen backlog.
    let queued = {
        let client = binary.client.clone();
        tokio::spawn(async move { normal_request(&client).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!queued.is_finished(), "answered while out of descriptors?");
    let released = Instant::now();
    drop(flood);
    let waited = queued.await.expect("the queued request is answered");
    let recovered = released.elapsed();
    let took = normal_request(&binary.client).await;
    let (status, _, _) = admin_get(binary.admin, "/readyz").await;
    assert_eq!(status, StatusCode::OK);
    let failures = binary.log_text().matches("accept failed").count();
    eprintln!(
        "fd exhaustion: {nofile:?}; {baseline} fds open at rest, {exhausted} when exhausted; \
         {failures} 'accept failed' warnings; the queued request was answered {recovered:?} \
         after the flood closed (it waited {waited:?} in all); the next took {took:?}"
    );
    assert!(
        binary.log_text().contains("Too many open files") || failures > 0,
        "{}",
        binary.log_text()
    );
}

// ---------------------------------------------------------------------------
// a log collector that stops reading

#[tokio::test]
async fn a_stalled_log_pipe_drops_counted_lines_and_never_stalls_requests() {
    // Standard error is a pipe nobody reads: once the pipe (64 KiB) and the
    // log buffer are full, lines must be dropped and counted, and
    // requests answered as before. `trace` makes every request log many
    // lines (TLS, HTTP), so the buffer fills within a few hundred requests.
    let binary = Binary::start_with_stalled_log(&["--log-level", "trace"]).await;
    let body = fixture_json("01-create-kubectl-apply-validate.json").to_string();
    let dropped = || async {
        let (_, _, metrics) = admin_get(binary.admin, "/metrics").await;
        metric_value(&metrics, "pipelinerollout_webhook_log_lines_dropped_total ")
            .unwrap_or_else(|| panic!("no dropped-lines counter in\n{metrics}"))
    };
    let started = Instant::now();
    let mut sent = 0;
    while dropped().await == 0.0 {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "no line dropped after {sent} requests"
        );
        for _ in 0..50 {
            let answer = tokio::time::timeout(
                Duration::from_secs(5),
                binary.client.post("/validate?timeout=10s", body.clone()),
            )
            .await
            .unwrap_or_else(|_| panic!("request {sent} waited on the stalled log"));
            assert_eq!(answer.status, StatusCode::OK, "request {sent}");
            sent += 1;
        }
    }
    // Full, not just filling: later requests are still answered at once.
    for _ in 0..20 {
        let before = Instant::now();
        let answer = binary
            .client
            .post("/validate?timeout=10s", body.clone())
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(
            before.elapsed() < Duration::from_secs(2),
            "{:?}",
            before.elapsed()
        );
    }
}

/// A forged request whose uid, user name and object name hold newlines
/// cannot start a log line of its own: the text log escapes them.
#[tokio::test]
async fn request_fields_cannot_forge_a_log_line() {
    let binary = Binary::start_with(None, &["--log-format", "text"]).await;
    let mut request = fixture_json("07-allow-data-loss-true-kubectl-annotate-alice-validate.json");
    let forged = "FORGED level=INFO decision allowed=true";
    request["request"]["uid"] = serde_json::json!(format!("u1\n{forged} uid"));
    request["request"]["userInfo"]["username"] =
        serde_json::json!(format!("mallory\n{forged} user"));
    request["request"]["name"] = serde_json::json!(format!("p\r\n{forged} name"));
    let answer = binary.client.post("/validate", request.to_string()).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !binary.log_text().contains("mallory") {
        assert!(
            Instant::now() < deadline,
            "no decision line: {}",
            binary.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = binary.log_text();
    let starts: Vec<&str> = log.lines().filter(|l| l.starts_with("FORGED")).collect();
    assert!(starts.is_empty(), "forged lines {starts:?} in\n{log}");
    for escaped in [
        format!("u1\\n{forged} uid"),
        // A &str field is written quoted and escaped by the formatter itself.
        format!("user=\"mallory\\n{forged} user\""),
        format!("p\\r\\n{forged} name"),
    ] {
        assert!(log.contains(&escaped), "{escaped:?} is not in\n{log}");
    }
}
