//! The plain-HTTP admin server: `/healthz`, `/readyz` and `/metrics`, on a
//! port of its own so probes and scrapes never touch the TLS listener.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::ServerState;
use super::plain_text;
use crate::metrics::CONTENT_TYPE;

/// The admin routes.
pub fn router(shared: Arc<ServerState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

async fn healthz() -> Response {
    plain_text(StatusCode::OK, "ok")
}

async fn readyz(State(shared): State<Arc<ServerState>>) -> Response {
    match shared.health.readiness() {
        Ok(()) => plain_text(StatusCode::OK, "ready"),
        Err(why) => plain_text(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("not ready: {why}"),
        ),
    }
}

async fn metrics(State(shared): State<Arc<ServerState>>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, CONTENT_TYPE)],
        shared.metrics.encode(),
    )
        .into_response()
}
