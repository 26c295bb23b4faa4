//! The running webhook: the TLS listener for `/validate` and `/mutate`, the
//! admin listener, hot reload of certificates and policy, and graceful
//! shutdown.

pub mod admin;
pub mod audit_metrics;
pub mod budget;
pub mod budget_metrics;
pub mod cert_metrics;
pub mod conn;
pub mod deadline;
pub mod health;
pub mod leader_metrics;
pub mod metric_series;
pub mod metrics;
pub mod plain_text;
pub mod recent_forces;
pub mod reload;
pub mod tls;
pub mod webhook;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::budget::{Budget, BudgetError};
pub use self::conn::{ConnectionOptions, serve_connections};
use self::health::Health;
use self::metrics::Metrics;
use self::tls::{TlsFiles, TlsState};
use crate::authz::{Authorizer, KubeClientError, RbacAuthorizer, StaticLists};
use crate::events::{self, EventQueue};
use crate::policy::{Policy, PolicyError};

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
    /// The body budget and the request limit.
    pub budget: Budget,
    /// The certificate chain served now (DER, leaf first).
    pub served_chain: ArcSwap<Vec<rustls_pki_types::CertificateDer<'static>>>,
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
        Self::with_metrics(policy, authorizer, Metrics::new())
    }

    /// State deciding who may force through `authorizer`, counting in
    /// `metrics`.
    pub fn with_metrics(policy: Policy, authorizer: Authorizer, metrics: Metrics) -> Self {
        metrics.policy_generation.set(1);
        let budget = Budget::default();
        metrics.budget.capacity.set(budget.bytes_i64());
        Self {
            policy: ArcSwap::from_pointee(policy),
            metrics: Arc::new(metrics),
            health: Health::default(),
            authorizer,
            events: EventQueue::off(),
            budget,
            served_chain: ArcSwap::from_pointee(Vec::new()),
        }
    }

    /// Puts `budget` in force (before serving).
    pub fn set_budget(&mut self, budget: Budget) {
        self.metrics.budget.capacity.set(budget.bytes_i64());
        self.budget = budget;
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
    /// How long a connection with no request in flight stays open.
    pub idle_timeout: Duration,
    /// How often a quiet HTTP/2 connection is pinged (and closed when the
    /// ping is not answered).
    pub keep_alive_interval: Duration,
    /// The most request body bytes in flight, across all requests.
    pub max_inflight_body_bytes: usize,
    /// The most requests in flight, across all connections and streams.
    pub max_inflight_requests: usize,
    /// The kubeconfig for RBAC checks, Events and the sweeper; without it,
    /// the in-cluster account or `KUBECONFIG`.
    pub kubeconfig: Option<PathBuf>,
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

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The policy is invalid or unreadable.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The certificate, key or client CA cannot be used.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The body budget or request limit cannot be used.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The policy asks RBAC but no API server can be reached.
    #[error("forceReapply.rbac is set but {0}")]
    Rbac(KubeClientError),
    /// `--manage-certs` but no API server can be reached.
    #[error("--manage-certs needs the API server, but {0}")]
    ManagedCertificate(KubeClientError),
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
pub struct Running {
    /// The webhook's bound address.
    pub addr: SocketAddr,
    /// The admin server's bound address, if it runs.
    pub admin_addr: Option<SocketAddr>,
    /// The state the server shares (policy, metrics, health).
    pub shared: Arc<Shared>,
    /// The API server client, when one could be built (for background work
    /// beside the server, such as the sweeper).
    pub client: Option<kube::Client>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("addr", &self.addr)
            .field("admin_addr", &self.admin_addr)
            .field("connected", &self.client.is_some())
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

    /// Waits until the server has stopped.
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}

/// Starts the admin server (not ready), loads the policy and certificates,
/// binds the webhook listener, then turns ready. Start-up problems are
/// errors; later reload problems are logged and counted.
pub async fn start(options: ServeOptions) -> Result<Running, StartError> {
    start_with_metrics(options, Metrics::new()).await
}

/// [`start`], counting in `metrics` (the binary's hold the log sink's
/// dropped-lines counter).
pub async fn start_with_metrics(
    options: ServeOptions,
    metrics: Metrics,
) -> Result<Running, StartError> {
    let budget = Budget::new(
        options.max_inflight_body_bytes,
        options.max_inflight_requests,
    )?;
    let policy = Policy::from_file_or_built_in(options.policy_file.as_deref())?;
    // RBAC needs an API server when the policy asks for it; otherwise one is
    // used if found, so a reloaded policy can turn RBAC on.
    let (client, authorizer) = match crate::authz::kube_client(options.kubeconfig.as_deref()).await
    {
        Ok(client) => (
            Some(client.clone()),
            Authorizer::Rbac(RbacAuthorizer::new(client)),
        ),
        Err(why) if policy.force_reapply.rbac.is_some() => return Err(StartError::Rbac(why)),
        Err(why) if options.managed_certificate => {
            return Err(StartError::ManagedCertificate(why));
        }
        Err(why) => {
            tracing::info!(%why, "no API server: RBAC checks, Events and the stale-force sweeper are off");
            (
                None,
                Authorizer::StaticLists(StaticLists::new(why.to_string())),
            )
        }
    };
    let mut shared = Shared::with_metrics(policy, authorizer, metrics);
    shared.set_budget(budget);
    if let Some(client) = &client {
        shared.events = EventQueue::start(
            events::KubeEvents::new(client.clone()),
            shared.metrics.events.clone(),
        )
        .skipping(&options.unguarded_namespaces);
        tracing::info!("Events on PipelineRollouts are on");
    }
    let shared = Arc::new(shared);
    if let Some(client) = client.clone() {
        // Opens the client's connection now, so the first SubjectAccessReview
        // does not pay for it (46.5 ms in one end-to-end run, where the
        // first call opened it), and says what we reach.
        tokio::spawn(async move {
            match client.apiserver_version().await {
                Ok(v) => tracing::info!(version = %v.git_version, "API server reachable"),
                Err(e) => {
                    tracing::warn!(error = %e, "API server not reachable yet; RBAC checks and Events will retry")
                }
            }
        });
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

    let loaded = match tls::load(&options.tls) {
        Ok(loaded) => loaded,
        Err(why) if options.managed_certificate => {
            tracing::warn!(%why, "no certificate yet: serving a throwaway one, not ready, until the files appear");
            tls::placeholder(&options.tls)?
        }
        Err(why) => return Err(why.into()),
    };
    if let Some(ts) = loaded.not_after {
        shared.metrics.certificate_expiry.set(ts);
    }
    shared.served_chain.store(Arc::new(loaded.chain.clone()));
    let tls_state = Arc::new(TlsState::new(loaded.config));
    let listener = bind(options.listen).await?;
    let addr = listener.local_addr().unwrap_or(options.listen);

    spawn_reloaders(&options, &shared, &tls_state, &finished_rx);
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
            let connections = ConnectionOptions {
                max_connections: options.max_connections,
                idle_timeout: options.idle_timeout,
                keep_alive_interval: options.keep_alive_interval,
            };
            serve_connections(listener, tls_state, app, connections, grace, accept_until).await;
            let _ = finished.send(true);
        }
    });
    Ok(Running {
        addr,
        admin_addr,
        shared,
        client,
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
                shared_tls.served_chain.store(Arc::new(loaded.chain));
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
