//! The composition root of `serve`: everything the process is made of is
//! built here, once, and handed to those who use it. The kube client (one,
//! from one read of the kubeconfig), the authorizer, the Event queue and
//! the shared state with the policy as a `watch` channel ([`App::build`]);
//! the background controllers, each saying whether it needs the Lease
//! ([`App::controllers`]); then the server listens on what was built and
//! the controllers run beside it until shutdown ([`App::run`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::apiserver::{self, KubeClientError};
use crate::authz::{Authorizer, RbacAuthorizer, StaticLists};
use crate::background::audit::{AuditContext, AuditOptions};
use crate::background::certs::args::CertArgsError;
use crate::background::certs::readiness::{self, ServedCertificate};
use crate::background::certs::{CertOptions, controller as cert_controller};
use crate::background::leader::{self, LeaseOptions, LeaseOptionsError, Worker};
use crate::background::rollout_watch;
use crate::background::sweeper::SweeperContext;
use crate::events::{EventQueue, KubeEvents};
use crate::logtext::Escaped;
use crate::metrics::Metrics;
use crate::policy::{Policy, PolicyError};
use crate::server::budget::BudgetError;
use crate::server::{self, ListenError, Running, ServeOptions, ServerState};

/// Why `serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The policy is invalid or unreadable.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The body budget or request limit cannot be used.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The policy asks RBAC but no API server can be reached.
    #[error("forceReapply.rbac is set but {0}")]
    Rbac(KubeClientError),
    /// `--manage-certs` but no API server can be reached.
    #[error("--manage-certs needs the API server, but {0}")]
    ManagedCertificate(KubeClientError),
    /// The server could not listen.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The leader election's flags cannot work.
    #[error(transparent)]
    Lease(#[from] LeaseOptionsError),
    /// The `--manage-certs` flags cannot be used.
    #[error(transparent)]
    CertArgs(#[from] CertArgsError),
}

/// The background work `serve` is asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct BackgroundOptions {
    /// The Lease to elect a leader with; `None`: every replica runs the
    /// controllers.
    pub(crate) lease: Option<LeaseOptions>,
    /// The certificates `--manage-certs` keeps; `None`: not managed.
    pub(crate) certificates: Option<CertOptions>,
    /// Whether this process runs the certificate controller (else only
    /// the readiness check), when the certificates are managed.
    pub(crate) cert_controller: bool,
    /// The audit of stored rollouts; `None`: off.
    pub(crate) audit: Option<AuditOptions>,
    /// The stale-force sweeper's grace; `None`: no sweeper.
    pub(crate) stale_force_grace: Option<Duration>,
}

/// The API server, as read once from the kubeconfig or the in-cluster
/// account.
#[derive(Clone)]
struct ApiServer {
    /// Its configuration (the Lease client is built from it with timeouts
    /// of its own).
    config: kube::Config,
    /// The client everyone else shares.
    client: kube::Client,
}

/// What `serve` is made of, built and not yet running.
pub(crate) struct App {
    /// The state every request and every controller shares.
    shared: Arc<ServerState>,
    api: Option<ApiServer>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("connected", &self.api.is_some())
            .finish_non_exhaustive()
    }
}

/// Reads the kubeconfig once and builds the one client from it.
async fn connect(options: &ServeOptions) -> Result<ApiServer, KubeClientError> {
    let config = apiserver::config(options.api.kubeconfig.as_deref()).await?;
    let client = kube::Client::try_from(config.clone()).map_err(KubeClientError::Build)?;
    Ok(ApiServer { config, client })
}

