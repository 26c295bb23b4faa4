//! Serving connections: the accept loop, the TLS handshake, HTTP/1.1 and
//! HTTP/2 with bounded buffers, and the timeouts that close silent, idle and
//! dead connections so that none holds a connection slot for ever.
//!
//! hyper-util's `auto::Builder` holds the buffers, the HTTP/1.1 header
//! timeout and the HTTP/2 limits and pings. The timer per connection is
//! ours, for the two bounds it does not hold: a client that sends nothing,
//! or only part of the HTTP/2 preface, after the handshake (hyper's header
//! timeout starts only once the protocol is known:
//! `silent_connections_cannot_hold_every_slot` in
//! tests/https/connections.rs fails without it, the server accepting
//! nothing more), and an HTTP/2 connection with no request in flight, which
//! hyper keeps open while it answers pings
//! (`an_idle_http2_connection_is_closed_after_the_idle_timeout`). The
//! shutdown is that timer's too: hyper-util's `GracefulShutdown` takes the
//! connection whole (its `GracefulConnection` trait is sealed), after which
//! the idle close can no longer reach it.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::future::RouteFuture;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

type IncomingRequest = hyper::Request<hyper::body::Incoming>;

use super::tls::TlsState;

/// How long a client may take for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's headers, from the end of
/// the TLS handshake for the first request, whatever the protocol (see the
/// module doc). On HTTP/1.1, hyper restarts it when a connection goes idle,
/// so it is also how long a kept-alive connection may stay idle.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default `--idle-timeout`: how long a connection with no request in
/// flight stays open (HTTP/1.1 ones close sooner, at the header timeout).
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The default `--keep-alive-interval`: how often an HTTP/2 connection with
/// nothing received is pinged.
const DEFAULT_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(20);

/// The longest wait for a ping's acknowledgement before the connection is
/// taken for dead and closed.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection closed for being idle, whose client does not finish the
/// HTTP/2 goodbye (GOAWAY, ping) in this time, is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The most HTTP/2 streams open at once on one connection (hyper's default
/// is 200). More wait in the client; the request limit applies across
/// connections.
const HTTP2_MAX_STREAMS: u32 = 32;

/// HTTP/2 flow-control window of a stream: how much of its body a client
/// may send ahead of what the server has read. A request waiting for body
/// budget holds at most this much of its body (hyper's default is 1 MiB).
const HTTP2_STREAM_WINDOW: u32 = 32 * 1024;

/// HTTP/2 flow-control window of a connection: room for every stream's
/// window (hyper's default is the same 1 MiB). Smaller, streams waiting for
/// budget would fill it with their first bytes and leave none for the
/// streams being read, which would then wait for them in turn.
const HTTP2_CONNECTION_WINDOW: u32 = HTTP2_MAX_STREAMS * HTTP2_STREAM_WINDOW;

/// The largest HTTP/2 frame and header list accepted (the protocol's
/// default frame size; hyper's default header list size).
const HTTP2_MAX_FRAME: u32 = 16 * 1024;
const HTTP2_MAX_HEADER_LIST: u32 = 16 * 1024;

/// The most response bytes buffered per HTTP/2 stream (answers are small;
/// hyper's default is 400 KiB).
const HTTP2_MAX_SEND_BUFFER: usize = 64 * 1024;

/// The largest HTTP/1.1 read buffer, which also bounds the request head,
/// as large as HTTP/2's header list (hyper's default is about 400 KiB).
const HTTP1_MAX_BUFFER: usize = 16 * 1024;

/// How connections are served; `serve`'s connection flags.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ConnectionOptions {
    /// The most connections served at once; further ones wait to be accepted.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Close a connection with no request in flight after this long (HTTP/1.1 ones close after 10s idle in any case).
    #[arg(long, env = "WEBHOOK_IDLE_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// Ping an HTTP/2 connection that has sent nothing for this long; close it if the ping is not answered within the same time (at most 10s).
    #[arg(long, env = "WEBHOOK_KEEP_ALIVE_INTERVAL", default_value = "20s", value_parser = humantime::parse_duration)]
    pub keep_alive_interval: Duration,
}

impl ConnectionOptions {
    /// At most `max_connections`, with the default timeouts.
    pub fn new(max_connections: usize) -> Self {
        Self {
            max_connections,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            keep_alive_interval: DEFAULT_KEEP_ALIVE_INTERVAL,
        }
    }
}

fn http_builder(options: &ConnectionOptions) -> auto::Builder<TokioExecutor> {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(HTTP1_MAX_BUFFER);
    let ping = options.keep_alive_interval.max(Duration::from_millis(100));
    http.http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(HTTP2_MAX_STREAMS)
        .initial_stream_window_size(HTTP2_STREAM_WINDOW)
        .initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
        .max_frame_size(HTTP2_MAX_FRAME)
        .max_header_list_size(HTTP2_MAX_HEADER_LIST)
        .max_send_buf_size(HTTP2_MAX_SEND_BUFFER)
        .keep_alive_interval(ping)
        .keep_alive_timeout(ping.min(KEEP_ALIVE_TIMEOUT));
    http
}

