//! The memory request bodies may take, whatever the load: a global budget of
//! body bytes in flight, and a limit on requests in flight across all
//! connections and HTTP/2 streams. No crate holds this bound: hyper bounds
//! each connection's buffers and tower's `ConcurrencyLimit` counts requests,
//! not their bytes; without the budget, 48 HTTP/1.1 clients sending 7.5 MiB
//! each, or 256 HTTP/2 streams of 4 MiB, would have the server buffer all of
//! it at once (the tests `http1_flood_of_large_bodies_stays_within_the_budget`
//! and `http2_flood_of_large_streams_stays_within_the_budget` in
//! tests/https/floods.rs fail without it; `bench/flood.sh` measures the peak,
//! docs/performance.md). The request slots are a semaphore of their own
//! rather than tower's `ConcurrencyLimit` with `LoadShed`: a refusal must be
//! counted under its reason and must read the HTTP/1.1 body it did not take,
//! or the client sees a reset instead of the 503
//! (`requests_over_the_limit_get_503_at_once`).
//!
//! A request of `/validate` or `/mutate` first takes a request slot; when
//! none is free it is answered 503 at once (waiting would hold its headers
//! just the same, so the limit would bound nothing). It then reserves its
//! body's size, from `Content-Length` (over [`MAX_BODY_BYTES`]: 413 at once),
//! or [`MAX_BODY_BYTES`] when the length is not announced (the reservation
//! shrinks to the real size once the body is read). While it waits for the
//! reservation its body is not read: hyper reads no further on HTTP/1.1, and
//! HTTP/2 flow control stops the client after the stream window. If the
//! request deadline (the API server's `?timeout=`) comes first, it gets a 503
//! with a one-line reason. Once reserved, the body is read within it, and
//! the reservation is released when the answer is ready.
//!
//! Small bodies (up to [`SMALL_BODY_BYTES`]) do not queue behind large ones:
//! large bodies may take at most three quarters of the budget, waiting
//! first-come first-served among themselves, and small ones take from the
//! whole budget. So small requests wait only when small requests alone hold
//! a quarter of the budget.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{StatusCode, Version};
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::deadline::Deadline;
use super::plain_text;
use crate::metrics::budget::BudgetMetrics;

const MIB: usize = 1024 * 1024;

/// The largest request body accepted (larger ones get 413).
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// The default `--max-inflight-body-bytes`: with the rest of the process
/// (about 15 MiB) and HTTP buffers, well inside the manifests' 128 MiB
/// memory limit (BENCHMARKS.md, "Memory under a flood").
pub const DEFAULT_MAX_INFLIGHT_BODY_BYTES: usize = 32 * MIB;

/// The default `--max-inflight-requests`.
pub const DEFAULT_MAX_INFLIGHT_REQUESTS: usize = 512;

/// Bodies up to this size are small: they may use the quarter of the budget
/// that large bodies may not.
const SMALL_BODY_BYTES: usize = MIB;

/// A request that waits for budget gives up this long before its deadline,
/// so that its 503 reaches the API server while it still listens.
const WAIT_MARGIN: Duration = Duration::from_millis(250);

/// How long the body of an HTTP/1.1 request answered with 503 unread is
/// still read (and thrown away), so that the client sees the answer rather
/// than a connection reset.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the limits cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The budget cannot hold the largest body beside the small reserve.
    #[error(
        "--max-inflight-body-bytes {got} is too small: at least {min} is needed (the largest body accepted, {MAX_BODY_BYTES} bytes, in the three quarters large bodies may use)"
    )]
    TooSmall {
        /// The budget asked for.
        got: usize,
        /// The smallest budget that works.
        min: usize,
    },
    /// More than a semaphore can count.
    #[error("--max-inflight-body-bytes {0} is too large (at most {max})", max = Semaphore::MAX_PERMITS)]
    TooLarge(usize),
    /// No request could ever be served.
    #[error("--max-inflight-requests must be at least 1")]
    NoRequests,
}

/// The body budget and the request slots, shared by every connection.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    /// Every reserved body byte, small or large.
    all: Arc<Semaphore>,
    /// The part of the budget large bodies may use.
    large: Arc<Semaphore>,
    requests: Arc<Semaphore>,
    bytes: usize,
    max_requests: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(
            DEFAULT_MAX_INFLIGHT_BODY_BYTES,
            DEFAULT_MAX_INFLIGHT_REQUESTS,
        )
        .unwrap_or_else(|_| unreachable!("the defaults are valid"))
    }
}