impl App {
    /// Loads the policy, reaches the API server when one can be found, and
    /// builds the shared state counting in `metrics` (the binary's hold the
    /// log sink's dropped-lines counter).
    pub(crate) async fn build(
        options: &ServeOptions,
        metrics: Metrics,
    ) -> Result<Self, StartError> {
        let budget = options.server.budget.budget()?;
        let policy = Policy::from_file_or_built_in(options.server.policy.as_deref())?;
        // A Numaplane or Numaflow under another account has every write of
        // its own keys refused (rules 15 and 19): say which accounts are
        // trusted, where the operator looks first.
        tracing::warn!(
            numaplane = %Escaped(&policy.numaplane.controller_account),
            numaflow = %Escaped(&policy.numaflow.controller_account),
            "trusted controller accounts: a write of Numaplane's bookkeeping keys by any other service account (rule 15), or of a Pipeline's pause-timestamp by anyone but numaflow (rule 19), is refused (rule 15's refusals of service accounts count in pipelinerollout_webhook_bookkeeping_refusals_total); if Numaplane or Numaflow runs as another account, set numaplane.controllerAccount or numaflow.controllerAccount in the policy"
        );
        // RBAC needs an API server when the policy asks for it; otherwise
        // one is used if found, so a reloaded policy can turn RBAC on.
        let (api, authorizer) = match connect(options).await {
            Ok(api) => {
                let authorizer = Authorizer::Rbac(RbacAuthorizer::new(api.client.clone()));
                (Some(api), authorizer)
            }
            Err(why) if policy.force_reapply.rbac.is_some() => return Err(StartError::Rbac(why)),
            Err(why) if options.managed_certificate => {
                return Err(StartError::ManagedCertificate(why));
            }
            Err(why) => {
                tracing::info!(%why, "no API server: RBAC checks, Events and the background controllers are off");
                (
                    None,
                    Authorizer::StaticLists(StaticLists::new(why.to_string())),
                )
            }
        };
        let mut shared = ServerState::with_metrics(policy, authorizer, metrics);
        shared.set_budget(budget);
        if let Some(api) = &api {
            shared.events = EventQueue::start(
                KubeEvents::new(api.client.clone()),
                shared.metrics.events.clone(),
            )
            .skipping(&options.unguarded_namespaces);
            tracing::info!("Events on PipelineRollouts are on");
            // Every replica judges writes that leave a namespace to
            // Numaplane's default, so every replica follows it.
            tokio::spawn(crate::background::numaplane_default::run(
                api.client.clone(),
                shared.policy_updates(),
                Arc::clone(&shared.cluster_default),
            ));
            // Every replica judges what Numaflow makes for a child (rule
            // 29) and the controller versions named (rule 27), so every
            // replica follows the children and the definitions.
            shared.cluster = Some(Arc::new(crate::background::watched::Watched::start(
                &api.client,
            )));
            // Opens the client's connection now, so the first
            // SubjectAccessReview does not pay for it (46.5 ms in one
            // end-to-end run, where the first call opened it), and says
            // what we reach.
            let client = api.client.clone();
            tokio::spawn(async move {
                match client.apiserver_version().await {
                    Ok(v) => tracing::info!(version = %v.git_version, "API server reachable"),
                    Err(e) => {
                        tracing::warn!(error = %e, "API server not reachable yet; RBAC checks and Events will retry")
                    }
                }
            });
        }
        Ok(Self {
            shared: Arc::new(shared),
            api,
        })
    }

    /// The background controllers `background` asks for, on the API
    /// server this app reaches (none without one).
    fn controllers(&self, background: &BackgroundOptions) -> Vec<Worker> {
        let mut controllers = Vec::new();
        let client = self.api.as_ref().map(|api| api.client.clone());
        if let (Some(options), Some(client)) = (&background.certificates, &client) {
            // Every replica checks that the caBundle trusts what it serves
            // (for /readyz); the leader issues and rotates.
            let (served, options, client) = (
                Arc::new(Served(Arc::clone(&self.shared))),
                options.clone(),
                client.clone(),
            );
            controllers.push(Worker::in_every_replica(
                "certificate readiness",
                move |stop| {
                    readiness::run(client.clone(), Arc::clone(&served), options.clone(), stop)
                },
            ));
        }
        if let (Some(options), Some(client), true) = (
            &background.certificates,
            &client,
            background.cert_controller,
        ) {
            let (metrics, options, client) = (
                self.shared.metrics.certificates.clone(),
                options.clone(),
                client.clone(),
            );
            controllers.push(Worker::new("certificate controller", move |stop| {
                cert_controller::run(client.clone(), metrics.clone(), options.clone(), stop)
            }));
        }
        let audit = match (&client, &background.audit) {
            (Some(_), Some(options)) => Some((
                AuditContext {
                    policy: self.shared.policy_updates(),
                    metrics: self.shared.metrics.audit.clone(),
                },
                options.clone(),
            )),
            (None, Some(_)) => {
                tracing::info!("no API server: the audit of stored rollouts is off");
                None
            }
            (_, None) => {
                tracing::info!("--audit=false: stored rollouts are not audited");
                None
            }
        };
        let sweeper = match (&client, background.stale_force_grace) {
            (Some(_), Some(grace)) => Some((
                SweeperContext {
                    policy: self.shared.policy_updates(),
                    events: self.shared.events.clone(),
                    metrics: self.shared.metrics.sweeper.clone(),
                },
                grace,
            )),
            (None, Some(_)) => {
                tracing::warn!(
                    "--reset-stale-force is set but no API server can be reached: the sweeper is off"
                );
                None
            }
            (_, None) => None,
        };
        // The audit and the sweeper share one reader of PipelineRollouts,
        // so they run as one controller.
        let name = match (&audit, &sweeper) {
            (Some(_), Some(_)) => "audit and stale-force sweeper",
            (Some(_), None) => "audit",
            _ => "stale-force sweeper",
        };
        if let (Some(client), true) = (&client, audit.is_some() || sweeper.is_some()) {
            let client = client.clone();
            controllers.push(Worker::new(name, move |stop| {
                rollout_watch::run(client.clone(), audit.clone(), sweeper.clone(), stop)
            }));
        }
        controllers
    }

