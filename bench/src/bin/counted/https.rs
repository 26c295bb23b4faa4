//! One full HTTPS request in process: the webhook's router (or the constant
//! reference server) behind `serve_connections` and rustls on loopback, or
//! the bare tokio + hyper + rustls floor (`bench::floor`), and a hyper +
//! rustls client keeping one HTTP/1.1 connection alive, all on one
//! current-thread tokio runtime. The count is the client's and the server's
//! work together; the constant and floor scenarios carry the same client
//! and the same bodies, so their differences are the server's.

use std::future::pending;
use std::sync::Arc;
use std::time::Duration;

use bench::reference::{self, Mode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use pipelinerollout_webhook::pki;
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::server::tls::{self, TlsFiles, TlsState};
use pipelinerollout_webhook::server::{ConnectionOptions, ServerState, serve_connections, webhook};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio_rustls::TlsConnector;

use crate::decision::{ALLOWED, DENIED, Encoding, fixture};
use crate::kinds;
use crate::{CountedError, Entry, Scenario};

/// Which server answers.
#[derive(Debug, Clone, Copy)]
enum Server {
    /// The webhook's routes with the built-in policy, static lists and no
    /// API server (no RBAC, no Events), as `serve` runs without a cluster.
    Webhook,
    /// The constant AdmissionReview of `reference_server --mode constant`,
    /// on the webhook's stack.
    Constant,
    /// The same answer from the bare server of `reference_server --mode floor`.
    Floor,
}

/// The path the API server posts to, with the timeout it sends.
const PATH: &str = "/validate?timeout=10s";

fn failed(what: &str) -> impl Fn(&dyn std::fmt::Display) -> CountedError + '_ {
    move |e| CountedError::Https(format!("{what}: {e}"))
}

/// A server and a kept-alive client connection to it.
struct Https {
    runtime: Runtime,
    sender: SendRequest<Full<Bytes>>,
    body: Bytes,
}

/// The server's TLS configuration and the CA PEM a client trusts it by,
/// from development certificates written to (and removed from) a
/// temporary directory.
fn tls_material(scenario: &str) -> Result<(TlsState, Vec<u8>), CountedError> {
    let dir = std::env::temp_dir().join(format!("counted-{}-{scenario}", std::process::id()));
    let loaded = (|| {
        let (paths, _) = pki::ensure_dev_certs(&dir).map_err(|e| failed("certificates")(&e))?;
        let ca = std::fs::read(&paths.ca).map_err(|e| failed("CA file")(&e))?;
        let files = TlsFiles {
            cert: paths.cert,
            key: paths.key,
            client_ca: None,
        };
        let loaded = tls::load(&files).map_err(|e| failed("TLS configuration")(&e))?;
        Ok((TlsState::new(loaded.config), ca))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    loaded
}

fn connector(ca_pem: &[u8]) -> Result<TlsConnector, CountedError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| failed("CA PEM")(&e))?;
        roots.add(cert).map_err(|e| failed("CA")(&e))?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| failed("TLS versions")(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

impl Https {
    fn build(
        scenario: &'static str,
        server: Server,
        fixture_name: &str,
        allowed: bool,
    ) -> Result<Box<dyn Scenario>, CountedError> {
        let body = fixture(fixture_name, Encoding::Compact)?;
        Self::build_with(scenario, server, body, allowed)
    }

    fn build_with(
        scenario: &'static str,
        server: Server,
        body: Vec<u8>,
        allowed: bool,
    ) -> Result<Box<dyn Scenario>, CountedError> {
        let body = Bytes::from(body);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed("runtime")(&e))?;
        let (tls_state, ca_pem) = tls_material(scenario)?;
        let connector = connector(&ca_pem)?;
        let app = match server {
            Server::Webhook => Some(webhook::router(Arc::new(ServerState::new(
                Policy::built_in(),
            )))),
            Server::Constant => Some(reference::router(Mode::Constant)),
            Server::Floor => None,
        };
        let sender = runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| failed("bind")(&e))?;
            let addr = listener.local_addr().map_err(|e| failed("address")(&e))?;
            match app {
                Some(app) => {
                    tokio::spawn(serve_connections(
                        listener,
                        Arc::new(tls_state),
                        app,
                        ConnectionOptions::new(1024),
                        Duration::from_secs(1),
                        pending::<()>(),
                    ));
                }
                None => {
                    let mut config = (*tls_state.load_full()).clone();
                    config.alpn_protocols = vec![b"http/1.1".to_vec()];
                    tokio::spawn(bench::floor::serve(listener, Arc::new(config)));
                }
            }
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| failed("connect")(&e))?;
            tcp.set_nodelay(true).map_err(|e| failed("nodelay")(&e))?;
            let name = ServerName::try_from("localhost").map_err(|e| failed("name")(&e))?;
            let tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| failed("TLS handshake")(&e))?;
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(|e| failed("HTTP/1.1 handshake")(&e))?;
            tokio::spawn(conn);
            Ok::<_, CountedError>(sender)
        })?;
        let mut this = Self {
            runtime,
            sender,
            body,
        };
        let answer = this
            .runtime
            .block_on(request(&mut this.sender, &this.body))?;
        check(scenario, server, &answer, allowed)?;
        Ok(Box::new(this))
    }
}