impl Budget {
    /// A budget of `bytes` body bytes and `requests` requests in flight.
    pub(crate) fn new(bytes: usize, requests: usize) -> Result<Self, BudgetError> {
        let min = (MAX_BODY_BYTES * 4).div_ceil(3);
        if bytes < min {
            return Err(BudgetError::TooSmall { got: bytes, min });
        }
        if bytes > Semaphore::MAX_PERMITS {
            return Err(BudgetError::TooLarge(bytes));
        }
        if requests == 0 {
            return Err(BudgetError::NoRequests);
        }
        Ok(Self {
            all: Arc::new(Semaphore::new(bytes)),
            large: Arc::new(Semaphore::new(bytes - bytes / 4)),
            requests: Arc::new(Semaphore::new(requests.min(Semaphore::MAX_PERMITS))),
            bytes,
            max_requests: requests,
        })
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }

    /// The budget, in bytes, for a gauge.
    pub(crate) fn bytes_i64(&self) -> i64 {
        i64::try_from(self.bytes).unwrap_or(i64::MAX)
    }

    /// Reserves `bytes` (at most [`MAX_BODY_BYTES`]), waiting until `until`
    /// at the latest; `None` if it is not free by then.
    async fn reserve(
        &self,
        bytes: usize,
        until: Instant,
        metrics: &BudgetMetrics,
    ) -> Option<Reservation> {
        let n = u32::try_from(bytes).ok()?;
        let large = bytes > SMALL_BODY_BYTES;
        let lane = if large { "large" } else { "small" };
        // Without waiting, if it fits.
        let fast = if large {
            Arc::clone(&self.large)
                .try_acquire_many_owned(n)
                .ok()
                .and_then(|gate| {
                    let all = Arc::clone(&self.all).try_acquire_many_owned(n).ok()?;
                    Some((all, Some(gate)))
                })
        } else {
            Arc::clone(&self.all)
                .try_acquire_many_owned(n)
                .ok()
                .map(|all| (all, None))
        };
        let (all, gate) = match fast {
            Some(held) => held,
            None => {
                metrics.record_wait(lane);
                let started = Instant::now();
                let wait = async {
                    let gate = if large {
                        Some(Arc::clone(&self.large).acquire_many_owned(n).await.ok()?)
                    } else {
                        None
                    };
                    let all = Arc::clone(&self.all).acquire_many_owned(n).await.ok()?;
                    Some((all, gate))
                };
                let held = tokio::time::timeout_at(until.into(), wait).await;
                metrics
                    .wait_duration
                    .observe(started.elapsed().as_secs_f64());
                held.ok().flatten()?
            }
        };
        Some(Reservation::new(all, gate, metrics.reserved.clone()))
    }
}

/// Body bytes reserved for one request; released when dropped.
#[derive(Debug)]
struct Reservation {
    all: OwnedSemaphorePermit,
    large: Option<OwnedSemaphorePermit>,
    gauge: Gauge,
}

impl Reservation {
    fn new(all: OwnedSemaphorePermit, large: Option<OwnedSemaphorePermit>, gauge: Gauge) -> Self {
        gauge.inc_by(i64::try_from(all.num_permits()).unwrap_or(i64::MAX));
        Self { all, large, gauge }
    }

    fn bytes(&self) -> usize {
        self.all.num_permits()
    }

    /// Gives back what is reserved beyond `bytes`.
    fn shrink_to(&mut self, bytes: usize) {
        let excess = self.all.num_permits().saturating_sub(bytes);
        if excess == 0 {
            return;
        }
        drop(self.all.split(excess));
        if let Some(large) = &mut self.large {
            drop(large.split(excess.min(large.num_permits())));
        }
        self.gauge.dec_by(i64::try_from(excess).unwrap_or(i64::MAX));
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.gauge
            .dec_by(i64::try_from(self.all.num_permits()).unwrap_or(i64::MAX));
    }
}

/// Reads and drops what is left of an HTTP/1.1 body answered unread, for at
/// most [`DRAIN_TIMEOUT`] and [`MAX_BODY_BYTES`], so that the connection is
/// not closed under the answer (a reset could destroy it before the client
/// reads it). HTTP/2 needs none of this: the stream is reset with NO_ERROR
/// after the answer, which clients take as "stop sending".
fn drain_later(version: Version, mut body: Body) {
    if version >= Version::HTTP_2 {
        return;
    }
    tokio::spawn(tokio::time::timeout(DRAIN_TIMEOUT, async move {
        let mut read = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, Bytes::len);
            if read > MAX_BODY_BYTES {
                break;
            }
        }
    }));
}

/// A 503 with `message`, counted under `reason`; the unread body is
/// drained after the answer.
fn refuse(
    metrics: &BudgetMetrics,
    reason: &'static str,
    version: Version,
    body: Body,
    message: &str,
) -> Response {
    metrics.record_refusal(reason);
    drain_later(version, body);
    plain_text(StatusCode::SERVICE_UNAVAILABLE, message)
}

