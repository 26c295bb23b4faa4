//! The listening webhook: the TLS listener for `/validate` and `/mutate`,
//! the admin listener, hot reload of certificates and policy, and graceful
//! shutdown. It serves the state [`crate::app`] built; it builds no client
//! and starts no background work.

pub mod admin;
pub(crate) mod args;
pub mod budget;
mod conn;
mod deadline;
mod health;
mod reload;
pub mod size;
pub mod tls;
pub mod webhook;

use crate::namespace_config::ClusterDefault;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::args::{BudgetArgs, ServerArgs, TlsArgs};
use self::budget::Budget;
pub use self::conn::{ConnectionOptions, serve_connections};
use self::health::Health;
use self::tls::{TlsFiles, TlsState};
use crate::authz::{Authorizer, StaticLists};
use crate::events::EventQueue;
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::policy::rules::ClusterView;

/// A plain-text answer of one line: the reason of an error or a refusal.
fn plain_text(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

/// What every request, the admin server and the background controllers
/// share; built by [`crate::app`].
#[derive(Debug)]
pub struct ServerState {
    /// The policy in force, replaced whole on reload; the audit and the
    /// sweeper wait on it for changes ([`ServerState::policy_updates`]).
    policy: watch::Sender<Arc<Policy>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) health: Health,
    /// Who may force a re-apply: the static lists, then RBAC when connected.
    authorizer: Authorizer,
    /// Where the Events verdicts ask for go (off without an API server).
    pub(crate) events: EventQueue,
    /// The body budget and the request limit.
    budget: Budget,
    /// The certificate chain served now (DER, leaf first).
    pub(crate) served_chain: ArcSwap<Vec<rustls_pki_types::CertificateDer<'static>>>,
    /// Numaplane's cluster default strategy, as the watch of its ConfigMap
    /// last read it (`crate::background::numaplane_default`).
    pub(crate) cluster_default: Arc<ArcSwap<ClusterDefault>>,
    /// What [`crate::admission::AnswerContext::cluster`] reads (`None`
    /// without an API server).
    pub(crate) cluster: Option<Arc<dyn ClusterView + Send>>,
}

impl ServerState {
    /// State with `policy` in force (generation 1), not yet ready, and no
    /// API server to ask.
    pub fn new(policy: Policy) -> Self {
        Self::with_authorizer(
            policy,
            Authorizer::StaticLists(StaticLists::new("no connection to the API server")),
        )
    }

    /// State deciding who may force through `authorizer`.
    fn with_authorizer(policy: Policy, authorizer: Authorizer) -> Self {
        Self::with_metrics(policy, authorizer, Metrics::new())
    }

    /// State deciding who may force through `authorizer`, counting in
    /// `metrics`.
    pub(crate) fn with_metrics(policy: Policy, authorizer: Authorizer, metrics: Metrics) -> Self {
        metrics.reloads.policy_generation.set(1);
        let budget = Budget::default();
        metrics.budget.capacity.set(budget.bytes_i64());
        Self {
            policy: watch::Sender::new(Arc::new(policy)),
            metrics: Arc::new(metrics),
            health: Health::default(),
            authorizer,
            events: EventQueue::off(),
            budget,
            served_chain: ArcSwap::from_pointee(Vec::new()),
            cluster_default: Arc::new(ArcSwap::from_pointee(ClusterDefault::Unknown(
                "no connection to the API server".to_owned(),
            ))),
            cluster: None,
        }
    }

    /// Puts `budget` in force (before serving).
    pub(crate) fn set_budget(&mut self, budget: Budget) {
        self.metrics.budget.capacity.set(budget.bytes_i64());
        self.budget = budget;
    }

    pub(crate) fn policy(&self) -> Arc<Policy> {
        Arc::clone(&self.policy.borrow())
    }

    /// Puts `policy` in force, for the next request and every controller
    /// waiting on [`ServerState::policy_updates`].
    fn set_policy(&self, policy: Policy) {
        self.policy.send_replace(Arc::new(policy));
    }

    /// The policy in force, as a channel that says when it is replaced.
    pub(crate) fn policy_updates(&self) -> watch::Receiver<Arc<Policy>> {
        self.policy.subscribe()
    }
}

/// How to run the server: its flags, as parsed, and what the process
/// adds to them.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The server's flags: addresses, policy and certificate files,
    /// reloads, shutdown, connections and the body budget.
    pub server: ServerArgs,
    /// How [`crate::app`] reaches the API server (RBAC checks, Events, the
    /// background controllers).
    pub api: crate::apiserver::args::ApiServerArgs,
    /// The namespaces the webhook configurations skip: no Event is written
    /// from a request about them, as no such request comes from the API
    /// server.
    pub unguarded_namespaces: Vec<String>,
    /// The certificate comes from a Secret the webhook writes itself
    /// (`--manage-certs`): when the files cannot be loaded at start, serve
    /// a throwaway certificate nobody trusts until they can, instead of
    /// failing (the Secret may not be written yet), and be ready only once
    /// [`health::Health::set_trusted`] says the caBundle trusts what is
    /// served.
    pub managed_certificate: bool,
}

