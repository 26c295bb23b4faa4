//! Shared test support: a real webhook server on 127.0.0.1 with freshly
//! generated certificates, and an HTTPS client that verifies them.
#![allow(dead_code)]

pub mod binary;
pub mod body;
pub mod client;
pub mod exchange;
pub mod sar_stand_in;

pub use client::{Answer, Client, admin_get};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use pipelinerollout_webhook::apiserver::args::ApiServerArgs;
use pipelinerollout_webhook::app;
use pipelinerollout_webhook::pki::{self, CertPaths};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::server::{
    self, BudgetArgs, ConnectionOptions, Running, ServeOptions, ServerArgs, TlsArgs,
};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use serde_json::Value;

/// The directory of the captured AdmissionReviews.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission")
}

/// A fixture's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// A fixture as JSON.
pub fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).expect("fixture is JSON")
}

/// The fixture every "normal request" sends: an allowed CREATE.
pub const NORMAL: &str = "01-create-kubectl-apply-validate.json";

/// Sends the normal request to /validate and checks that it is answered
/// within 20 s and allowed; returns how long it took.
pub async fn normal_request(client: &Client) -> Duration {
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

/// A running webhook server; shuts down when dropped.
pub struct TestServer {
    /// Where the webhook listens.
    pub addr: SocketAddr,
    /// Where the admin server listens.
    pub admin_addr: SocketAddr,
    /// The CA that signed its certificate.
    pub ca_pem: String,
    /// The certificate files it serves.
    pub certs: CertPaths,
    /// The policy file it reads.
    pub policy_file: PathBuf,
    /// The running server.
    pub running: Option<Running>,
    /// The temporary directory holding certificates and policy.
    pub dir: tempfile::TempDir,
}

/// Options for a server on 127.0.0.1 and random ports serving `certs`'
/// certificate and `policy_file`, reloading every 200 ms, with no delay at
/// shutdown, the flags' limits and no API server.
pub fn serve_options(certs: &CertPaths, policy_file: Option<PathBuf>) -> ServeOptions {
    ServeOptions {
        server: ServerArgs {
            listen: "127.0.0.1:0".parse().expect("addr"),
            admin_listen: Some("127.0.0.1:0".parse().expect("addr")),
            policy: policy_file,
            tls: TlsArgs {
                tls_cert: Some(certs.cert.clone()),
                tls_key: Some(certs.key.clone()),
                client_ca: None,
                dev_certs_dir: PathBuf::from("certs"),
            },
            reload_interval: Duration::from_millis(200),
            shutdown_delay: Duration::from_millis(0),
            shutdown_grace: Duration::from_secs(5),
            connections: ConnectionOptions::new(1024),
            budget: BudgetArgs {
                max_inflight_body_bytes: server::budget::DEFAULT_MAX_INFLIGHT_BODY_BYTES,
                max_inflight_requests: server::budget::DEFAULT_MAX_INFLIGHT_REQUESTS,
            },
        },
        api: ApiServerArgs::default(),
        unguarded_namespaces: Vec::new(),
        managed_certificate: false,
    }
}

impl TestServer {
    /// Starts a server with `policy` (written to a file) on 127.0.0.1 and
    /// random ports.
    pub async fn start(policy: Policy) -> Self {
        Self::start_with(policy, |_| {}).await
    }

    /// Starts a server, letting `tweak` change the options first.
    pub async fn start_with(policy: Policy, tweak: impl FnOnce(&mut ServeOptions)) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temp dir");
        let (paths, generated) =
            pki::ensure_dev_certs(&dir.path().join("certs")).expect("dev certs");
        assert!(generated);
        let policy_file = dir.path().join("policy.yaml");
        std::fs::write(&policy_file, policy.to_yaml()).expect("write policy");
        let mut options = serve_options(&paths, Some(policy_file.clone()));
        tweak(&mut options);
        let running = app::start(options).await.expect("server starts");
        Self {
            addr: running.addr,
            admin_addr: running.admin_addr.expect("admin server"),
            ca_pem: std::fs::read_to_string(&paths.ca).expect("ca"),
            certs: paths,
            policy_file,
            running: Some(running),
            dir,
        }
    }

    /// An HTTPS client for this server that trusts only its CA.
    pub fn client(&self) -> Client {
        Client::new(self.addr, &self.ca_pem)
    }

    /// GETs a path of the admin server: status and body.
    pub async fn admin_get(&self, path: &str) -> (StatusCode, String, String) {
        admin_get(self.admin_addr, path).await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.shutdown();
        }
    }
}

/// The DER of the first certificate in a PEM file.
pub fn cert_der(path: &Path) -> Vec<u8> {
    CertificateDer::pem_file_iter(path)
        .expect("cert file")
        .next()
        .expect("a certificate")
        .expect("PEM")
        .as_ref()
        .to_vec()
}

/// The `response` of an AdmissionReview answer, checked to echo `request`'s
/// uid and apiVersion.
pub fn response_for(request: &Value, answer: &Answer) -> Value {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    assert!(answer.content_type.starts_with("application/json"));
    let review = answer.json();
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(
        review["apiVersion"], request["apiVersion"],
        "answered in the request's apiVersion"
    );
    let response = review["response"].clone();
    assert_eq!(response["uid"], request["request"]["uid"], "uid echoed");
    assert!(response["allowed"].is_boolean());
    response
}

/// The JSON Patch in a response, decoded from its base64 text (the form
/// the Kubernetes documentation shows; anything else fails the test).
pub fn patch_of(response: &Value) -> Option<json_patch::Patch> {
    use base64::Engine as _;
    let bytes: Vec<u8> = match &response["patch"] {
        Value::Null => return None,
        Value::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_else(|e| panic!("patch is not base64 ({e}): {text}")),
        other => panic!("unexpected patch encoding (want base64 text): {other}"),
    };
    assert_eq!(response["patchType"], "JSONPatch");
    Some(serde_json::from_slice(&bytes).expect("patch is a JSON Patch"))
}

/// Applies a response's patch to the request's object and returns the
/// result; `None` when the response carries no patch.
pub fn patched_object(request: &Value, response: &Value) -> Option<Value> {
    let patch = patch_of(response)?;
    let mut object = request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch.0).expect("patch applies to the object");
    Some(object)
}

/// The warnings of a response.
pub fn warnings_of(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Where the drain timeout sits in an object.
pub const TIMEOUT_POINTER: &str = "/spec/pipeline/spec/lifecycle/pauseGracePeriodSeconds";

/// The value of the first metric line starting with `line_start` in an
/// OpenMetrics text.
pub fn metric_value(metrics: &str, line_start: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Answers one body through the server's own decision path
/// (`admission::answer`) with the policy's static lists as the only source
/// of permission. Those never wait, so the answer is ready at once.
pub fn answer_now(
    webhook: pipelinerollout_webhook::admission::Webhook,
    policy: &Policy,
    body: &[u8],
) -> Result<
    (
        pipelinerollout_webhook::admission::AdmissionRequest,
        pipelinerollout_webhook::admission::Reply,
    ),
    pipelinerollout_webhook::admission::ParseError,
> {
    use std::future::Future as _;
    use std::task::{Context, Poll, Waker};
    let lists = pipelinerollout_webhook::authz::Authorizer::StaticLists(
        pipelinerollout_webhook::authz::StaticLists::new("no connection to the API server"),
    );
    let judge =
        pipelinerollout_webhook::admission::AnswerContext::now(&lists, Duration::from_secs(1));
    let future = pipelinerollout_webhook::admission::answer(webhook, policy, body, judge);
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(answer) => answer,
        Poll::Pending => panic!("the static lists never wait"),
    }
}