    /// Listens with `options`, runs the controllers `background` asks for
    /// beside the server until `shutdown` completes, then stops: the
    /// leader hands over at once, while the server drains.
    pub(crate) async fn run(
        self,
        options: ServeOptions,
        background: BackgroundOptions,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), StartError> {
        let (elected, everywhere): (Vec<_>, Vec<_>) = self
            .controllers(&background)
            .into_iter()
            .partition(Worker::needs_lease);
        let policy = options
            .server
            .policy
            .as_ref()
            .map_or_else(|| "built-in".to_owned(), |p| p.display().to_string());
        let mtls = options.server.tls.client_ca.is_some();
        let running = server::listen(options, Arc::clone(&self.shared)).await?;
        tracing::info!(
            listen = %running.addr,
            admin = ?running.admin_addr,
            %policy,
            mode = %self.shared.policy().mode,
            mtls,
            "serving /validate and /mutate over HTTPS"
        );
        let in_every_replica = leader::controllers::start(&everywhere);
        let stop_background = CancellationToken::new();
        let background = tokio::spawn(run_background(
            elected,
            background.lease,
            self.api.clone(),
            self.shared.metrics.leader.clone(),
            stop_background.clone(),
        ));
        shutdown.await;
        in_every_replica.stop().await;
        running.shutdown();
        stop_background.cancel();
        let (_, _) = tokio::join!(running.wait(), background);
        tracing::info!("stopped");
        Ok(())
    }
}

/// Builds the app with its own metrics and starts the server alone, with
/// no background controllers (for tests and embedders).
pub async fn start(options: ServeOptions) -> Result<Running, StartError> {
    let app = App::build(&options, Metrics::new()).await?;
    Ok(server::listen(options, app.shared).await?)
}

/// Runs `controllers` until `stop`: under the Lease with `lease`, else at
/// once.
async fn run_background(
    controllers: Vec<Worker>,
    lease: Option<LeaseOptions>,
    api: Option<ApiServer>,
    metrics: crate::metrics::leader::LeaderMetrics,
    stop: CancellationToken,
) {
    let Some(lease) = lease else {
        return leader::run_unelected(controllers, metrics, stop).await;
    };
    let Some(api) = api else {
        tracing::warn!(
            "--leader-elect is set but no API server can be reached: no election, and no background controllers"
        );
        return;
    };
    leader::run_elected(api.config, api.client, lease, controllers, metrics, stop).await;
}

/// The shared state as the certificate readiness check sees it: the chain
/// served, and readiness with its gauge.
struct Served(Arc<ServerState>);

impl ServedCertificate for Served {
    fn served_chain(&self) -> Vec<Vec<u8>> {
        self.0
            .served_chain
            .load()
            .iter()
            .map(|c| c.as_ref().to_vec())
            .collect()
    }

    fn set_trusted(&self, trusted: bool) {
        self.0.health.set_trusted(trusted);
        self.0.metrics.certificates.set_trusted(trusted);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::certs::ServiceRef;

    fn cert_options() -> CertOptions {
        CertOptions {
            secret: "tls".to_owned(),
            ca_secret: "ca".to_owned(),
            secret_namespace: "ns".to_owned(),
            service: ServiceRef {
                name: "hook".to_owned(),
                namespace: "ns".to_owned(),
            },
            validating: "v".to_owned(),
            mutating: "m".to_owned(),
            ca_validity: Duration::from_secs(3600),
            cert_validity: Duration::from_secs(600),
            propagation: Duration::from_secs(1),
        }
    }

    fn everything() -> BackgroundOptions {
        BackgroundOptions {
            lease: None,
            certificates: Some(cert_options()),
            cert_controller: true,
            audit: Some(AuditOptions::default()),
            stale_force_grace: Some(Duration::from_secs(5)),
        }
    }

    fn names(controllers: &[Worker]) -> Vec<(&'static str, bool)> {
        controllers
            .iter()
            .map(|c| (c.name(), c.needs_lease()))
            .collect()
    }

    #[tokio::test]
    async fn each_controller_says_whether_it_needs_the_lease() {
        // A client is built without calling anyone.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config.clone()).expect("client");
        let app = App {
            shared: Arc::new(ServerState::new(Policy::built_in())),
            api: Some(ApiServer { config, client }),
        };
        assert_eq!(
            names(&app.controllers(&everything())),
            [
                ("certificate readiness", false),
                ("certificate controller", true),
                ("audit and stale-force sweeper", true),
            ]
        );
        let readiness_only = BackgroundOptions {
            cert_controller: false,
            audit: None,
            stale_force_grace: None,
            ..everything()
        };
        assert_eq!(
            names(&app.controllers(&readiness_only)),
            [("certificate readiness", false)]
        );
    }

    #[test]
    fn without_an_api_server_there_is_no_controller() {
        let app = App {
            shared: Arc::new(ServerState::new(Policy::built_in())),
            api: None,
        };
        assert!(app.controllers(&everything()).is_empty());
    }
}
