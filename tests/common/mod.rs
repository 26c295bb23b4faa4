//! Shared test support: a real webhook server on 127.0.0.1 with freshly
//! generated certificates, and an HTTPS client that verifies them.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pipelinerollout_webhook::certs::{self, CertPaths};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::server::{self, AppState, tls};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

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

/// A running webhook server; stops when dropped.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The CA that signed its certificate.
    pub ca_pem: String,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server with `policy` on 127.0.0.1 and a random port.
    pub async fn start(policy: Policy) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temp dir");
        let (paths, generated) = certs::ensure_dev_certs(dir.path()).expect("dev certs");
        assert!(generated);
        let CertPaths { ca, cert, key } = paths;
        let certified = tls::load_certified_key(&cert, &key).expect("load cert");
        let config = tls::server_config(Arc::new(tls::CertResolver::new(certified))).expect("tls");
        let listener = server::bind("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let app = server::router(AppState {
            policy: Arc::new(policy),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server::serve_tls(listener, config, app, async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            ca_pem: std::fs::read_to_string(ca).expect("ca"),
            _stop: stop,
            _dir: dir,
        }
    }

    /// An HTTPS client for this server that trusts only its CA.
    pub fn client(&self) -> Client {
        Client::new(self.addr, &self.ca_pem)
    }
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: StatusCode,
    /// The Content-Type header.
    pub content_type: String,
    /// The body.
    pub body: Bytes,
    /// The HTTP version spoken.
    pub version: hyper::Version,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A minimal HTTPS client: one connection per request, HTTP/1.1 or HTTP/2
/// as ALPN chooses.
#[derive(Clone)]
pub struct Client {
    addr: SocketAddr,
    connector: TlsConnector,
    http2: bool,
}

impl Client {
    fn new(addr: SocketAddr, ca_pem: &str) -> Self {
        Self::with_alpn(addr, ca_pem, false)
    }

    /// A client that offers only HTTP/2 (`h2`) in ALPN.
    pub fn http2(&self) -> Self {
        Self {
            http2: true,
            ..self.clone()
        }
    }

    fn with_alpn(addr: SocketAddr, ca_pem: &str, http2: bool) -> Self {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("add CA");
        }
        let mut config = rustls::ClientConfig::builder_with_provider(tls::provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self {
            addr,
            connector: TlsConnector::from(Arc::new(config)),
            http2,
        }
    }

    /// POSTs `body` to `path` with Content-Type application/json.
    pub async fn post(&self, path: &str, body: impl Into<Bytes>) -> Answer {
        self.request(Method::POST, path, "application/json", body.into())
            .await
    }

    /// Sends one request on a new TLS connection.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
    ) -> Answer {
        let tcp = TcpStream::connect(self.addr).await.expect("connect");
        let tls = self
            .connector
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("TLS handshake with a verified certificate");
        let alpn_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let request = Request::builder()
            .method(method)
            .uri(format!("https://localhost:{}{path}", self.addr.port()))
            .header("content-type", content_type)
            .body(Full::new(body))
            .expect("request");
        let response = if self.http2 {
            assert!(alpn_h2, "server did not choose h2 in ALPN");
            let (mut sender, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .expect("h2 handshake");
            tokio::spawn(conn);
            sender.send_request(request).await.expect("h2 request")
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .expect("http1 handshake");
            tokio::spawn(conn);
            let mut request = request;
            *request.uri_mut() = path.parse().expect("path");
            request
                .headers_mut()
                .insert("host", "localhost".parse().expect("host"));
            sender.send_request(request).await.expect("http1 request")
        };
        let status = response.status();
        let version = response.version();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        Answer {
            status,
            content_type,
            body,
            version,
        }
    }
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

/// The JSON Patch in a response, decoded from its byte array or base64 form.
pub fn patch_of(response: &Value) -> Option<json_patch::Patch> {
    let bytes: Vec<u8> = match &response["patch"] {
        Value::Null => return None,
        Value::Array(items) => items
            .iter()
            .map(|b| u8::try_from(b.as_u64().expect("byte")).expect("byte"))
            .collect(),
        other => panic!("unexpected patch encoding: {other}"),
    };
    assert_eq!(response["patchType"], "JSONPatch");
    Some(serde_json::from_slice(&bytes).expect("patch is a JSON Patch"))
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