/// Why the server could not listen.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The certificate, key or client CA cannot be used.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The development certificates could not be made or read.
    #[error(transparent)]
    DevCerts(#[from] crate::pki::CertError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind { addr, source })
}

/// A started server.
pub struct Running {
    /// The webhook's bound address.
    pub addr: SocketAddr,
    /// The admin server's bound address, if it runs.
    pub admin_addr: Option<SocketAddr>,
    /// Keeps the state the server shares alive as long as this handle.
    _shared: Arc<ServerState>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("addr", &self.addr)
            .field("admin_addr", &self.admin_addr)
            .finish_non_exhaustive()
    }
}

impl Running {
    /// Begins the graceful shutdown: not ready at once, still serving for
    /// the shutdown delay, then no new connections and in-flight requests
    /// finish within the grace period.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
    }

    pub(crate) async fn wait(self) {
        let _ = self.task.await;
    }
}

/// Starts the admin server (not ready), loads the certificates, binds the
/// webhook listener, then turns ready, serving `shared` (built by
/// [`crate::app`]). Start-up problems are errors; later reload problems
/// are logged and counted.
pub(crate) async fn listen(
    options: ServeOptions,
    shared: Arc<ServerState>,
) -> Result<Running, ListenError> {
    // `stop` starts the shutdown; `finished` says the webhook has stopped,
    // which ends the admin server and the reloaders.
    let (stop, stop_rx) = watch::channel(false);
    let (finished, finished_rx) = watch::channel(false);

    let server = &options.server;
    let admin_addr = match server.admin_listen {
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

    let tls = server.tls.files(server.listen.port())?;
    let loaded = match tls::load(&tls) {
        Ok(loaded) => loaded,
        Err(why) if options.managed_certificate => {
            tracing::warn!(%why, "no certificate yet: serving a throwaway one, not ready, until the files appear");
            tls::placeholder(&tls)?
        }
        Err(why) => return Err(why.into()),
    };
    if let Some(ts) = loaded.not_after {
        shared.metrics.reloads.set_certificate_expiry(ts);
    }
    shared.served_chain.store(Arc::new(loaded.chain.clone()));
    let tls_state = Arc::new(TlsState::new(loaded.config));
    let listener = bind(server.listen).await?;
    let addr = listener.local_addr().unwrap_or(server.listen);

    spawn_reloaders(server, tls, &shared, &tls_state, &finished_rx);
    if options.managed_certificate {
        shared.health.require_trust();
    }
    shared.health.set_serving();
    // The addresses bound, under a target of their own so that a launcher
    // can keep this line at any --log-level (tests read it: envtest's
    // `Served`).
    let note = if options.managed_certificate {
        "serving; ready once the caBundle trusts the served certificate"
    } else {
        "ready"
    };
    tracing::info!(target: "pipelinerollout_webhook::server::bound", %addr, admin = ?admin_addr, "{note}");

    let app = webhook::router(Arc::clone(&shared));
    let task = tokio::spawn({
        let shared = Arc::clone(&shared);
        async move {
            let (delay, grace) = (options.server.shutdown_delay, options.server.shutdown_grace);
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
            let connections = options.server.connections;
            serve_connections(listener, tls_state, app, connections, grace, accept_until).await;
            let _ = finished.send(true);
        }
    });
    Ok(Running {
        addr,
        admin_addr,
        _shared: shared,
        stop,
        task,
    })
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

fn spawn_reloaders(
    options: &ServerArgs,
    files: TlsFiles,
    shared: &Arc<ServerState>,
    tls_state: &Arc<TlsState>,
    stop: &watch::Receiver<bool>,
) {
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
                tls_state.store(loaded.config);
                shared_tls.served_chain.store(Arc::new(loaded.chain));
                if let Some(ts) = loaded.not_after {
                    shared_tls.metrics.reloads.set_certificate_expiry(ts);
                }
                shared_tls.metrics.reloads.record_tls_reload(true);
                tracing::info!(not_after = ?loaded.not_after, "certificate reloaded; new connections use it");
            }
            Err(e) => {
                shared_tls.metrics.reloads.record_tls_reload(false);
                tracing::warn!(error = %e, "certificate reload refused; still serving the previous one");
            }
        },
        stopped(stop.clone()),
    ));
    if let Some(path) = options.policy.clone() {
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
                    shared.set_policy(policy);
                    let generation = shared.metrics.reloads.record_policy_reload(true);
                    tracing::info!(generation, %mode, "policy reloaded");
                }
                Err(e) => {
                    shared.metrics.reloads.record_policy_reload(false);
                    tracing::warn!(error = %e, "policy reload refused; the last good policy stays in force");
                }
            },
            stopped(stop.clone()),
        ));
    }
}
