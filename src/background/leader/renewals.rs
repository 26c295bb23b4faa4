//! When this replica last wrote the Lease successfully, seen on the wire.
//!
//! kube-lease-manager renews the Lease inside its `changed()` loop and
//! says nothing when a renewal succeeds, only when the holder changes. A
//! renewal that hangs or keeps failing would leave it believing it leads
//! past the Lease's expiry, when another replica may take over. So the
//! client it is given carries [`RecordWrites`], a tower layer that notes
//! the moment each successful PATCH of the Lease was *sent*: the API server
//! stored a renewal no earlier than that, so no other replica can take the
//! Lease over before that moment plus the Lease duration. The leader counts
//! its renew deadline from the last such moment ([`LeaseWrites::fresh`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::{Method, Request, Response};
use tower::{Layer, Service};

/// The last successful write of the Lease, shared by the layer that sees
/// it and the loop that decides whether this replica leads.
#[derive(Debug, Clone, Default)]
pub struct LeaseWrites(Arc<Mutex<Option<Instant>>>);

impl LeaseWrites {
    /// Notes a successful write sent at `sent` (the latest one counts).
    pub fn record(&self, sent: Instant) {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|l| l < sent) {
            *last = Some(sent);
        }
    }

    /// The last successful write's sending time.
    pub fn last(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Until when a leader whose last write is this one may go on:
    /// `renew_deadline` after it.
    pub fn valid_until(&self, renew_deadline: Duration) -> Option<Instant> {
        self.last().map(|t| t + renew_deadline)
    }

    /// Whether the last write is less than `renew_deadline` old at `now`.
    pub fn fresh(&self, now: Instant, renew_deadline: Duration) -> bool {
        self.valid_until(renew_deadline).is_some_and(|t| now < t)
    }
}

/// The tower layer that feeds a [`LeaseWrites`] from the PATCH requests of
/// one Lease (`path_suffix`: `/namespaces/NS/leases/NAME`).
#[derive(Debug, Clone)]
pub struct RecordWrites {
    path_suffix: String,
    writes: LeaseWrites,
}

impl RecordWrites {
    /// Records the writes of Lease `name` in `namespace` into `writes`.
    pub fn new(namespace: &str, name: &str, writes: LeaseWrites) -> Self {
        Self {
            path_suffix: format!("/namespaces/{namespace}/leases/{name}"),
            writes,
        }
    }
}

impl<S> Layer<S> for RecordWrites {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Recorded<S> {
        Recorded {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose successful Lease PATCHes are recorded.
#[derive(Debug, Clone)]
pub struct Recorded<S> {
    inner: S,
    layer: RecordWrites,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Recorded<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let watched = request.method() == Method::PATCH
            && request.uri().path().ends_with(&self.layer.path_suffix);
        let writes = self.layer.writes.clone();
        let sent = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if watched && response.status().is_success() {
                writes.record(sent);
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use hyper::StatusCode;
    use tower::ServiceExt as _;

    use super::*;

    #[test]
    fn a_write_keeps_the_leader_going_for_the_renew_deadline() {
        let writes = LeaseWrites::default();
        let t0 = Instant::now();
        let deadline = Duration::from_secs(10);
        assert!(!writes.fresh(t0, deadline), "never written: not fresh");
        writes.record(t0);
        assert!(writes.fresh(t0 + Duration::from_secs(9), deadline));
        assert!(!writes.fresh(t0 + deadline, deadline));
        // An answer that arrives late for an earlier request does not move
        // the time back.
        writes.record(t0 + Duration::from_secs(5));
        writes.record(t0 + Duration::from_secs(1));
        assert_eq!(writes.last(), Some(t0 + Duration::from_secs(5)));
    }

    async fn send(layer: &RecordWrites, method: Method, path: &str, status: StatusCode) {
        let service = layer.layer(tower::service_fn(move |_req: Request<()>| async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(status)
                    .body(())
                    .expect("response"),
            )
        }));
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .expect("request");
        service.oneshot(request).await.expect("infallible");
    }

    #[tokio::test]
    async fn only_successful_patches_of_the_lease_count() {
        let writes = LeaseWrites::default();
        let layer = RecordWrites::new("hooks", "lead", writes.clone());
        let lease = "/apis/coordination.k8s.io/v1/namespaces/hooks/leases/lead";
        send(&layer, Method::GET, lease, StatusCode::OK).await;
        send(&layer, Method::PATCH, lease, StatusCode::CONFLICT).await;
        send(
            &layer,
            Method::PATCH,
            "/apis/coordination.k8s.io/v1/namespaces/hooks/leases/other",
            StatusCode::OK,
        )
        .await;
        assert_eq!(writes.last(), None, "reads, refusals and other Leases");
        let before = Instant::now();
        send(
            &layer,
            Method::PATCH,
            &format!("/prefix{lease}?fieldManager=x"),
            StatusCode::OK,
        )
        .await;
        assert!(writes.last().is_some_and(|t| t >= before));
    }
}