/// Posts `body` and reads the whole answer.
async fn request(
    sender: &mut SendRequest<Full<Bytes>>,
    body: &Bytes,
) -> Result<Bytes, CountedError> {
    let request = Request::post(PATH)
        .header(HOST, "localhost")
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(body.clone()))
        .map_err(|e| failed("request")(&e))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| failed("send")(&e))?;
    if response.status() != StatusCode::OK {
        return Err(CountedError::Https(format!(
            "answered {}",
            response.status()
        )));
    }
    let collected = response
        .into_body()
        .collect()
        .await
        .map_err(|e| failed("answer body")(&e))?;
    Ok(collected.to_bytes())
}

/// Checks that the webhook answered `allowed` (the references always allow).
fn check(
    scenario: &'static str,
    server: Server,
    answer: &[u8],
    allowed: bool,
) -> Result<(), CountedError> {
    let wrong = |why: String| CountedError::Answer { scenario, why };
    let review: serde_json::Value =
        serde_json::from_slice(answer).map_err(|e| wrong(format!("answer is not JSON: {e}")))?;
    let answered = review
        .pointer("/response/allowed")
        .and_then(|v| v.as_bool());
    let expected = match server {
        Server::Webhook => allowed,
        Server::Constant | Server::Floor => true,
    };
    if answered == Some(expected) {
        Ok(())
    } else {
        Err(wrong(format!(
            "expected allowed={expected}, answered {answered:?}"
        )))
    }
}

impl Scenario for Https {
    fn run(&mut self, n: u64) -> Result<(), CountedError> {
        let (sender, body) = (&mut self.sender, &self.body);
        self.runtime.block_on(async move {
            for _ in 0..n {
                std::hint::black_box(request(sender, body).await?);
            }
            Ok(())
        })
    }
}

/// The in-process HTTPS scenarios: the webhook, the constant server on its
/// stack and the bare floor, each on the allowed and the denied compact body,
/// and the webhook on a child Pipeline's and a namespace ConfigMap's.
pub fn scenarios() -> Vec<Entry> {
    vec![
        Entry {
            name: "https-01-allowed-compact",
            iterations: 200,
            build: |s| Https::build(s, Server::Webhook, ALLOWED, true),
        },
        Entry {
            name: "https-07-denied-compact",
            iterations: 200,
            build: |s| Https::build(s, Server::Webhook, DENIED, false),
        },
        Entry {
            name: "https-child-pipeline-compact",
            iterations: 200,
            build: |s| Https::build_with(s, Server::Webhook, kinds::child_pipeline()?, true),
        },
        Entry {
            name: "https-namespace-config-compact",
            iterations: 200,
            build: |s| Https::build_with(s, Server::Webhook, kinds::namespace_config()?, true),
        },
        Entry {
            name: "constant-01-compact",
            iterations: 200,
            build: |s| Https::build(s, Server::Constant, ALLOWED, true),
        },
        Entry {
            name: "constant-07-compact",
            iterations: 200,
            build: |s| Https::build(s, Server::Constant, DENIED, true),
        },
        Entry {
            name: "floor-01-compact",
            iterations: 200,
            build: |s| Https::build(s, Server::Floor, ALLOWED, true),
        },
        Entry {
            name: "floor-07-compact",
            iterations: 200,
            build: |s| Https::build(s, Server::Floor, DENIED, true),
        },
    ]
}