/// Why a reserved body could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// Longer than the largest body accepted.
    #[error("request body is larger than the {MAX_BODY_BYTES}-byte limit")]
    TooLarge,
    /// Longer than its reservation (its Content-Length).
    #[error("request body is longer than its Content-Length")]
    LongerThanAnnounced,
    /// The connection failed or the client gave up.
    #[error("cannot read the request body: {0}")]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

/// Reads `body`, at most `limit` bytes (its reservation); `announced` says
/// whether that limit is its Content-Length. http-body-util's `Limited`
/// holds the limit. A body in one frame (what the API server sends for an
/// ordinary review) is kept as that frame, without a copy; one in several is
/// copied into one buffer as its frames arrive, never held twice. (`collect`
/// keeps every frame until the last, then copies them: in one run of
/// `bench/flood.sh` side by side, the h1 flood's peak was 56 and 61 MiB
/// with it, 53 and 46 MiB without.)
async fn read(body: Body, limit: usize, announced: bool) -> Result<Bytes, ReadError> {
    let mut body = Limited::new(body, limit);
    let capacity = if announced { limit } else { 0 };
    let mut first: Option<Bytes> = None;
    let mut joined: Option<Vec<u8>> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| match e.is::<LengthLimitError>() {
            false => ReadError::Failed(e),
            true if announced => ReadError::LongerThanAnnounced,
            true => ReadError::TooLarge,
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if let Some(buffer) = &mut joined {
            buffer.extend_from_slice(&data);
        } else if let Some(kept) = first.take() {
            let mut buffer = Vec::with_capacity(capacity.max(kept.len() + data.len()));
            buffer.extend_from_slice(&kept);
            buffer.extend_from_slice(&data);
            joined = Some(buffer);
        } else {
            first = Some(data);
        }
    }
    Ok(joined.map_or_else(|| first.unwrap_or_default(), Bytes::from))
}

/// A request let in: its body, read whole, and the request slot and body
/// bytes it holds until dropped (once the answer is ready).
#[derive(Debug)]
pub(super) struct Admitted {
    pub(crate) body: Bytes,
    _slot: OwnedSemaphorePermit,
    _reservation: Reservation,
}

