//! Operations: certificate and policy reload, readiness, metrics, mTLS and
//! request deadlines, against the real server over HTTPS.

use crate::https_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use https_support::{
    Client, TestServer, admin_get, cert_der, fixture, fixture_json, metric_value, response_for,
};
use hyper::StatusCode;
use pipelinerollout_webhook::pki::{self, CertPaths, GeneratedCerts};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::server::{ServerState, admin};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A directory laid out as the kubelet lays out a Secret or ConfigMap
/// volume: the files are symlinks through `..data`, which points at a
/// timestamped directory and is swapped atomically on update.
struct ProjectedDir {
    dir: PathBuf,
    generation: u32,
}

impl ProjectedDir {
    fn new(dir: &Path, files: &[(&str, &str)]) -> Self {
        std::fs::create_dir_all(dir).expect("dir");
        let mut projected = Self {
            dir: dir.to_path_buf(),
            generation: 0,
        };
        projected.update(files);
        for (name, _) in files {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name))
                .expect("file symlink");
        }
        projected
    }

    /// Writes a new timestamped directory and swaps `..data` to it.
    fn update(&mut self, files: &[(&str, &str)]) {
        self.generation += 1;
        let stamp = format!(
            "..2026_11_29_00_00_{:02}.{}",
            self.generation,
            std::process::id()
        );
        let target = self.dir.join(&stamp);
        std::fs::create_dir(&target).expect("timestamped dir");
        for (name, contents) in files {
            std::fs::write(target.join(name), contents).expect("write");
        }
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&stamp, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("swap ..data");
    }
}

fn serving_set(certs: &GeneratedCerts) -> [(&'static str, &str); 2] {
    [
        ("tls.crt", certs.cert_pem.as_str()),
        ("tls.key", certs.key_pem.as_str()),
    ]
}

fn localhost_certs() -> GeneratedCerts {
    let names: Vec<String> = pki::DEV_NAMES.iter().map(|s| (*s).to_owned()).collect();
    pki::generate("rotation test", &names, 30).expect("generate")
}

fn der_of(pem: &str) -> Vec<u8> {
    use rustls_pki_types::pem::PemObject;
    rustls_pki_types::CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("PEM")
        .as_ref()
        .to_vec()
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn certificate_rotated_through_data_symlink_twice() {
    let sets = [localhost_certs(), localhost_certs(), localhost_certs()];
    let dir = tempfile::tempdir().expect("dir");
    let mut volume = ProjectedDir::new(&dir.path().join("tls"), &serving_set(&sets[0]));
    let cert = volume.dir.join("tls.crt");
    let key = volume.dir.join("tls.key");
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.tls.tls_cert = Some(cert.clone());
        o.server.tls.tls_key = Some(key.clone());
    })
    .await;
    let cas: Vec<&str> = sets.iter().map(|s| s.ca_pem.as_str()).collect();
    let client = Client::build(server.addr, &cas, None);
    let body = fixture("01-create-kubectl-apply-validate.json");

    let mut old = client.connect().await;
    assert_eq!(old.peer_cert, der_of(&sets[0].cert_pem));
    let (status, _) = old.post("/validate", body.clone()).await.expect("request");
    assert_eq!(status, StatusCode::OK);

    for (round, set) in sets.iter().enumerate().skip(1) {
        volume.update(&serving_set(set));
        let want = der_of(&set.cert_pem);
        eventually(&format!("rotation {round}"), async || {
            client.connect().await.peer_cert == want
        })
        .await;
        // The connection opened before any rotation still works.
        let (status, answer) = old
            .post("/validate", body.clone())
            .await
            .expect("old connection still serves");
        assert_eq!(
            status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&answer)
        );
        assert_eq!(old.peer_cert, der_of(&sets[0].cert_pem));
    }
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(
        metric_value(
            &metrics,
            "pipelinerollout_webhook_tls_reloads_total{result=\"success\"}"
        ),
        Some(2.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_bad_certificate_is_refused_and_the_old_one_kept() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let served = cert_der(&server.certs.cert);
    // A key that does not match the certificate.
    let other = localhost_certs();
    std::fs::write(&server.certs.key, &other.key_pem).expect("write key");
    eventually("a refused TLS reload", async || {
        let (_, _, metrics) = server.admin_get("/metrics").await;
        metric_value(
            &metrics,
            "pipelinerollout_webhook_tls_reloads_total{result=\"failure\"}",
        ) == Some(1.0)
    })
    .await;
    assert_eq!(
        client.connect().await.peer_cert,
        served,
        "still serving the old certificate"
    );
    // Garbage in the certificate file: refused too.
    std::fs::write(&server.certs.cert, "not a certificate").expect("write cert");
    eventually("a second refused TLS reload", async || {
        let (_, _, metrics) = server.admin_get("/metrics").await;
        metric_value(
            &metrics,
            "pipelinerollout_webhook_tls_reloads_total{result=\"failure\"}",
        ) == Some(2.0)
    })
    .await;
    let request = fixture_json("01-create-kubectl-apply-validate.json");
    let response = response_for(
        &request,
        &client.post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], true);
    assert_eq!(server.admin_get("/readyz").await.0, StatusCode::OK);
}