/// What a connection is doing: whether a request has arrived, how many are
/// in flight, and since when none is.
#[derive(Debug)]
struct Activity {
    requested: AtomicBool,
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
}

/// Marks a request in flight on a connection until dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1
            && let Ok(mut since) = self.0.idle_since.lock()
        {
            *since = Instant::now();
        }
    }
}

/// What to do with a connection when its timer fires.
enum Verdict {
    /// No request arrived within the header timeout: drop it.
    Silent,
    /// Nothing in flight for the idle timeout: close it gracefully.
    Idle,
    /// Look again at this time.
    Later(Instant),
}

impl Activity {
    fn new() -> Self {
        Self {
            requested: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
        }
    }

    fn start(self: &Arc<Self>) -> InFlight {
        self.requested.store(true, Ordering::Release);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    fn verdict(&self, opened: Instant, idle_timeout: Duration) -> Verdict {
        let now = Instant::now();
        if !self.requested.load(Ordering::Acquire) {
            let cut_off = opened + HEADER_READ_TIMEOUT.min(idle_timeout);
            return if now >= cut_off {
                Verdict::Silent
            } else {
                Verdict::Later(cut_off)
            };
        }
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Verdict::Later(now + idle_timeout);
        }
        let since = self.idle_since.lock().map_or(now, |s| *s);
        if now >= since + idle_timeout {
            Verdict::Idle
        } else {
            Verdict::Later(since + idle_timeout)
        }
    }
}

/// Serves `app` over TLS (HTTP/1.1 and HTTP/2) on `listener` until
/// `accept_until` completes, then stops accepting and gives the open
/// connections `grace` to finish their requests (HTTP/2 ones get a GOAWAY).
/// Each connection is a task of its own, with the TLS configuration in force
/// at accept time, bounded as the module says. An accept error (such as
/// running out of file descriptors) is logged and the loop carries on after
/// a short pause.
pub async fn serve_connections(
    listener: TcpListener,
    tls: Arc<TlsState>,
    app: Router,
    options: ConnectionOptions,
    grace: Duration,
    accept_until: impl std::future::Future<Output = ()>,
) {
    let http = Arc::new(http_builder(&options));
    let slots = u32::try_from(options.max_connections.max(1)).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(slots as usize));
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(accept_until);
    loop {
        let permit = tokio::select! {
            () = &mut accept_until => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut accept_until => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors, for one: pause, then carry on.
                    tracing::warn!(error = %e, "accept failed; retrying shortly");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let acceptor = TlsAcceptor::from(tls.load_full());
        let http = Arc::clone(&http);
        let activity = Arc::new(Activity::new());
        let service =
            TowerToHyperService::new(ServiceExt::<IncomingRequest>::map_future(app.clone(), {
                let activity = Arc::clone(&activity);
                move |answer: RouteFuture<Infallible>| {
                    let in_flight = activity.start();
                    async move {
                        let answer = answer.await;
                        drop(in_flight);
                        answer
                    }
                }
            }));
        let mut stopping = stopping.clone();
        let idle_timeout = options.idle_timeout;
        tokio::spawn(async move {
            let _permit = permit;
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
            let opened = Instant::now();
            let conn = http.serve_connection(TokioIo::new(tls), service);
            tokio::pin!(conn);
            // Set once the connection is closing: when to drop it anyway.
            let mut closing: Option<Instant> = None;
            let result = loop {
                let wake = match closing {
                    Some(at) => at,
                    None => match activity.verdict(opened, idle_timeout) {
                        Verdict::Later(at) => at,
                        Verdict::Silent => {
                            tracing::debug!(%peer, "no request in time; closing the connection");
                            return;
                        }
                        Verdict::Idle => {
                            tracing::debug!(%peer, ?idle_timeout, "idle; closing the connection");
                            conn.as_mut().graceful_shutdown();
                            closing = Some(Instant::now() + CLOSE_TIMEOUT);
                            continue;
                        }
                    },
                };
                tokio::select! {
                    result = conn.as_mut() => break result,
                    _ = stopping.wait_for(|s| *s), if closing.is_none() => {
                        conn.as_mut().graceful_shutdown();
                        // The server's grace period bounds it from now on.
                        closing = Some(Instant::now() + Duration::from_secs(86_400));
                    }
                    () = tokio::time::sleep_until(wake) => {
                        if closing.is_some() {
                            if activity.in_flight.load(Ordering::Acquire) == 0 {
                                tracing::debug!(%peer, "the client did not close; dropping the connection");
                                return;
                            }
                            closing = Some(Instant::now() + CLOSE_TIMEOUT);
                        }
                    }
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    let open = slots as usize - permits.available_permits();
    tracing::info!(
        connections = open,
        ?grace,
        "no longer accepting; finishing in-flight requests"
    );
    let _ = stop.send(true);
    if tokio::time::timeout(grace, permits.acquire_many(slots))
        .await
        .is_err()
    {
        tracing::warn!("grace period over; closing the remaining connections");
    }
    tracing::info!("webhook stopped");
}
