//! `serve`: the webhook server, and the sweeper beside it when asked for.

use std::process::ExitCode;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;

use super::args::ServeArgs;
use super::logging::LoggingGuard;
use crate::background::audit::{self, AuditEvent, AuditHost, AuditOptions};
use crate::background::sweeper::{self, SweepOutcome, SweeperHost};
use crate::certs::CertError;
use crate::events::EventQueue;
use crate::policy::Policy;
use crate::server::metrics::{Metrics, ResetLabels, ResultLabels, ViolationLabels};
use crate::server::{self, ServeOptions, Shared, StartError};

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
}

async fn serve(args: ServeArgs, log_lines_dropped: Counter) -> Result<(), ServeError> {
    let options = ServeOptions::try_from(&args)?;
    let metrics = Metrics::with_log_lines_dropped(log_lines_dropped);
    let running = server::start_with_metrics(options, metrics).await?;
    if args.reset_stale_force {
        match &running.client {
            Some(client) => sweeper::spawn(
                client.clone(),
                std::sync::Arc::clone(&running.shared),
                args.stale_force_grace,
            ),
            None => tracing::warn!(
                "--reset-stale-force is set but no API server can be reached: the sweeper is off"
            ),
        }
    }
    // The audit of stored rollouts (a background controller: moves into the
    // leader's set of controllers).
    let audit_stop = tokio_util::sync::CancellationToken::new();
    let audit_task = start_audit(&args, &running, &audit_stop);
    tracing::info!(
        listen = %running.addr,
        admin = ?running.admin_addr,
        policy = %args.policy.as_ref().map_or_else(|| "built-in".to_owned(), |p| p.display().to_string()),
        mode = %running.shared.policy.load().mode,
        mtls = args.client_ca.is_some(),
        "serving /validate and /mutate over HTTPS"
    );
    shutdown_signal().await;
    audit_stop.cancel();
    if let Some(task) = audit_task {
        let _ = task.await;
    }
    running.shutdown();
    running.wait().await;
    tracing::info!("stopped");
    Ok(())
}

/// Starts the audit when asked for and an API server can be reached.
fn start_audit(
    args: &ServeArgs,
    running: &server::Running,
    stop: &tokio_util::sync::CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if !args.audit {
        tracing::info!("--audit=false: stored rollouts are not audited");
        return None;
    }
    let Some(client) = &running.client else {
        tracing::info!("no API server: the audit of stored rollouts is off");
        return None;
    };
    let options = AuditOptions {
        interval: args.audit_interval,
        qps: args.audit_qps,
        burst: args.audit_burst,
        ..AuditOptions::default()
    };
    Some(tokio::spawn(audit::run(
        client.clone(),
        Arc::clone(&running.shared),
        options,
        stop.clone(),
    )))
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
                            namespace: namespace.clone(),
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