#[tokio::test]
async fn start_up_refuses_a_key_that_does_not_match() {
    let dir = tempfile::tempdir().expect("dir");
    let paths = CertPaths::in_dir(dir.path());
    paths.write(&localhost_certs()).expect("write");
    std::fs::write(&paths.key, localhost_certs().key_pem).expect("other key");
    let result = pipelinerollout_webhook::server::tls::load(
        &pipelinerollout_webhook::server::tls::TlsFiles {
            cert: paths.cert.clone(),
            key: paths.key.clone(),
            client_ca: None,
        },
    );
    let error = result.expect_err("mismatched key refused").to_string();
    assert!(error.contains("cannot be used together"), "{error}");
}

#[tokio::test]
async fn policy_reload_takes_good_policies_and_refuses_bad_ones() {
    let dir = tempfile::tempdir().expect("dir");
    let mut volume = ProjectedDir::new(
        &dir.path().join("policy"),
        &[("policy.yaml", "mode: enforce\n")],
    );
    let policy_file = volume.dir.join("policy.yaml");
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.policy = Some(policy_file.clone())
    })
    .await;
    let client = server.client();
    let request = fixture_json("02-update-timeout-kubectl-apply-validate.json");
    let allowed = async |client: &Client| {
        let response = response_for(
            &request,
            &client.post("/validate", request.to_string()).await,
        );
        response["allowed"] == true
    };
    assert!(!allowed(&client).await, "7200 is above the built-in max");

    volume.update(&[("policy.yaml", "drainTimeout:\n  max: 2h\n")]);
    eventually("the good policy", async || allowed(&client).await).await;

    // A bad policy (min above max) is refused; the last good one stays.
    volume.update(&[("policy.yaml", "drainTimeout:\n  min: 3h\n  max: 2h\n")]);
    eventually("the refused reload", async || {
        let (_, _, metrics) = server.admin_get("/metrics").await;
        metric_value(
            &metrics,
            "pipelinerollout_webhook_policy_reloads_total{result=\"failure\"}",
        ) == Some(1.0)
    })
    .await;
    assert!(
        allowed(&client).await,
        "the last good policy is still in force"
    );
    // A second good update after a bad one also lands (the second swap of ..data).
    volume.update(&[("policy.yaml", "drainTimeout:\n  max: 30m\n")]);
    eventually("the next good policy", async || !allowed(&client).await).await;
    // The new policy answers as soon as it is swapped in; the reload is
    // counted right after.
    eventually("the second reload counted", async || {
        let (_, _, metrics) = server.admin_get("/metrics").await;
        metric_value(
            &metrics,
            "pipelinerollout_webhook_policy_reloads_total{result=\"success\"}",
        ) == Some(2.0)
    })
    .await;
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(
        metric_value(&metrics, "pipelinerollout_webhook_policy_generation"),
        Some(3.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn readiness_before_load_after_load_and_during_shutdown() {
    use tower::ServiceExt as _;
    // Before anything is loaded, the admin server says not ready.
    let fresh = Arc::new(ServerState::new(Policy::built_in()));
    let response = admin::router(fresh)
        .oneshot(
            axum::http::Request::get("/readyz")
                .body(axum::body::Body::empty())
                .expect("request"),
        )
        .await
        .expect("answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);

    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.shutdown_delay = Duration::from_millis(1500)
    })
    .await;
    assert_eq!(server.admin_get("/readyz").await.0, StatusCode::OK);
    assert_eq!(server.admin_get("/healthz").await.0, StatusCode::OK);
    server.running.as_ref().expect("running").shutdown();
    let (status, _, body) = server.admin_get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("shutting down"), "{body}");
    assert_eq!(
        server.admin_get("/healthz").await.0,
        StatusCode::OK,
        "still live"
    );
    // Still answering during the delay.
    let request = fixture_json("01-create-kubectl-apply-validate.json");
    let response = response_for(
        &request,
        &server.client().post("/validate", request.to_string()).await,
    );
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn metrics_count_real_requests() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    for file in [
        "02-update-timeout-kubectl-apply-validate.json",
        "04-allow-data-loss-argocd-server-action-validate.json",
        "07-allow-data-loss-true-kubectl-annotate-alice-validate.json",
    ] {
        client.post("/validate", fixture(file)).await;
    }
    client
        .post(
            "/mutate",
            fixture("11-create-no-lifecycle-kubectl-create-mutate.json"),
        )
        .await;
    client.post("/validate", "garbage").await;
    let (status, content_type, metrics) = server.admin_get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let expect = [
        (
            "pipelinerollout_webhook_requests_total{webhook=\"validate\",operation=\"UPDATE\",result=\"denied\",code=\"200\"}",
            2.0,
        ),
        (
            "pipelinerollout_webhook_requests_total{webhook=\"validate\",operation=\"UPDATE\",result=\"allowed\",code=\"200\"}",
            1.0,
        ),
        (
            "pipelinerollout_webhook_requests_total{webhook=\"mutate\",operation=\"CREATE\",result=\"allowed\",code=\"200\"}",
            1.0,
        ),
        (
            "pipelinerollout_webhook_requests_total{webhook=\"validate\",operation=\"\",result=\"error\",code=\"400\"}",
            1.0,
        ),
        (
            "pipelinerollout_webhook_force_decisions_total{gate=\"force-reapply\",result=\"allowed\"}",
            1.0,
        ),
        (
            "pipelinerollout_webhook_force_decisions_total{gate=\"force-reapply\",result=\"denied\"}",
            1.0,
        ),
        (
            "pipelinerollout_webhook_request_duration_seconds_count{webhook=\"validate\"}",
            4.0,
        ),
        ("pipelinerollout_webhook_requests_in_flight", 0.0),
        ("pipelinerollout_webhook_policy_generation", 1.0),
    ];
    for (line, want) in expect {
        assert_eq!(
            metric_value(&metrics, line),
            Some(want),
            "{line} in\n{metrics}"
        );
    }
    assert!(
        metrics.contains("pipelinerollout_webhook_request_duration_seconds_bucket{le=\"0.0001\",webhook=\"validate\"}")
            || metrics.contains("pipelinerollout_webhook_request_duration_seconds_bucket{webhook=\"validate\",le=\"0.0001\"}"),
        "sub-millisecond buckets: {metrics}"
    );
    let expiry = metric_value(
        &metrics,
        "pipelinerollout_webhook_tls_certificate_expiry_timestamp_seconds",
    )
    .expect("expiry");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    assert!(
        expiry > now + 300.0 * 86400.0 && expiry < now + 366.0 * 86400.0,
        "{expiry}"
    );
}

