//! `serve`: the command line into [`crate::app`], which builds the
//! process (the kube client, the shared state, the controllers: the
//! sweeper, the audit and the certificate work, run by the elected leader
//! or, with election off, by every replica) and runs it until SIGTERM or
//! SIGINT.

use std::process::ExitCode;

use prometheus_client::metrics::counter::Counter;

use super::args::ServeArgs;
use super::logging::LoggingGuard;
use crate::app::{App, BackgroundOptions, StartError};
use crate::metrics::Metrics;
use crate::server::ServeOptions;

/// The runtime `serve` runs on: multi-threaded, one worker per core
/// (`TOKIO_WORKER_THREADS` overrides). The benchmark's reference servers
/// run on it too, so that only the handlers differ.
pub fn serving_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

/// Runs `serve` until SIGTERM or SIGINT.
pub(crate) fn run(args: ServeArgs, logging: &LoggingGuard) -> ExitCode {
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

async fn serve(args: ServeArgs, log_lines_dropped: Counter) -> Result<(), StartError> {
    // The webhook's own namespace, which the Deployment sets.
    let own_namespace = std::env::var("POD_NAMESPACE").ok();
    // Each component's flags, checked by the component.
    let background = BackgroundOptions {
        certificates: args.certs.options(own_namespace.clone())?,
        lease: args.leader.options()?,
        cert_controller: args.certs.cert_controller,
        audit: args.audit.options(),
        stale_force_grace: args.sweeper.grace(),
    };
    let options = ServeOptions {
        unguarded_namespaces: args.events.unguarded(own_namespace),
        managed_certificate: args.certs.manage_certs,
        server: args.server,
        api: args.api,
    };
    let app = App::build(&options, Metrics::with_log_lines_dropped(log_lines_dropped)).await?;
    app.run(options, background, shutdown_signal()).await
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
