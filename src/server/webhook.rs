//! The webhook's routes: `POST /validate` and `POST /mutate`, with the
//! request deadline ([`deadline`]), the body budget ([`super::budget`]),
//! the metrics and the decision log.
//!
//! One middleware layer, the metrics', wraps the router; the deadline and
//! the budget run inside the two handlers, the only routes they concern.
//! Each `from_fn` layer costs about 1,000 instructions a request
//! (docs/performance.md, "Where a request's instructions go").

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::ServerState;
use super::deadline::{self, Deadline};
use super::plain_text;
use crate::admission::{self, AdmissionRequest, AnswerContext, Reply, Webhook};
use crate::logtext::{Escaped, EscapedObject};
use crate::metrics::requests::RequestLabels;
use crate::policy::rules::ClusterView;

/// What the handler tells the metrics layer about an answered review.
#[derive(Debug, Clone, Copy)]
struct Answered {
    operation: &'static str,
    allowed: bool,
}

/// The webhook's routes.
pub fn router(shared: Arc<ServerState>) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&shared), observe))
        .with_state(shared)
}

async fn validate(State(shared): State<Arc<ServerState>>, request: Request) -> Response {
    review(Webhook::Validate, &shared, request).await
}

async fn mutate(State(shared): State<Arc<ServerState>>, request: Request) -> Response {
    review(Webhook::Mutate, &shared, request).await
}

/// Answers a review within its deadline: the body is let in by the budget,
/// then judged; the request slot and the body's bytes are given back once
/// the answer is ready.
async fn review(webhook: Webhook, shared: &ServerState, request: Request) -> Response {
    let (deadline, limit) = Deadline::of_query(request.uri().query());
    deadline::enforce(limit, async {
        match shared
            .budget
            .admit(&shared.metrics.budget, deadline, request)
            .await
        {
            // Boxed: the answer's future is about 7.5 KB, and each move of
            // the futures around it would copy it whole (docs/performance.md).
            Ok(admitted) => {
                Box::pin(answer_request(webhook, shared, deadline, &admitted.body)).await
            }
            Err(refused) => refused,
        }
    })
    .await
}

async fn not_found() -> Response {
    plain_text(
        StatusCode::NOT_FOUND,
        "not found: the webhook serves POST /validate and POST /mutate",
    )
}

async fn method_not_allowed() -> Response {
    plain_text(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed: use POST with an AdmissionReview",
    )
}

async fn answer_request(
    webhook: Webhook,
    shared: &ServerState,
    deadline: Deadline,
    body: &[u8],
) -> Response {
    let started = Instant::now();
    let policy = shared.policy();
    let cluster_default = shared.cluster_default.load_full();
    let context = AnswerContext {
        cluster_default: Some(&cluster_default),
        cluster: shared.cluster.as_deref().map(|c| c as &dyn ClusterView),
        ..AnswerContext::now(&shared.authorizer, deadline.time_for_rbac())
    };
    match admission::answer(webhook, &policy, body, context).await {
        Err(e) => {
            tracing::info!(webhook = webhook.as_str(), error = %Escaped(&e.to_string()), "bad request");
            plain_text(StatusCode::BAD_REQUEST, &e.to_string())
        }
        Ok((request, outcome)) => {
            shared.metrics.record_answer(&request, &outcome);
            shared.events.send_verdict_events(&request, &outcome);
            log_decision(&request, &outcome, started);
            let answered = Answered {
                operation: request.operation.as_str(),
                allowed: outcome.allowed(),
            };
            let mut response = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                outcome.body,
            )
                .into_response();
            response.extensions_mut().insert(answered);
            response
        }
    }
}

/// The decision log: one line per answered review.
fn log_decision(request: &AdmissionRequest, outcome: &Reply, started: Instant) {
    let verdict = &outcome.verdict;
    if let Some(trace) = outcome.rbac {
        tracing::debug!(uid = %Escaped(&request.uid), result = trace.result, cached = trace.cached, duration = ?trace.duration, "RBAC check");
    }
    tracing::info!(
        webhook = outcome.webhook.as_str(),
        uid = %Escaped(&request.uid),
        operation = request.operation.as_str(),
        object = %EscapedObject(&request.namespace, &request.name),
        user = request.user.username(),
        dry_run = request.dry_run,
        judged = outcome.judged,
        allowed = outcome.allowed(),
        // Field values are only built when the line is logged.
        violations = ?verdict.denials.iter().map(|v| v.summary()).collect::<Vec<_>>(),
        warnings = ?verdict.warnings,
        defaulted = ?verdict.defaulted,
        duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        "decision"
    );
}

/// Decrements the in-flight gauge however the request ends.
struct InFlight<'a>(&'a ServerState);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.metrics.requests.in_flight.dec();
    }
}

/// Counts and times every request.
async fn observe(State(shared): State<Arc<ServerState>>, request: Request, next: Next) -> Response {
    let webhook = match request.uri().path() {
        "/validate" => "validate",
        "/mutate" => "mutate",
        _ => "other",
    };
    let started = Instant::now();
    shared.metrics.requests.in_flight.inc();
    let guard = InFlight(&shared);
    let response = next.run(request).await;
    drop(guard);
    let (operation, result) = match response.extensions().get::<Answered>() {
        Some(a) => (a.operation, if a.allowed { "allowed" } else { "denied" }),
        None => ("", "error"),
    };
    shared.metrics.requests.record_request(
        RequestLabels {
            webhook,
            operation,
            result,
            code: response.status().as_u16(),
        },
        started.elapsed(),
    );
    response
}