/// A client CA and a client certificate it signed (PEM: CA, cert, key).
fn client_identity() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("key");
    let mut leaf = CertificateParams::new(vec!["kube-apiserver".to_owned()]).expect("params");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = leaf.signed_by(&key, &issuer).expect("client cert");
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn mutual_tls_accepts_the_right_client_and_refuses_others() {
    let (ca, cert, key) = client_identity();
    let (_, wrong_cert, wrong_key) = client_identity();
    let dir = tempfile::tempdir().expect("dir");
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &ca).expect("write");
    let server = TestServer::start_with(Policy::built_in(), |o| {
        o.server.tls.client_ca = Some(ca_file.clone())
    })
    .await;
    let request = fixture_json("01-create-kubectl-apply-validate.json");

    let good = Client::build(server.addr, &[&server.ca_pem], Some((&cert, &key)));
    let response = response_for(&request, &good.post("/validate", request.to_string()).await);
    assert_eq!(response["allowed"], true);

    for (name, client) in [
        (
            "no client certificate",
            Client::build(server.addr, &[&server.ca_pem], None),
        ),
        (
            "a certificate from another CA",
            Client::build(
                server.addr,
                &[&server.ca_pem],
                Some((&wrong_cert, &wrong_key)),
            ),
        ),
    ] {
        // With TLS 1.3 the refusal arrives after the client's handshake
        // completes: the first read fails or returns nothing.
        let refused = match client.connect_tls().await {
            Err(_) => true,
            Ok((mut tls, _)) => {
                let _ = tls
                    .write_all(b"GET /validate HTTP/1.1\r\nhost: localhost\r\n\r\n")
                    .await;
                let mut buf = [0u8; 64];
                !matches!(tls.read(&mut buf).await, Ok(n) if n > 0)
            }
        };
        assert!(refused, "{name} was let in");
    }
}

