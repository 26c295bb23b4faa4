//! `serve`: the webhook server, and beside it the background controllers
//! (the sweeper and the certificate controller when asked for), run by the elected leader or, with
//! election off, by every replica.

use std::process::ExitCode;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;

use super::args::{CertArgsError, ServeArgs};
use super::logging::LoggingGuard;
use crate::background::audit::{self, AuditEvent, AuditHost, AuditOptions};
use crate::background::certs::{self as managed_certs, CertEvent, CertHost, CertOptions};
use crate::background::leader::{self, Controller, LeaderHost, LeaseOptionsError, Transition};
use crate::background::sweeper::{self, SweepOutcome, SweeperHost};
use crate::events::EventQueue;
use crate::pki::CertError;
use crate::policy::Policy;
use crate::server::metrics::{
    Metrics, ResetLabels, ResultLabels, TransitionLabels, ViolationLabels,
};
use crate::server::{self, Running, ServeOptions, Shared, StartError};

/// The runtime `serve` runs on: multi-threaded, one worker per core
/// (`TOKIO_WORKER_THREADS` overrides). The benchmark's reference servers
/// run on it too, so that only the handlers differ.
pub fn serving_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Runs `serve` until SIGTERM or SIGINT.
pub fn run(args: ServeArgs, logging: &LoggingGuard) -> ExitCode {
    let runtime = match serving_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args, logging.dropped_lines())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why `serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The development certificates could not be made or read.
    #[error(transparent)]
    DevCerts(#[from] CertError),
    /// The server could not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The leader election's flags cannot work.
    #[error(transparent)]
    Leader(#[from] LeaseOptionsError),
    /// The `--manage-certs` flags cannot be used.
    #[error(transparent)]
    CertArgs(#[from] CertArgsError),
    /// `--manage-certs` without an API server.
    #[error(
        "--manage-certs needs the API server (a kubeconfig or the in-cluster service account), and none can be reached"
    )]
    CertsWithoutApiServer,
}

async fn serve(args: ServeArgs, log_lines_dropped: Counter) -> Result<(), ServeError> {
    let lease = args.lease_options()?;
    let options = ServeOptions::try_from(&args)?;
    let cert_options = if args.certs.manage_certs {
        Some(args.certs.options(std::env::var("POD_NAMESPACE").ok())?)
    } else {
        None
    };
    let metrics = Metrics::with_log_lines_dropped(log_lines_dropped);
    let running = server::start_with_metrics(options, metrics).await?;
    // Certificates managed by the webhook (--manage-certs): every replica
    // checks that the caBundle trusts what it serves (for /readyz); the
    // controller that issues and rotates them is one of the background
    // controllers below.
    let certs_stop = CancellationToken::new();
    if let Some(cert_options) = &cert_options {
        let Some(client) = running.client.clone() else {
            running.shutdown();
            return Err(ServeError::CertsWithoutApiServer);
        };
        tokio::spawn(managed_certs::readiness::run(
            client,
            Arc::clone(&running.shared),
            cert_options.clone(),
            certs_stop.clone(),
        ));
    }
    let stop_background = CancellationToken::new();
    let background = tokio::spawn(run_background(
        controllers(&args, cert_options, &running),
        lease,
        args.kubeconfig.clone(),
        running.client.is_some(),
        Arc::clone(&running.shared),
        stop_background.clone(),
    ));
    tracing::info!(
        listen = %running.addr,
        admin = ?running.admin_addr,
        policy = %args.policy.as_ref().map_or_else(|| "built-in".to_owned(), |p| p.display().to_string()),
        mode = %running.shared.policy.load().mode,
        mtls = args.client_ca.is_some(),
        "serving /validate and /mutate over HTTPS"
    );
    shutdown_signal().await;
    certs_stop.cancel();
    running.shutdown();
    // The leader hands over at once, while the server drains.
    stop_background.cancel();
    let (_, _) = tokio::join!(running.wait(), background);
    tracing::info!("stopped");
    Ok(())
}

/// The background controllers `args` ask for, given the server's API
/// client (none without an API server).
fn controllers(
    args: &ServeArgs,
    cert_options: Option<CertOptions>,
    running: &Running,
) -> Vec<Controller> {
    let mut controllers = Vec::new();
    let client = running.client.clone();
    if let (Some(options), Some(client), true) =
        (cert_options, client.clone(), args.certs.cert_controller)
    {
        let shared = Arc::clone(&running.shared);
        controllers.push(Controller::new("certificate controller", move |stop| {
            managed_certs::controller::run(
                client.clone(),
                Arc::clone(&shared),
                options.clone(),
                stop,
            )
        }));
    }
    match (&client, args.audit) {
        (Some(client), true) => {
            let shared = Arc::clone(&running.shared);
            let client = client.clone();
            let options = AuditOptions {
                interval: args.audit_interval,
                qps: args.audit_qps,
                burst: args.audit_burst,
                ..AuditOptions::default()
            };
            controllers.push(Controller::new("audit", move |stop| {
                audit::run(client.clone(), Arc::clone(&shared), options.clone(), stop)
            }));
        }
        (None, true) => tracing::info!("no API server: the audit of stored rollouts is off"),
        (_, false) => tracing::info!("--audit=false: stored rollouts are not audited"),
    }
    if args.reset_stale_force {
        match client {
            Some(client) => {
                let (shared, grace) = (Arc::clone(&running.shared), args.stale_force_grace);
                controllers.push(Controller::new("stale-force sweeper", move |stop| {
                    sweeper::run(client.clone(), Arc::clone(&shared), grace, stop)
                }));
            }
            None => tracing::warn!(
                "--reset-stale-force is set but no API server can be reached: the sweeper is off"
            ),
        }
    }
    controllers
}

/// Runs `controllers` until `stop`: under the Lease with `lease`, else at
/// once.
async fn run_background(
    controllers: Vec<Controller>,
    lease: Option<leader::LeaseOptions>,
    kubeconfig: Option<std::path::PathBuf>,
    connected: bool,
    host: Arc<Shared>,
    stop: CancellationToken,
) {
    let Some(lease) = lease else {
        return leader::run_unelected(controllers, host, stop).await;
    };
    if !connected {
        tracing::warn!(
            "--leader-elect is set but no API server can be reached: no election, and no background controllers"
        );
        return;
    }
    match crate::authz::kube_config(kubeconfig.as_deref()).await {
        Ok(config) => leader::run_elected(config, lease, controllers, host, stop).await,
        Err(e) => {
            tracing::error!(error = %e, "leader election cannot reach the API server: the background controllers are off")
        }
    }
}

/// The server's shared state is the audit's host: its policy handle and
/// its metrics.
impl AuditHost for Shared {
    fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    fn record(&self, event: AuditEvent<'_>) {
        let metrics = &self.metrics.audit;
        match event {
            AuditEvent::Completed { at, took, objects } => {
                let seconds = at
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                metrics.last_audit.set(seconds);
                metrics.last_audit_duration.set(took.as_secs_f64());
                metrics
                    .audited_objects
                    .set(i64::try_from(objects).unwrap_or(i64::MAX));
            }
            AuditEvent::Violations(counts) => {
                metrics.set_violations(counts.iter().map(|((namespace, rule, result), n)| {
                    (
                        ViolationLabels {
                            rollout_namespace: namespace.clone(),
                            rule: (*rule).to_owned(),
                            result: (*result).to_owned(),
                        },
                        *n,
                    )
                }));
            }
            AuditEvent::ReportWrite(outcome) => {
                metrics
                    .report_writes
                    .get_or_create(&ResultLabels {
                        result: outcome.as_str(),
                    })
                    .inc();
            }
            AuditEvent::WatchRestart => {
                metrics.watch_restarts.inc();
            }
        }
    }
}

/// The server's shared state is the election's host: its metrics.
impl LeaderHost for Shared {
    fn leading(&self, leading: bool) {
        self.metrics.leader.leader.set(i64::from(leading));
    }

    fn transition(&self, transition: Transition) {
        self.metrics
            .leader
            .transitions
            .get_or_create(&TransitionLabels {
                transition: transition.as_str(),
            })
            .inc();
    }

    fn lease_error(&self) {
        self.metrics.leader.lease_errors.inc();
    }
}

/// The server's shared state is the sweeper's host: its policy handle,
/// its Event queue and its metrics.
impl SweeperHost for Shared {
    fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    fn events(&self) -> &EventQueue {
        &self.events
    }

    fn count(&self, outcome: SweepOutcome) {
        let metrics = &self.metrics;
        match outcome {
            SweepOutcome::Reset => metrics
                .force_resets
                .get_or_create(&ResetLabels { by: "sweeper" })
                .inc(),
            SweepOutcome::Conflict => metrics.sweeper_conflicts.inc(),
            SweepOutcome::Error => metrics.sweeper_errors.inc(),
            SweepOutcome::WatchRestart => metrics.sweeper_watch_restarts.inc(),
        };
    }
}

/// The server's shared state is the certificate work's host: its metrics,
/// the chain it serves and its readiness.
impl CertHost for Shared {
    fn record(&self, event: CertEvent) {
        use crate::server::metrics::{
            ConfigurationLabels, IssueLabels, OperationLabels, StepLabels,
        };
        let certs = &self.metrics.certs;
        match event {
            CertEvent::Issued { kind, reason } => {
                certs
                    .issued
                    .get_or_create(&IssueLabels { kind, reason })
                    .inc();
            }
            CertEvent::Rotation(step) => {
                certs.ca_rotations.get_or_create(&StepLabels { step }).inc();
            }
            CertEvent::BundleUpdated(configuration) => {
                certs
                    .bundle_updates
                    .get_or_create(&ConfigurationLabels { configuration })
                    .inc();
            }
            CertEvent::Error(operation) => {
                certs
                    .errors
                    .get_or_create(&OperationLabels { operation })
                    .inc();
            }
        };
    }

    fn served_chain(&self) -> Vec<Vec<u8>> {
        self.served_chain
            .load()
            .iter()
            .map(|c| c.as_ref().to_vec())
            .collect()
    }

    fn set_trusted(&self, trusted: bool) {
        self.health.set_trusted(trusted);
        self.metrics.certs.trusted.set(i64::from(trusted));
    }
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
