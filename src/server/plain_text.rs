//! Plain-text answers: the one-line reasons of errors and refusals.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// A plain-text answer of one line.
pub(crate) fn response(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}
