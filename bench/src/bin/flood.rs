//! A flood of large AdmissionReviews against a webhook, for the memory
//! benchmark (`bench/flood.sh`, BENCHMARKS.md): many concurrent large bodies
//! over HTTP/1.1 (one connection each) or HTTP/2 (several connections with
//! many concurrent streams each), each body paced over `--spread`, while a
//! small request is sent every `--probe-every` on a connection of its own.
//!
//! It prints one JSON line: how many large requests got 200 with an
//! AdmissionReview echoing their uid, 503, another status, or a transport
//! error (reset, closed), and the small requests' latencies. With `--pid`,
//! it also reports the server's VmHWM and the highest VmRSS it sampled.
//!
//! ```text
//! cargo run --release -p bench --bin flood -- --addr 127.0.0.1:18443 --ca certs/ca.crt \
//!     --body big.json --pad-to 7864320 --http1 48
//! cargo run --release -p bench --bin flood -- --addr 127.0.0.1:18443 --ca certs/ca.crt \
//!     --body big.json --pad-to 4194304 --http2 8x32
//! ```
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Floods a webhook with large AdmissionReviews and probes it with small ones.
#[derive(Debug, Parser)]
struct Args {
    /// The webhook's HTTPS address.
    #[arg(long, default_value = "127.0.0.1:18443")]
    addr: SocketAddr,
    /// The CA that signed the webhook's certificate (PEM).
    #[arg(long)]
    ca: PathBuf,
    /// The large AdmissionReview (JSON); its uid is made unique per request.
    #[arg(long)]
    body: PathBuf,
    /// Pad the large body with spaces to this many bytes (0: as it is).
    #[arg(long, default_value_t = 0)]
    pad_to: usize,
    /// The small AdmissionReview sent as a probe.
    #[arg(
        long,
        default_value = "tests/fixtures/admission/01-create-kubectl-apply-validate.json"
    )]
    probe: PathBuf,
    /// HTTP/1.1 flood: this many connections, one large request each.
    #[arg(long, conflicts_with = "http2")]
    http1: Option<usize>,
    /// HTTP/2 flood: CONNECTIONSxSTREAMS, e.g. 8x32.
    #[arg(long)]
    http2: Option<String>,
    /// Each large body is sent in chunks spread evenly over this time (a
    /// sender held back by the server catches up when let through).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    spread: Duration,
    /// The `?timeout=` sent, as the API server would (the manifests' 5s).
    #[arg(long, default_value = "5s")]
    timeout: String,
    /// How long the client waits for an answer beyond that.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    client_slack: Duration,
    /// Interval between small probe requests during the flood.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    probe_every: Duration,
    /// The server's process id, to read VmHWM and sample VmRSS.
    #[arg(long)]
    pid: Option<u32>,
}

/// A body sent in pieces of at most 64 KiB spread evenly over `spread`.
struct Paced {
    parts: std::collections::VecDeque<Bytes>,
    len: usize,
    sent: usize,
    start: Instant,
    spread: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

const PIECE: usize = 64 * 1024;

impl Paced {
    fn new(body: Parts, spread: Duration) -> Self {
        Self {
            len: body.len(),
            parts: body.0.into(),
            sent: 0,
            start: Instant::now(),
            spread,
            sleep: None,
        }
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let Some(part) = this.parts.front_mut() else {
            return Poll::Ready(None);
        };
        let due = this.start + this.spread.mul_f64(this.sent as f64 / this.len as f64);
        if Instant::now() < due {
            let sleep = this
                .sleep
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due.into())));
            sleep.as_mut().reset(due.into());
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let piece = part.split_to(PIECE.min(part.len()));
        if part.is_empty() {
            this.parts.pop_front();
        }
        this.sent += piece.len();
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((self.len - self.sent) as u64)
    }
}

/// A request body in parts: the serialised review before the uid and after
/// it are shared by every request (a flood costs the client no copies), the
/// uid is each request's own.
#[derive(Clone)]
struct Parts(Vec<Bytes>);

impl Parts {
    fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    fn concat(&self) -> Bytes {
        Bytes::from(self.0.concat())
    }
}

/// The uid written into the template, found again in its serialised form.
const UID_MARK: &str = "flood-uid-mark-0000000000";

/// `review` serialised once (padded with spaces to `pad_to` bytes), around
/// its uid.
struct Template {
    before: Bytes,
    after: Bytes,
}

