//! The request deadline: the API server's `?timeout=` (at most 30 seconds),
//! after which nobody waits for the answer, so work on it stops. Ours, not
//! tower-http's `TimeoutLayer`: that one has a single duration for every
//! request, and each review brings its own (a slow body is cut off at a
//! `?timeout=1s` in `a_slow_body_is_cut_off_at_the_api_servers_deadline`,
//! tests/https/operations.rs; RBAC checks are given what is left of it in
//! `a_slow_answer_past_the_deadline_denies_in_time`, tests/https/rbac.rs).

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::Response;

use super::plain_text;

/// The deadline when the API server sends no `?timeout=` (its longest).
const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// When the API server stops waiting for the answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(pub Instant);

/// Time kept back from the deadline for building and sending the answer.
const SAFETY_MARGIN: Duration = Duration::from_millis(500);

impl Deadline {
    /// What is left for an RBAC check: the deadline less the safety margin.
    pub(crate) fn time_for_rbac(self) -> Duration {
        self.0
            .saturating_duration_since(Instant::now())
            .saturating_sub(SAFETY_MARGIN)
            .max(Duration::from_millis(100))
    }
}

/// The deadline the API server asked for with `?timeout=` (it appends the
/// webhook's `timeoutSeconds`, such as `10s`), at most 30 seconds.
fn requested_deadline(query: Option<&str>) -> Duration {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(|v| humantime::parse_duration(v).ok())
        .filter(|d| !d.is_zero())
        .map_or(DEFAULT_DEADLINE, |d| d.min(DEFAULT_DEADLINE))
}

impl Deadline {
    /// The deadline of a request whose query is `query`, and how far off it
    /// is.
    pub(crate) fn of_query(query: Option<&str>) -> (Self, Duration) {
        let limit = requested_deadline(query);
        (Self(Instant::now() + limit), limit)
    }
}

/// Runs `work`, the answer to a request, until `limit` has passed; then
/// stops it (reading a slow body included) and answers 504.
pub(crate) async fn enforce(limit: Duration, work: impl Future<Output = Response>) -> Response {
    match tokio::time::timeout(limit, work).await {
        Ok(response) => response,
        Err(_) => {
            tracing::info!(deadline = ?limit, "request abandoned: its deadline passed");
            plain_text(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("deadline of {limit:?} passed before the request could be answered"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_from_the_query() {
        let cases = [
            (None, DEFAULT_DEADLINE),
            (Some("timeout=10s"), Duration::from_secs(10)),
            (Some("a=b&timeout=5s"), Duration::from_secs(5)),
            (Some("timeout=1m0s"), Duration::from_secs(30)),
            (Some("timeout=250ms"), Duration::from_millis(250)),
            (Some("timeout=0s"), DEFAULT_DEADLINE),
            (Some("timeout=soon"), DEFAULT_DEADLINE),
        ];
        for (query, want) in cases {
            assert_eq!(requested_deadline(query), want, "{query:?}");
        }
    }
}
