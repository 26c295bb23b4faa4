//! The HTTPS server: the axum router for `/validate` and `/mutate`, and the
//! TLS accept loop that serves it over HTTP/1.1 and HTTP/2.

pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::admission::{self, Webhook};
use crate::policy::Policy;

/// The largest request body accepted (larger ones get 413).
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// How long a client may take for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The policy in force.
    pub policy: Arc<Policy>,
}

/// The webhook's routes: `POST /validate` and `POST /mutate`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn validate(State(state): State<AppState>, body: Bytes) -> Response {
    review(Webhook::Validate, &state, &body)
}

async fn mutate(State(state): State<AppState>, body: Bytes) -> Response {
    review(Webhook::Mutate, &state, &body)
}

async fn not_found() -> Response {
    text(
        StatusCode::NOT_FOUND,
        "not found: the webhook serves POST /validate and POST /mutate",
    )
}

async fn method_not_allowed() -> Response {
    text(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed: use POST with an AdmissionReview",
    )
}

fn text(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

fn review(webhook: Webhook, state: &AppState, body: &[u8]) -> Response {
    let started = Instant::now();
    match admission::handle(webhook, &state.policy, body) {
        Err(e) => {
            tracing::info!(webhook = webhook.as_str(), error = %e, "bad request");
            text(StatusCode::BAD_REQUEST, &e.to_string())
        }
        Ok((request, outcome)) => {
            let violations: Vec<String> = outcome
                .decision
                .denials
                .iter()
                .map(|v| v.summary())
                .collect();
            tracing::info!(
                webhook = webhook.as_str(),
                uid = %request.uid,
                operation = %request.operation,
                object = %format_args!("{}/{}", request.namespace, request.name),
                user = request.user.username(),
                dry_run = request.dry_run,
                judged = outcome.judged,
                allowed = outcome.allowed,
                violations = ?violations,
                warnings = outcome.decision.warnings.len(),
                defaulted = ?outcome.decision.defaulted,
                duration_us = started.elapsed().as_micros() as u64,
                "decision"
            );
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                outcome.body,
            )
                .into_response()
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` completes.
///
/// Each connection gets its own task: a bounded TLS handshake, then HTTP/1.1
/// or HTTP/2 as ALPN chose, with a bound on how long headers may take. An
/// accept error (such as running out of file descriptors) is logged and the
/// loop carries on after a short pause.
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    http.http2().timer(TokioTimer::new());
    let http = Arc::new(http);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let http = Arc::clone(&http);
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            if let Err(e) = http.serve_connection(TokioIo::new(tls), service).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

/// Binds `addr`, with a clear error naming the address.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))
}