#[tokio::test]
async fn a_slow_body_is_cut_off_at_the_api_servers_deadline() {
    let server = TestServer::start(Policy::built_in()).await;
    let client = server.client();
    let (mut tls, _) = client.connect_tls().await.expect("connect");
    let started = Instant::now();
    tls.write_all(
        b"POST /validate?timeout=1s HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{",
    )
    .await
    .expect("write");
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
            .await
            .expect("an answer before 5s")
            .expect("read");
        assert!(n > 0, "connection closed without an answer");
        answer.extend_from_slice(&buf[..n]);
    }
    let elapsed = started.elapsed();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 504"), "{text}");
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(3),
        "{elapsed:?}"
    );
    let (_, _, metrics) = server.admin_get("/metrics").await;
    assert_eq!(
        metric_value(
            &metrics,
            "pipelinerollout_webhook_requests_total{webhook=\"validate\",operation=\"\",result=\"error\",code=\"504\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        metric_value(&metrics, "pipelinerollout_webhook_requests_in_flight"),
        Some(0.0)
    );
    let _ = admin_get;
}

/// A counter of /proc/PID/io: `syscr` (read calls) or `syscw` (write calls).
fn io_counter(pid: u32, field: &str) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("/proc/PID/io");
    io.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {io}"))
}

#[tokio::test]
async fn an_idle_server_does_not_keep_rereading_its_files() {
    // Watching the certificate and policy directories must not turn the
    // server's own reads of those files into a reason to read them again.
    let dir = tempfile::tempdir().expect("dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "mode: enforce\n").expect("policy file");
    let policy = policy.to_str().expect("utf-8 path");
    let binary = https_support::binary::Binary::start_with(None, &["--policy", policy]).await;
    // Let start-up settle (the first checks after the watches are set up).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = io_counter(binary.pid(), "syscr");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let reads = io_counter(binary.pid(), "syscr") - before;
    // With the default 10 s poll, at most one poll can fall in the window
    // (a few reads); a read loop makes hundreds.
    assert!(
        reads < 30,
        "{reads} read calls in 2 idle seconds: the server keeps rereading its files"
    );
}

/// The write calls a freshly started binary makes while answering
/// `requests` requests one after another at `level`, and the log events it
/// wrote.
async fn writes_while_answering(level: &str, requests: u64) -> (u64, u64) {
    let binary = https_support::binary::Binary::start_with(None, &["--log-level", level]).await;
    let body = https_support::fixture_json("01-create-kubectl-apply-validate.json").to_string();
    let _ = binary.client.post("/validate", body.clone()).await;
    let before = io_counter(binary.pid(), "syscw");
    for _ in 0..requests {
        let answer = binary.client.post("/validate", body.clone()).await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    let writes = io_counter(binary.pid(), "syscw") - before;
    // An event's text may span lines; each event starts with its time.
    let log = binary.log_text();
    let events = log.lines().filter(|l| l.starts_with("20")).count() as u64;
    (writes, events)
}

#[tokio::test]
async fn a_busy_server_writes_its_log_in_batches_not_line_by_line() {
    // At trace level every request logs several events (TLS, HTTP, the
    // decision); at warn, none. The difference in write calls is what the
    // log costs: written one by one, at least a write per event; gathered,
    // a few a second.
    let requests = 300;
    let (quiet_writes, _) = writes_while_answering("warn", requests).await;
    let (writes, events) = writes_while_answering("trace", requests).await;
    assert!(
        events > 3 * requests,
        "only {events} log events: not at trace level?"
    );
    let for_the_log = writes.saturating_sub(quiet_writes);
    assert!(
        for_the_log < events / 4,
        "{writes} write calls at trace against {quiet_writes} at warn, for {events} log events"
    );
}