impl Template {
    fn new(review: &Value, pad_to: usize) -> Result<Self, String> {
        let mut review = review.clone();
        review["request"]["uid"] = Value::String(UID_MARK.to_owned());
        let mut bytes = review.to_string().into_bytes();
        if bytes.len() < pad_to {
            bytes.resize(pad_to, b' ');
        }
        let mark = format!("\"{UID_MARK}\"");
        let at = bytes
            .windows(mark.len())
            .position(|w| w == mark.as_bytes())
            .ok_or("the uid is not in the serialised review")?;
        let bytes = Bytes::from(bytes);
        Ok(Self {
            before: bytes.slice(..at),
            after: bytes.slice(at + mark.len()..),
        })
    }

    /// The body for `uid` (at most as long as the mark, so that every body
    /// has the same size).
    fn body(&self, uid: &str) -> Parts {
        let mut quoted = format!("\"{uid}\"").into_bytes();
        // Spaces after the string keep the length (and are valid JSON).
        quoted.resize(UID_MARK.len() + 2, b' ');
        Parts(vec![
            self.before.clone(),
            Bytes::from(quoted),
            self.after.clone(),
        ])
    }
}

/// How one large request ended.
#[derive(Debug)]
enum Outcome {
    /// 200 with an AdmissionReview that echoes the uid.
    Answered,
    /// 503 (waited for the body budget, or refused).
    Unavailable,
    /// Any other status, with the first line of the body.
    Status(StatusCode, String),
    /// A transport error (reset, closed) or the client's own timeout.
    Failed(String),
}

impl Outcome {
    fn describe(&self) -> String {
        match self {
            Self::Answered => "200".to_owned(),
            Self::Unavailable => "503".to_owned(),
            Self::Status(code, line) => format!("{code}: {line}"),
            Self::Failed(why) => format!("failed: {why}"),
        }
    }
}

fn tls_connector(ca: &PathBuf, alpn: &[u8]) -> Result<TlsConnector, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{}: {e}", ca.display()))? {
        roots
            .add(cert.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

async fn connect(addr: SocketAddr, tls: &TlsConnector) -> Result<TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    tls.connect(name, tcp).await.map_err(|e| e.to_string())
}

fn request<B>(path: &str, body: B, len: usize, http2: bool) -> Request<B> {
    let mut builder = Request::post(path)
        .header("content-type", "application/json")
        .header("content-length", len);
    if http2 {
        builder = builder.uri(format!("https://localhost{path}"));
    } else {
        builder = builder.header("host", "localhost");
    }
    builder.body(body).expect("a valid request")
}

async fn judge(
    response: Result<hyper::Response<hyper::body::Incoming>, hyper::Error>,
    uid: &str,
) -> Outcome {
    let response = match response {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("{e:?}")),
    };
    let status = response.status();
    let body = match response.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Outcome::Failed(format!("reading the answer: {e:?}")),
    };
    match status {
        StatusCode::OK => {
            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if review["kind"] == "AdmissionReview" && review["response"]["uid"] == uid {
                Outcome::Answered
            } else {
                Outcome::Status(status, "200 without the AdmissionReview".to_owned())
            }
        }
        StatusCode::SERVICE_UNAVAILABLE => Outcome::Unavailable,
        other => Outcome::Status(
            other,
            String::from_utf8_lossy(&body)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned(),
        ),
    }
}

/// One large request on its own HTTP/1.1 connection.
async fn h1_one(
    args: Arc<Args>,
    tls: TlsConnector,
    template: Arc<Template>,
    i: usize,
    path: String,
) -> Outcome {
    let uid = format!("flood-h1-{i}");
    let body = template.body(&uid);
    let stream = match connect(args.addr, &tls).await {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(format!("connect: {e}")),
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(pair) => pair,
        Err(e) => return Outcome::Failed(format!("handshake: {e}")),
    };
    tokio::spawn(conn);
    let len = body.len();
    let sent = sender.send_request(request(&path, Paced::new(body, args.spread), len, false));
    with_limit(&args, async { judge(sent.await, &uid).await }).await
}

