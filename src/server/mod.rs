//! The running webhook: the TLS listener for `/validate` and `/mutate`, the
//! admin listener, hot reload of certificates and policy, and graceful
//! shutdown.

pub mod admin;
pub mod events;
pub mod health;
pub mod metrics;
pub mod reload;
pub mod tls;
pub mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use self::events::EventQueue;
use self::health::Health;
use self::metrics::Metrics;
use self::tls::{TlsFiles, TlsState};
use crate::authz::{Authorizer, RbacAuthorizer, StaticLists};
use crate::policy::{Policy, PolicyError};

/// How long a client may take for the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's headers. It also bounds
/// the time from the end of the TLS handshake to the first request on a
/// connection, whatever the protocol: hyper's own header timeout covers
/// HTTP/1.1 only once it has told HTTP/1.1 from HTTP/2, and nothing covers
/// a client that sends no byte, part of the HTTP/2 preface, or only the
/// preface.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What every request and the admin server share.
#[derive(Debug)]
pub struct Shared {
    /// The policy in force; replaced whole on reload.
    pub policy: ArcSwap<Policy>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Readiness.
    pub health: Health,
    /// Who may force a re-apply: the static lists, then RBAC when connected.
    pub authorizer: Authorizer,
    /// Where the Events decisions ask for go (off without an API server).
    pub events: EventQueue,
}

impl Shared {
    /// State with `policy` in force (generation 1), not yet ready, and no
    /// API server to ask.
    pub fn new(policy: Policy) -> Self {
        Self::with_authorizer(
            policy,
            Authorizer::StaticLists(StaticLists::new("no connection to the API server")),
        )
    }

    /// State asking RBAC through `rbac`.
    pub fn with_rbac(policy: Policy, rbac: RbacAuthorizer) -> Self {
        Self::with_authorizer(policy, Authorizer::Rbac(rbac))
    }

    /// State deciding who may force through `authorizer`.
    pub fn with_authorizer(policy: Policy, authorizer: Authorizer) -> Self {
        let metrics = Metrics::new();
        metrics.policy_generation.set(1);
        Self {
            policy: ArcSwap::from_pointee(policy),
            metrics: Arc::new(metrics),
            health: Health::default(),
            authorizer,
            events: EventQueue::off(),
        }
    }
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The webhook's HTTPS address.
    pub listen: SocketAddr,
    /// The admin server's plain-HTTP address; `None` runs none.
    pub admin_listen: Option<SocketAddr>,
    /// The policy file; `None` for the built-in policy (no reload).
    pub policy_file: Option<PathBuf>,
    /// Certificate, key and optional client CA.
    pub tls: TlsFiles,
    /// How often files are checked for changes, besides file-system events.
    pub reload_interval: Duration,
    /// How long to keep serving after a shutdown signal, not ready.
    pub shutdown_delay: Duration,
    /// How long in-flight requests may take to finish after that.
    pub shutdown_grace: Duration,
    /// The most connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// The kubeconfig for RBAC checks, Events and the sweeper; without it,
    /// the in-cluster account or `KUBECONFIG`.
    pub kubeconfig: Option<PathBuf>,
    /// Run the stale-force sweeper, resetting a force whose pause has been
    /// over this long; `None`: no sweeper.
    pub reset_stale_force: Option<Duration>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The policy is invalid or unreadable.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The certificate, key or client CA cannot be used.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The policy asks RBAC but no API server can be reached.
    #[error("forceReapply.rbac is set but {0}")]
    Rbac(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })
}

