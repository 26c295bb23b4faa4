//! The server's flags: where it listens, the policy and certificate files
//! it serves and reloads, how it shuts down, and its connection and body
//! limits. The server runs with them as they are parsed
//! ([`crate::server::listen`]); only the certificate files are resolved,
//! to the development ones when none are given ([`TlsArgs::files`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::budget::{Budget, BudgetError};
use super::conn::ConnectionOptions;
use super::tls::TlsFiles;
use crate::pki::{self, CertError};

/// The HTTPS server's flags of `serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Address to serve the webhook on (HTTPS).
    #[arg(long, env = "WEBHOOK_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the admin server (plain HTTP: /healthz, /readyz, /metrics).
    // Always given on the command line (it has a default); `None`, for
    // tests and embedders, runs no admin server.
    #[arg(long, env = "WEBHOOK_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: Option<SocketAddr>,
    /// Policy file (YAML or JSON), reloaded when it changes; without it, the built-in policy.
    #[arg(long, env = "WEBHOOK_POLICY")]
    pub policy: Option<PathBuf>,
    /// The certificate files served.
    #[command(flatten)]
    pub tls: TlsArgs,
    /// How often certificate and policy files are checked for changes (besides file-system events).
    #[arg(long, env = "WEBHOOK_RELOAD_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub reload_interval: Duration,
    /// After SIGTERM/SIGINT, keep serving (not ready) this long so endpoints can be updated.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_DELAY", default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,
    /// Then give in-flight requests at most this long to finish.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_GRACE", default_value = "15s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,
    /// How connections are served.
    #[command(flatten)]
    pub connections: ConnectionOptions,
    /// The body budget and the request limit.
    #[command(flatten)]
    pub budget: BudgetArgs,
}

/// The serving certificate's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct TlsArgs {
    /// Serving certificate (PEM chain), reloaded when it changes; with --tls-key.
    #[arg(long, env = "WEBHOOK_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Serving certificate's private key (PEM); with --tls-cert.
    #[arg(long, env = "WEBHOOK_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM), e.g. the API server's; reloaded when it changes.
    #[arg(long, env = "WEBHOOK_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// Where development certificates live when --tls-cert is not given (generated if absent).
    #[arg(long, env = "WEBHOOK_DEV_CERTS_DIR", default_value = pki::DEV_CERTS_DIR)]
    pub dev_certs_dir: PathBuf,
}

impl TlsArgs {
    /// The files to serve: --tls-cert and --tls-key, else the development
    /// certificates in --dev-certs-dir (generated if absent, which is why
    /// this can fail), with a hint for trying them on `port`.
    pub(crate) fn files(&self, port: u16) -> Result<TlsFiles, CertError> {
        let (cert, key) = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => (cert.clone(), key.clone()),
            _ => {
                let (paths, generated) = pki::ensure_dev_certs(&self.dev_certs_dir)?;
                tracing::warn!(
                    ca = %paths.ca.display(),
                    generated,
                    "no --tls-cert/--tls-key: serving development certificates for localhost; try:\n  curl --cacert {} -H 'Content-Type: application/json' --data @tests/fixtures/admission/01-create-kubectl-apply-validate.json https://localhost:{}/validate",
                    paths.ca.display(),
                    port
                );
                (paths.cert, paths.key)
            }
        };
        Ok(TlsFiles {
            cert,
            key,
            client_ca: self.client_ca.clone(),
        })
    }
}

/// The body budget's and the request limit's flags.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct BudgetArgs {
    /// The most request body bytes held at once, across all requests (e.g. 32Mi); a body that does not fit waits, within its deadline, then gets 503.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_BODY_BYTES", default_value = "32Mi", value_parser = super::size::parse_size)]
    pub max_inflight_body_bytes: usize,
    /// The most requests in flight at once, across all connections and HTTP/2 streams; more get 503 at once.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_REQUESTS", default_value_t = super::budget::DEFAULT_MAX_INFLIGHT_REQUESTS)]
    pub max_inflight_requests: usize,
}

impl BudgetArgs {
    /// The budget these limits make, checked.
    pub(crate) fn budget(&self) -> Result<Budget, BudgetError> {
        Budget::new(self.max_inflight_body_bytes, self.max_inflight_requests)
    }
}
