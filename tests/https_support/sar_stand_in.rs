//! A small HTTPS stand-in for the API server's SubjectAccessReview
//! endpoint, for a webhook that checks forces through RBAC: it answers as
//! its [`Behaviour`] says (which a test may change between requests) and
//! keeps every review it received. Any other path is answered 404, as for
//! an object that does not exist.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use pipelinerollout_webhook::pki;
use pipelinerollout_webhook::server::tls::{self, TlsFiles, TlsState};
use pipelinerollout_webhook::server::{self, ConnectionOptions};
use serde_json::{Value, json};

/// How the stand-in answers a SubjectAccessReview.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Allowed, whoever asks.
    Allow,
    /// Denied, whoever asks.
    Deny,
    /// Allowed for these users only.
    AllowUsers(Vec<String>),
    /// A 500 with a `Status`, as an API server that cannot reach etcd.
    Fail,
    /// Allowed, after this delay.
    Slow(Duration),
}

#[derive(Debug)]
struct Answering {
    behaviour: Mutex<Behaviour>,
    received: Mutex<Vec<Value>>,
}

async fn subject_access_review(
    State(state): State<Arc<Answering>>,
    body: axum::body::Bytes,
) -> Response {
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.received.lock().expect("lock").push(review.clone());
    let behaviour = state.behaviour.lock().expect("lock").clone();
    let allowed = match behaviour {
        Behaviour::Allow => true,
        Behaviour::Deny => false,
        Behaviour::AllowUsers(users) => {
            let user = review["spec"]["user"].as_str().unwrap_or_default();
            users.iter().any(|u| u == user)
        }
        Behaviour::Fail => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd is sad", "code": 500})),
            )
                .into_response();
        }
        Behaviour::Slow(delay) => {
            tokio::time::sleep(delay).await;
            true
        }
    };
    let mut answer = review;
    answer["status"] =
        json!({"allowed": allowed, "reason": if allowed {"bound by test"} else {""}});
    axum::Json(answer).into_response()
}

/// The stand-in, serving on 127.0.0.1 until the test process ends, and a
/// kubeconfig pointing at it.
pub struct SarStandIn {
    /// A kubeconfig for `serve --kubeconfig` (or `ApiServerArgs::kubeconfig` in `ServeOptions::api`).
    pub kubeconfig: std::path::PathBuf,
    state: Arc<Answering>,
    _dir: tempfile::TempDir,
}

impl SarStandIn {
    /// Starts a stand-in that answers as `behaviour` says.
    pub async fn start(behaviour: Behaviour) -> Self {
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
        let state = Arc::new(Answering {
            behaviour: Mutex::new(behaviour),
            received: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                post(subject_access_review),
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

    /// Starts a stand-in that allows `users` and denies everyone else.
    pub async fn allowing(users: &[&str]) -> Self {
        Self::start(Behaviour::AllowUsers(
            users.iter().map(|u| (*u).to_owned()).collect(),
        ))
        .await
    }

    /// Every SubjectAccessReview it received so far, in order.
    pub fn received(&self) -> Vec<Value> {
        self.state.received.lock().expect("lock").clone()
    }

    /// How many SubjectAccessReviews it answered.
    pub fn reviews(&self) -> usize {
        self.state.received.lock().expect("lock").len()
    }

    /// Answers as `behaviour` says from now on.
    pub fn set(&self, behaviour: Behaviour) {
        *self.state.behaviour.lock().expect("lock") = behaviour;
    }
}