/// A started server.
#[derive(Debug)]
pub struct Running {
    /// The webhook's bound address.
    pub addr: SocketAddr,
    /// The admin server's bound address, if it runs.
    pub admin_addr: Option<SocketAddr>,
    /// The state the server shares (policy, metrics, health).
    pub shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Running {
    /// Begins the graceful shutdown: not ready at once, still serving for
    /// the shutdown delay, then no new connections and in-flight requests
    /// finish within the grace period.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until the server has stopped.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// Starts the admin server (not ready), loads the policy and certificates,
/// binds the webhook listener, then turns ready. Start-up problems are
/// errors; later reload problems are logged and counted.
pub async fn start(options: ServeOptions) -> Result<Running, StartError> {
    let policy = match &options.policy_file {
        Some(path) => Policy::from_file(path)?,
        None => Policy::built_in(),
    };
    // RBAC needs an API server when the policy asks for it; otherwise one is
    // used if found, so a reloaded policy can turn RBAC on.
    let (client, authorizer) = match crate::authz::kube_client(options.kubeconfig.as_deref()).await
    {
        Ok(client) => (
            Some(client.clone()),
            Authorizer::Rbac(RbacAuthorizer::new(client)),
        ),
        Err(why) if policy.force_reapply.rbac.is_some() => return Err(StartError::Rbac(why)),
        Err(why) => {
            tracing::info!(%why, "no API server: RBAC checks, Events and the stale-force sweeper are off");
            (None, Authorizer::StaticLists(StaticLists::new(why)))
        }
    };
    let mut shared = Shared::with_authorizer(policy, authorizer);
    if let Some(client) = &client {
        shared.events = EventQueue::start(
            events::recorder(client.clone()),
            Arc::clone(&shared.metrics),
        );
        tracing::info!("Events on PipelineRollouts are on");
    }
    let shared = Arc::new(shared);
    if let (Some(client), Some(grace)) = (&client, options.reset_stale_force) {
        crate::sweeper::spawn(client.clone(), Arc::clone(&shared), grace);
    } else if options.reset_stale_force.is_some() {
        tracing::warn!(
            "--reset-stale-force is set but no API server can be reached: the sweeper is off"
        );
    }
    // `stop` starts the shutdown; `finished` says the webhook has stopped,
    // which ends the admin server and the reloaders.
    let (stop, stop_rx) = watch::channel(false);
    let (finished, finished_rx) = watch::channel(false);

    let admin_addr = match options.admin_listen {
        Some(addr) => {
            let listener = bind(addr).await?;
            let bound = listener.local_addr().unwrap_or(addr);
            let app = admin::router(Arc::clone(&shared));
            // It reports "not ready" during the shutdown, so it outlives the
            // webhook listener.
            let finished_rx = finished_rx.clone();
            tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(stopped(finished_rx.clone()))
                    .await;
            });
            Some(bound)
        }
        None => None,
    };

    let loaded = tls::load(&options.tls)?;
    if let Some(ts) = loaded.not_after {
        shared.metrics.certificate_expiry.set(ts);
    }
    let tls_state = Arc::new(TlsState::new(loaded.config));
    let listener = bind(options.listen).await?;
    let addr = listener.local_addr().unwrap_or(options.listen);

    spawn_reloaders(&options, &shared, &tls_state, &finished_rx);
    shared.health.set_serving();
    tracing::info!(%addr, admin = ?admin_addr, "ready");