/// `streams` concurrent large requests on one HTTP/2 connection.
async fn h2_connection(
    args: Arc<Args>,
    tls: TlsConnector,
    template: Arc<Template>,
    c: usize,
    streams: usize,
    path: String,
) -> Vec<Outcome> {
    let stream = match connect(args.addr, &tls).await {
        Ok(s) => s,
        Err(e) => return (0..streams).map(|_| Outcome::Failed(e.clone())).collect(),
    };
    let (sender, conn) =
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
        {
            Ok(pair) => pair,
            Err(e) => {
                return (0..streams)
                    .map(|_| Outcome::Failed(format!("h2 handshake: {e}")))
                    .collect();
            }
        };
    tokio::spawn(conn);
    let mut tasks = Vec::new();
    for s in 0..streams {
        let (args, template, path) = (Arc::clone(&args), Arc::clone(&template), path.clone());
        let mut sender = sender.clone();
        tasks.push(tokio::spawn(async move {
            let uid = format!("flood-h2-{c}-{s}");
            let body = template.body(&uid);
            let len = body.len();
            with_limit(&args, async {
                if let Err(e) = sender.ready().await {
                    return Outcome::Failed(format!("h2 not ready: {e}"));
                }
                let sent =
                    sender.send_request(request(&path, Paced::new(body, args.spread), len, true));
                judge(sent.await, &uid).await
            })
            .await
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(
            task.await
                .unwrap_or_else(|e| Outcome::Failed(format!("task: {e}"))),
        );
    }
    outcomes
}

async fn with_limit(args: &Args, work: impl Future<Output = Outcome>) -> Outcome {
    let limit = humantime::parse_duration(&args.timeout).unwrap_or(Duration::from_secs(30))
        + args.client_slack;
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or_else(|_| Outcome::Failed(format!("no answer within {limit:?}")))
}

/// The probe's one connection, in either protocol.
enum ProbeSender {
    Http1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Http2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl ProbeSender {
    /// Waits until the connection can take a request; false once it is
    /// closed.
    async fn ready(&mut self) -> bool {
        match self {
            Self::Http1(s) => s.ready().await.is_ok(),
            Self::Http2(s) => s.ready().await.is_ok(),
        }
    }

    async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error> {
        match self {
            Self::Http1(s) => s.send_request(request).await,
            Self::Http2(s) => s.send_request(request).await,
        }
    }
}

/// Small requests on one kept-alive connection (HTTP/2 when `http2`) every
/// `probe_every` until `stop`: their latencies, and failures.
async fn probe(
    args: Arc<Args>,
    http2: bool,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(Vec<Latency>, Vec<String>), String> {
    let review: Value = serde_json::from_slice(
        &std::fs::read(&args.probe).map_err(|e| format!("{}: {e}", args.probe.display()))?,
    )
    .map_err(|e| e.to_string())?;
    let template = Template::new(&review, 0)?;
    let tls = tls_connector(&args.ca, if http2 { b"h2" } else { b"http/1.1" })?;
    let stream = connect(args.addr, &tls).await?;
    let path = format!("/validate?timeout={}", args.timeout);
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    let mut sender = if http2 {
        let (sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        ProbeSender::Http2(sender)
    } else {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        ProbeSender::Http1(sender)
    };
    let mut i = 0;
    while !*stop.borrow() {
        let uid = format!("probe-{i}");
        let body = template.body(&uid).concat();
        let len = body.len();
        if !sender.ready().await {
            failures.push("probe connection closed".to_owned());
            break;
        }
        let started = Instant::now();
        let response = sender
            .send(request(&path, Full::new(body), len, http2))
            .await;
        let outcome = judge(response, &uid).await;
        record(&mut latencies, &mut failures, started, outcome);
        i += 1;
        tokio::time::sleep(args.probe_every).await;
    }
    Ok((latencies, failures))
}

/// When a probe was sent and how long its answer took.
type Latency = (Instant, Duration);

fn record(
    latencies: &mut Vec<Latency>,
    failures: &mut Vec<String>,
    started: Instant,
    outcome: Outcome,
) {
    match outcome {
        Outcome::Answered => latencies.push((started, started.elapsed())),
        other => failures.push(other.describe()),
    }
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

async fn run(args: Args) -> Result<Value, String> {
    let args = Arc::new(args);
    let review: Value = serde_json::from_slice(
        &std::fs::read(&args.body).map_err(|e| format!("{}: {e}", args.body.display()))?,
    )
    .map_err(|e| format!("{}: {e}", args.body.display()))?;
    let template = Arc::new(Template::new(&review, args.pad_to)?);
    let path = format!("/validate?timeout={}", args.timeout);
    let (http2, connections, streams) = match (&args.http1, &args.http2) {
        (Some(n), None) => (false, *n, 1),
        (None, Some(spec)) => {
            let (c, s) = spec
                .split_once('x')
                .ok_or_else(|| format!("--http2 {spec}: expected CONNECTIONSxSTREAMS"))?;
            let parse = |v: &str| {
                v.parse::<usize>()
                    .map_err(|e| format!("--http2 {spec}: {e}"))
            };
            (true, parse(c)?, parse(s)?)
        }
        _ => return Err("give --http1 N or --http2 CxS".to_owned()),
    };
    let hwm_before = args.pid.and_then(|p| status_kib(p, "VmHWM"));
    let rss_before = args.pid.and_then(|p| status_kib(p, "VmRSS"));

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let prober = tokio::spawn(probe(Arc::clone(&args), http2, stop_rx));
    // Let the probe connection settle before the flood.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let sampled = Arc::new(Mutex::new(0u64));
    let sampler = args.pid.map(|pid| {
        let sampled = Arc::clone(&sampled);
        tokio::spawn(async move {
            loop {
                if let Some(kib) = status_kib(pid, "VmRSS")
                    && let Ok(mut peak) = sampled.lock()
                {
                    *peak = (*peak).max(kib);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });

    let started = Instant::now();
    let mut outcomes = Vec::new();
    if http2 {
        let tls = tls_connector(&args.ca, b"h2")?;
        let mut tasks = Vec::new();
        for c in 0..connections {
            tasks.push(tokio::spawn(h2_connection(
                Arc::clone(&args),
                tls.clone(),
                Arc::clone(&template),
                c,
                streams,
                path.clone(),
            )));
        }
        for task in tasks {
            outcomes.extend(task.await.map_err(|e| e.to_string())?);
        }
    } else {
        let tls = tls_connector(&args.ca, b"http/1.1")?;
        let mut tasks = Vec::new();
        for i in 0..connections {
            tasks.push(tokio::spawn(h1_one(
                Arc::clone(&args),
                tls.clone(),
                Arc::clone(&template),
                i,
                path.clone(),
            )));
        }
        for task in tasks {
            outcomes.push(task.await.map_err(|e| e.to_string())?);
        }
    }
    let took = started.elapsed();
    let _ = stop_tx.send(true);
    let (latencies, probe_failures) = prober.await.map_err(|e| e.to_string())??;
    if let Some(s) = sampler {
        s.abort();
    }
    let mut slowest = latencies.clone();
    slowest.sort_by_key(|(_, took)| std::cmp::Reverse(*took));
    let slowest: Vec<Value> = slowest
        .iter()
        .take(5)
        .map(|(sent, took)| {
            let at = sent.saturating_duration_since(started).as_secs_f64()
                - started.saturating_duration_since(*sent).as_secs_f64();
            serde_json::json!({"sent_at_s": (at * 1e3).round() / 1e3, "ms": ms(*took)})
        })
        .collect();
    let mut latencies: Vec<Duration> = latencies.into_iter().map(|(_, took)| took).collect();
    latencies.sort();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .map(ms)
    };
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
    let others: Vec<String> = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Status(..) | Outcome::Failed(_)))
        .take(5)
        .map(Outcome::describe)
        .collect();
    Ok(serde_json::json!({
        "protocol": if http2 { "h2" } else { "http/1.1" },
        "connections": connections,
        "streams_per_connection": streams,
        "requests": outcomes.len(),
        "body_bytes": template.body("").len(),
        "spread_s": args.spread.as_secs_f64(),
        "timeout": args.timeout,
        "took_s": (took.as_secs_f64() * 1e3).round() / 1e3,
        "answered_200": count(|o| matches!(o, Outcome::Answered)),
        "unavailable_503": count(|o| matches!(o, Outcome::Unavailable)),
        "other_status": count(|o| matches!(o, Outcome::Status(..))),
        "failed": count(|o| matches!(o, Outcome::Failed(_))),
        "examples": others,
        "probes": latencies.len(),
        "probe_failures": probe_failures,
        "probe_slowest": slowest,
        "probe_ms": {
            "min": pick(0.0), "p50": pick(0.5), "p99": pick(0.99), "max": pick(1.0),
        },
        "server_vmhwm_kib_before": hwm_before,
        "server_vmrss_kib_before": rss_before,
        "server_vmhwm_kib": args.pid.and_then(|p| status_kib(p, "VmHWM")),
        "server_vmrss_kib_sampled_peak": args.pid.map(|_| sampled.lock().map(|p| *p).unwrap_or(0)),
        "server_vmrss_kib_after": args.pid.and_then(|p| status_kib(p, "VmRSS")),
    }))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flood: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("flood: {e}");
            ExitCode::FAILURE
        }
    }
}