impl Budget {
    /// Lets `request` in: a request slot, then the body's reservation
    /// (waiting until shortly before `deadline`), then the body read into
    /// one buffer. The refusal, when it is one, is the answer to send.
    pub(super) async fn admit(
        &self,
        metrics: &BudgetMetrics,
        deadline: Deadline,
        request: Request,
    ) -> Result<Admitted, Response> {
        let (parts, body) = request.into_parts();
        let announced = body.size_hint().exact();
        if announced.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(plain_text(
                StatusCode::PAYLOAD_TOO_LARGE,
                &ReadError::TooLarge.to_string(),
            ));
        }
        let Ok(slot) = Arc::clone(&self.requests).try_acquire_owned() else {
            let message = format!(
                "too many requests in flight (the limit is {}); try again",
                self.max_requests
            );
            return Err(refuse(
                metrics,
                "requests_in_flight",
                parts.version,
                body,
                &message,
            ));
        };
        let until = deadline
            .0
            .checked_sub(WAIT_MARGIN)
            .unwrap_or_else(Instant::now);
        // Fits in usize: at most MAX_BODY_BYTES.
        let wanted = announced.map_or(MAX_BODY_BYTES, |n| n as usize);
        let Some(mut reservation) = self.reserve(wanted, until, metrics).await else {
            tracing::info!(
                body_bytes = wanted,
                budget = self.bytes,
                "request refused: no body budget free before its deadline"
            );
            let message = format!(
                "the server is busy: no room for a {wanted}-byte body in the {}-byte budget before the deadline",
                self.bytes
            );
            return Err(refuse(
                metrics,
                "body_budget",
                parts.version,
                body,
                &message,
            ));
        };
        let body = match read(body, reservation.bytes(), announced.is_some()).await {
            Ok(bytes) => bytes,
            Err(e @ ReadError::TooLarge) => {
                return Err(plain_text(StatusCode::PAYLOAD_TOO_LARGE, &e.to_string()));
            }
            Err(e) => {
                tracing::info!(error = %e, "bad request body");
                return Err(plain_text(StatusCode::BAD_REQUEST, &e.to_string()));
            }
        };
        reservation.shrink_to(body.len());
        Ok(Admitted {
            body,
            _slot: slot,
            _reservation: reservation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked() {
        assert!(matches!(
            Budget::new(8 * MIB, 1),
            Err(BudgetError::TooSmall { .. })
        ));
        assert!(matches!(
            Budget::new(32 * MIB, 0),
            Err(BudgetError::NoRequests)
        ));
        let budget = Budget::new(11 * MIB, 1).expect("11 MiB holds an 8 MiB body");
        assert!(budget.large.available_permits() >= MAX_BODY_BYTES);
        assert_eq!(Budget::default().bytes(), DEFAULT_MAX_INFLIGHT_BODY_BYTES);
    }

    fn metrics() -> BudgetMetrics {
        crate::metrics::Metrics::new().budget
    }

    fn frames(parts: &[&'static [u8]]) -> Body {
        let parts: Vec<Result<Bytes, std::io::Error>> =
            parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
        Body::from_stream(futures_util::stream::iter(parts))
    }

    fn run(body: Body, limit: usize, announced: bool) -> Result<Bytes, ReadError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| ReadError::Failed(e.into()))?
            .block_on(read(body, limit, announced))
    }

    #[test]
    fn a_single_frame_is_kept_without_a_copy() {
        let sent = Bytes::from(b"{\"kind\":\"AdmissionReview\"}".to_vec());
        let read = run(Body::from(sent.clone()), 64, true).expect("within the limit");
        assert_eq!(read, sent);
        assert_eq!(read.as_ptr(), sent.as_ptr(), "the frame itself, not a copy");
    }

    #[test]
    fn frames_are_joined_in_order() {
        let read = run(frames(&[b"ab", b"", b"cd", b"e"]), 100, false).expect("within the limit");
        assert_eq!(&read[..], b"abcde");
        assert_eq!(&run(frames(&[]), 100, false).expect("empty")[..], b"");
    }

    #[test]
    fn bodies_over_their_limit_are_refused_with_the_reason() {
        let cases = [
            (
                "unannounced, over the largest body",
                run(frames(&[b"abc", b"def"]), 5, false),
                format!("request body is larger than the {MAX_BODY_BYTES}-byte limit"),
            ),
            (
                "longer than announced",
                run(Body::from(Bytes::from_static(b"abcdef")), 5, true),
                "request body is longer than its Content-Length".to_owned(),
            ),
        ];
        for (name, got, want) in cases {
            match got {
                Err(e) => assert_eq!(e.to_string(), want, "{name}"),
                Ok(bytes) => panic!("{name}: read {bytes:?}, want {want:?}"),
            }
        }
    }

    #[tokio::test]
    async fn small_bodies_pass_large_ones_that_wait() {
        let budget = Budget::new(32 * MIB, 100).expect("budget");
        let metrics = metrics();
        let later = Instant::now() + Duration::from_secs(5);
        // Three 8 MiB bodies take the large bodies' 24 MiB.
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(
                budget
                    .reserve(8 * MIB, later, &metrics)
                    .await
                    .expect("fits"),
            );
        }
        // A fourth waits (here: gives up at once).
        let soon = Instant::now() + Duration::from_millis(50);
        assert!(budget.reserve(8 * MIB, soon, &metrics).await.is_none());
        // A fourth that waits does not hold up a small one.
        let waiting = {
            let (budget, metrics) = (budget.clone(), metrics.clone());
            tokio::spawn(async move { budget.reserve(8 * MIB, later, &metrics).await })
        };
        tokio::task::yield_now().await;
        let started = Instant::now();
        let small = budget.reserve(14 * 1024, later, &metrics).await;
        assert!(small.is_some() && started.elapsed() < Duration::from_millis(50));
        assert_eq!(
            metrics.reserved.get(),
            i64::try_from(24 * MIB + 14 * 1024).expect("fits")
        );
        // When a large one is done, the waiting one gets its turn.
        held.pop();
        let fourth = waiting
            .await
            .expect("task")
            .expect("reserved after the release");
        assert_eq!(fourth.bytes(), 8 * MIB);
        drop((held, fourth, small));
        assert_eq!(metrics.reserved.get(), 0);
        assert_eq!(budget.all.available_permits(), 32 * MIB);
    }

    #[tokio::test]
    async fn a_reservation_shrinks_to_what_was_read() {
        let budget = Budget::new(32 * MIB, 1).expect("budget");
        let metrics = metrics();
        let later = Instant::now() + Duration::from_secs(1);
        let mut unknown = budget
            .reserve(MAX_BODY_BYTES, later, &metrics)
            .await
            .expect("fits");
        unknown.shrink_to(1000);
        assert_eq!(unknown.bytes(), 1000);
        assert_eq!(metrics.reserved.get(), 1000);
        assert_eq!(budget.all.available_permits(), 32 * MIB - 1000);
        assert_eq!(budget.large.available_permits(), 24 * MIB - 1000);
        drop(unknown);
        assert_eq!(budget.large.available_permits(), 24 * MIB);
    }
}