    let app = webhook::router(Arc::clone(&shared));
    let task = tokio::spawn({
        let shared = Arc::clone(&shared);
        async move {
            let (delay, grace) = (options.shutdown_delay, options.shutdown_grace);
            let mut stop = stop_rx;
            let accept_until = async move {
                let _ = stop.wait_for(|s| *s).await;
                shared.health.set_stopping();
                tracing::info!(
                    ?delay,
                    "shutdown requested: not ready; still serving until endpoints are updated"
                );
                tokio::time::sleep(delay).await;
            };
            serve_connections(
                listener,
                tls_state,
                app,
                options.max_connections,
                grace,
                accept_until,
            )
            .await;
            let _ = finished.send(true);
        }
    });
    Ok(Running {
        addr,
        admin_addr,
        shared,
        stop,
        task,
    })
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn spawn_reloaders(
    options: &ServeOptions,
    shared: &Arc<Shared>,
    tls_state: &Arc<TlsState>,
    stop: &watch::Receiver<bool>,
) {
    let files = options.tls.clone();
    let paths = files.paths();
    let initial = reload::snapshot(&paths);
    let (shared_tls, tls_state) = (Arc::clone(shared), Arc::clone(tls_state));
    tokio::spawn(reload::watch(
        "tls",
        paths,
        initial,
        options.reload_interval,
        move || match tls::load(&files) {
            Ok(loaded) => {
                tls_state.set(loaded.config);
                if let Some(ts) = loaded.not_after {
                    shared_tls.metrics.certificate_expiry.set(ts);
                }
                Metrics::count_reload(&shared_tls.metrics.tls_reloads, true);
                tracing::info!(not_after = ?loaded.not_after, "certificate reloaded; new connections use it");
            }
            Err(e) => {
                Metrics::count_reload(&shared_tls.metrics.tls_reloads, false);
                tracing::warn!(error = %e, "certificate reload refused; still serving the previous one");
            }
        },
        stopped(stop.clone()),
    ));
    if let Some(path) = options.policy_file.clone() {
        let paths = vec![path.clone()];
        let initial = reload::snapshot(&paths);
        let shared = Arc::clone(shared);
        tokio::spawn(reload::watch(
            "policy",
            paths,
            initial,
            options.reload_interval,
            move || match Policy::from_file(&path) {
                Ok(policy) => {
                    let mode = policy.mode;
                    shared.policy.store(Arc::new(policy));
                    shared.metrics.policy_generation.inc();
                    Metrics::count_reload(&shared.metrics.policy_reloads, true);
                    tracing::info!(
                        generation = shared.metrics.policy_generation.get(),
                        %mode,
                        "policy reloaded"
                    );
                }
                Err(e) => {
                    Metrics::count_reload(&shared.metrics.policy_reloads, false);
                    tracing::warn!(error = %e, "policy reload refused; the last good policy stays in force");
                }
            },
            stopped(stop.clone()),
        ));
    }
}

/// Serves `app` over TLS (HTTP/1.1 and HTTP/2) on `listener` until
/// `accept_until` completes, then stops accepting and gives the open
/// connections `grace` to finish their requests (HTTP/2 ones get a GOAWAY).
///
/// Each connection gets its own task: a bounded TLS handshake with the
/// configuration in force at accept time, then HTTP with a bound on how long
/// headers may take, the first request's included (a connection that has
/// sent no request by then is closed, so silent clients cannot hold the
/// connection slots for ever). At most `max_connections` are served at once;
/// an accept error (such as running out of file descriptors) is logged and
/// the loop carries on after a short pause.
pub async fn serve_connections(
    listener: TcpListener,
    tls: Arc<TlsState>,
    app: Router,
    max_connections: usize,
    grace: Duration,
    accept_until: impl std::future::Future<Output = ()>,
) {
    let mut http = auto::Builder::new(TokioExecutor::new());
    http.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    http.http2().timer(TokioTimer::new());
    let http = Arc::new(http);
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(max_connections.max(1)));
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
        let acceptor = TlsAcceptor::from(tls.current());
        let http = Arc::clone(&http);
        // Set when the connection's first request has arrived.
        let requested = Arc::new(AtomicBool::new(false));
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(app.clone(), {
            let requested = Arc::clone(&requested);
            move |request: axum::extract::Request<hyper::body::Incoming>| {
                requested.store(true, Ordering::Relaxed);
                request
            }
        }));
        let watcher = graceful.watcher();
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
            let conn = http
                .serve_connection(TokioIo::new(tls), service)
                .into_owned();
            let served = watcher.watch(conn);
            tokio::pin!(served);
            let result = match tokio::time::timeout(HEADER_READ_TIMEOUT, &mut served).await {
                Ok(result) => result,
                Err(_) if !requested.load(Ordering::Relaxed) => {
                    tracing::debug!(%peer, "no request in time; closing the connection");
                    return;
                }
                Err(_) => served.await,
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tracing::info!(
        connections = graceful.count(),
        ?grace,
        "no longer accepting; finishing in-flight requests"
    );
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grace period over; closing the remaining connections");
    }
    tracing::info!("webhook stopped");
}
