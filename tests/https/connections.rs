//! Connections against a real server, each test ending with a normal
//! request answered correctly: slow clients trickling headers, silent
//! connections holding every slot, plain text and garbage on the TLS port,
//! the accept loop out of file descriptors (the binary under a low fd
//! limit), and connections that go idle or dead (HTTP/1.1 and HTTP/2).
//!
//! Everything talks to 127.0.0.1 only. The heavier tests take a lock so
//! their timings do not disturb one another. Findings and numbers:
//! docs/robustness.md (`-- --nocapture` prints them).

use crate::https_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_body_util::Full;
use https_support::binary::Binary;
use https_support::exchange::{Ended, ended, post};
use https_support::{Client, NORMAL, TestServer, admin_get, fixture_json, normal_request};
use hyper::StatusCode;
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use pipelinerollout_webhook::policy::Policy;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Serialises the tests whose timings or memory figures the others would
/// disturb on a 2-core machine.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.connections.max_connections = 8
    })
    .await;
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
// idle and dead connections

/// The small request sent on a kept connection: an allowed CREATE.
const SMALL: &str = "01-create-kubectl-apply-validate.json";

/// Reads until the peer closes; how long that took, or `None` after `limit`.
async fn closed_within(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    let read_all = async {
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    };
    tokio::time::timeout(limit, read_all).await.ok()?;
    Some(started.elapsed())
}

/// (j) HTTP/1.1: a kept-alive connection that has been answered and then
/// sends nothing is closed at the header timeout (10 s), which hyper
/// restarts when a connection goes idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http1_connection_is_closed_at_the_header_timeout() {
    let server = TestServer::start(Policy::built_in()).await;
    let (mut tls, _) = server.client().connect_tls().await.expect("connect");
    tls.write_all(b"GET /nope HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await
        .expect("request");
    tls.flush().await.expect("flush");
    let mut head = [0u8; 12];
    tls.read_exact(&mut head).await.expect("answer");
    assert_eq!(&head, b"HTTP/1.1 404");
    let took = closed_within(&mut tls, Duration::from_secs(15))
        .await
        .expect("an idle HTTP/1.1 connection still open after 15s");
    eprintln!("idle HTTP/1.1 connection closed after {took:?}");
    assert!(took >= Duration::from_secs(9), "{took:?}");
}

/// (k) HTTP/2: a connection with no request in flight is closed (GOAWAY)
/// after `--idle-timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.connections.idle_timeout = Duration::from_secs(1);
    })
    .await;
    let (tls, _) = server.client().connect_tls().await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .expect("h2 handshake");
    let conn = tokio::spawn(conn);
    let small = fixture_json(SMALL);
    let e = ended(
        sender
            .send_request(post(
                "/validate",
                Full::new(Bytes::from(small.to_string())),
                true,
            ))
            .await,
        &small,
    )
    .await;
    assert!(matches!(e, Ended::Answered), "{e}");
    let idle_from = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), conn)
        .await
        .expect("an idle HTTP/2 connection still open after 5s")
        .expect("connection task")
        .expect("closed cleanly");
    let took = idle_from.elapsed();
    eprintln!("idle HTTP/2 connection closed after {took:?} (idle timeout 1s)");
    assert!(took >= Duration::from_millis(900), "{took:?}");
}

/// (l) HTTP/2: the server's SETTINGS bound the streams, windows, frames and
/// headers; and a peer that stops answering pings (here: one that never
/// writes after its SETTINGS) is dropped after the keep-alive interval and
/// timeout, long before the idle or first-request timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_limits_are_announced_and_a_dead_peer_is_dropped() {
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.connections.keep_alive_interval = Duration::from_millis(500);
        o.server.connections.idle_timeout = Duration::from_secs(60);
    })
    .await;
    let (mut tls, _) = server.client().connect_tls().await.expect("connect");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    // The connection preface and an empty SETTINGS frame; nothing more.
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .expect("preface");
    tls.flush().await.expect("flush");
    let started = Instant::now();
    let mut header = [0u8; 9];
    tls.read_exact(&mut header).await.expect("server SETTINGS");
    assert_eq!(header[3], 4, "the first frame is SETTINGS");
    let len = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    let mut payload = vec![0u8; len];
    tls.read_exact(&mut payload)
        .await
        .expect("SETTINGS payload");
    let settings: Vec<(u16, u32)> = payload
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    eprintln!("server SETTINGS: {settings:?}");
    for (id, want) in [(3, 32), (4, 32 * 1024), (5, 16 * 1024), (6, 16 * 1024)] {
        assert!(
            settings.contains(&(id, want)),
            "setting {id} is not {want}: {settings:?}"
        );
    }
    closed_within(&mut tls, Duration::from_secs(8))
        .await
        .expect("a peer that answers no ping still connected after 8s");
    let took = started.elapsed();
    eprintln!("a peer that answers no ping was dropped after {took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}
