//! A small HTTPS stand-in for the API server's SubjectAccessReview
//! endpoint, for a webhook process that checks forces through RBAC: it
//! allows the users it was given and denies everyone else. Any other path
//! is answered 404, as for an object that does not exist.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use base64::Engine as _;
use pipelinerollout_webhook::pki;
use pipelinerollout_webhook::server::tls::{self, TlsFiles, TlsState};
use pipelinerollout_webhook::server::{self, ConnectionOptions};
use serde_json::{Value, json};

#[derive(Debug)]
struct Allowed {
    users: Vec<String>,
    reviews: AtomicUsize,
}

async fn review(State(state): State<Arc<Allowed>>, body: axum::body::Bytes) -> axum::Json<Value> {
    state.reviews.fetch_add(1, Ordering::Relaxed);
    let mut review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let user = review["spec"]["user"].as_str().unwrap_or_default();
    let allowed = state.users.iter().any(|u| u == user);
    review["status"] = json!({"allowed": allowed});
    axum::Json(review)
}

/// The stand-in, serving on 127.0.0.1 until the test process ends, and a
/// kubeconfig pointing at it.
pub struct SarStandIn {
    /// A kubeconfig for `serve --kubeconfig`.
    pub kubeconfig: std::path::PathBuf,
    state: Arc<Allowed>,
    _dir: tempfile::TempDir,
}

impl SarStandIn {
    /// Starts a stand-in that allows `users`.
    pub async fn start(users: &[&str]) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("dir");
        let names: Vec<String> = pki::DEV_NAMES.iter().map(|s| (*s).to_owned()).collect();
        let generated = pki::generate("stand-in kube-apiserver", &names, 1).expect("certs");
        let paths = pki::CertPaths::in_dir(dir.path());
        paths
            .write(&generated)
            .expect("write the stand-in's certificates");
        let loaded = tls::load(&TlsFiles {
            cert: paths.cert.clone(),
            key: paths.key.clone(),
            client_ca: None,
        })
        .expect("the stand-in's TLS");
        let state = Arc::new(Allowed {
            users: users.iter().map(|u| (*u).to_owned()).collect(),
            reviews: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(review),
            )
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(server::serve_connections(
            listener,
            Arc::new(TlsState::new(loaded.config)),
            app,
            ConnectionOptions::new(64),
            Duration::from_secs(1),
            std::future::pending(),
        ));
        let ca = base64::engine::general_purpose::STANDARD.encode(generated.ca_pem.as_bytes());
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    \
                 server: https://127.0.0.1:{port}\n    certificate-authority-data: {ca}\n\
                 users:\n- name: webhook\n  user:\n    token: test-token\n\
                 contexts:\n- name: stand-in\n  context: {{cluster: stand-in, user: webhook}}\n\
                 current-context: stand-in\n"
            ),
        )
        .expect("kubeconfig");
        Self {
            kubeconfig,
            state,
            _dir: dir,
        }
    }

    /// How many SubjectAccessReviews it answered.
    pub fn reviews(&self) -> usize {
        self.state.reviews.load(Ordering::Relaxed)
    }
}
