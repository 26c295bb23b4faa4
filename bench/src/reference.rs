//! The reference handlers: the webhook's stack with a handler that does no
//! webhook work, to compare the webhook with.
//!
//! - [`Mode::Constant`] reads the body and answers every POST with the same
//!   small AdmissionReview. The transport floor: no webhook on this stack can
//!   be faster.
//! - [`Mode::Floor`] is not on this stack: a bare tokio + hyper + rustls
//!   server ([`crate::floor`]) with the same answer, which shows what the
//!   webhook's own stack (accept loop, timeouts, router) costs.
//! - [`Mode::ParseAll`] parses the whole body into `serde_json::Value` and
//!   echoes `request.uid` in an allowed AdmissionReview. What a naive webhook
//!   pays.

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use clap::ValueEnum;
use pipelinerollout_webhook::server::budget::MAX_BODY_BYTES;
use serde_json::Value;

/// Which reference handler to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// A fixed small AdmissionReview for every POST (the transport floor).
    Constant,
    /// Parse the whole body into `serde_json::Value`, echo `request.uid`.
    ParseAll,
    /// The constant answer from a bare tokio + hyper + rustls server.
    Floor,
}

/// The transport floor's answer: the shape of an allowed AdmissionReview.
pub const CONSTANT_REVIEW: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"00000000-0000-0000-0000-000000000000","allowed":true}}"#;

fn json(body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Reads the whole body (as the webhook must), answers the same bytes.
async fn constant(_body: Bytes) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        CONSTANT_REVIEW,
    )
        .into_response()
}

/// Builds the whole document, then answers with the uid it carries.
async fn parse_all(body: Bytes) -> Response {
    let review: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("body is not valid JSON: {e}\n"),
            )
                .into_response();
        }
    };
    let api_version = review
        .get("apiVersion")
        .cloned()
        .unwrap_or_else(|| Value::from("admission.k8s.io/v1"));
    let uid = review
        .pointer("/request/uid")
        .cloned()
        .unwrap_or(Value::Null);
    let answer = serde_json::json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "response": { "uid": uid, "allowed": true },
    });
    match serde_json::to_vec(&answer) {
        Ok(bytes) => json(bytes),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The reference server's routes for `mode`, with the webhook's body limit.
pub fn router(mode: Mode) -> Router {
    let app = match mode {
        Mode::Constant | Mode::Floor => Router::new()
            .route("/validate", post(constant))
            .route("/mutate", post(constant))
            .fallback(constant),
        Mode::ParseAll => Router::new()
            .route("/validate", post(parse_all))
            .route("/mutate", post(parse_all))
            .fallback(parse_all),
    };
    app.layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}
