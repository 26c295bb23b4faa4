//! The command line's definitions: every command and flag, parsed by clap.
//! What each command does is in the file named after it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use super::DEV_CERTS_DIR;
use crate::admission::Webhook;
use crate::background::leader::{LeaseOptions, LeaseOptionsError};
use crate::pki::{self, CertError};
use crate::server::ServeOptions;
use crate::server::tls::TlsFiles;

/// What `--version` prints after the name: the crate's version and the git
/// commit the binary was built from (`unknown` when the build could not
/// tell; build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("PIPELINEROLLOUT_WEBHOOK_COMMIT"),
    ")"
);

/// Admission webhook for Numaplane PipelineRollouts: validates and defaults
/// drain timeouts, and gates the forced re-apply (allow-data-loss).
#[derive(Debug, Parser)]
#[command(
    name = "pipelinerollout-webhook",
    version = VERSION,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do; without a command, `serve`.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve`'s flags, accepted without the word `serve`.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Log level or filter (e.g. info, debug, pipelinerollout_webhook=debug); RUST_LOG also works.
    #[arg(long, global = true, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, global = true, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
// Parsed once at start-up: the size of `serve`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve /validate and /mutate over HTTPS (the default).
    Serve(ServeArgs),
    /// Answer one AdmissionReview (JSON or YAML) from a file or stdin, as the webhook would; exit 0 if allowed, 1 if denied, 2 on bad input.
    Review(ReviewArgs),
    /// Check PipelineRollout manifests (files, directories, - for stdin) as the webhook would judge their creation or update; exit 0 if nothing would be denied, 1 if something would, 2 on unreadable input.
    Check(CheckArgs),
    /// Check a policy file: print the effective policy and exit 0, or print the error and exit 2.
    CheckPolicy {
        /// The policy file (YAML or JSON).
        file: PathBuf,
    },
    /// Write a CA and a serving certificate for the in-cluster Service, plus the kustomize patch that puts the CA into the webhook configurations (for installing without cert-manager).
    GenCerts(GenCertsArgs),
    /// Print the validation rules of a policy as a ValidatingAdmissionPolicy and its binding (YAML), for in-process admission without the webhook (docs/vap.md).
    ExportVap(ExportVapArgs),
}

/// Flags of `gen-certs`.
#[derive(Debug, Clone, Args)]
pub struct GenCertsArgs {
    /// The webhook's Service name.
    #[arg(long, default_value = "pipelinerollout-webhook")]
    pub service: String,
    /// The webhook's namespace.
    #[arg(long, default_value = "pipelinerollout-webhook")]
    pub namespace: String,
    /// Where to write ca.crt, tls.crt, tls.key and ca-bundle.patch.yaml.
    #[arg(long, default_value = "manifests/overlays/self-signed/certs")]
    pub out: PathBuf,
    /// Validity of the serving certificate, in days (the CA: ten times as long).
    #[arg(long, default_value_t = 365)]
    pub days: i64,
    /// Replace certificates already in --out: renews the serving certificate under the existing CA (ca.crt and ca.key), so the webhook configurations' caBundle does not change.
    #[arg(long)]
    pub force: bool,
    /// With --force, also make a new CA (the caBundle changes: re-apply the webhook configurations).
    #[arg(long, requires = "force")]
    pub new_ca: bool,
}

/// Flags of `serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to serve the webhook on (HTTPS).
    #[arg(long, env = "WEBHOOK_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Address of the admin server (plain HTTP: /healthz, /readyz, /metrics).
    #[arg(long, env = "WEBHOOK_ADMIN_LISTEN", default_value = "0.0.0.0:8080")]
    pub admin_listen: SocketAddr,
    /// Policy file (YAML or JSON), reloaded when it changes; without it, the built-in policy.
    #[arg(long, env = "WEBHOOK_POLICY")]
    pub policy: Option<PathBuf>,
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
    #[arg(long, env = "WEBHOOK_DEV_CERTS_DIR", default_value = DEV_CERTS_DIR)]
    pub dev_certs_dir: PathBuf,
    /// How often certificate and policy files are checked for changes (besides file-system events).
    #[arg(long, env = "WEBHOOK_RELOAD_INTERVAL", default_value = "10s", value_parser = humantime::parse_duration)]
    pub reload_interval: Duration,
    /// After SIGTERM/SIGINT, keep serving (not ready) this long so endpoints can be updated.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_DELAY", default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,
    /// Then give in-flight requests at most this long to finish.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_GRACE", default_value = "15s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,
    /// The most connections served at once; further ones wait to be accepted.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Close a connection with no request in flight after this long (HTTP/1.1 ones close after 10s idle in any case).
    #[arg(long, env = "WEBHOOK_IDLE_TIMEOUT", default_value = "30s", value_parser = humantime::parse_duration)]
    pub idle_timeout: Duration,
    /// Ping an HTTP/2 connection that has sent nothing for this long; close it if the ping is not answered within the same time (at most 10s).
    #[arg(long, env = "WEBHOOK_KEEP_ALIVE_INTERVAL", default_value = "20s", value_parser = humantime::parse_duration)]
    pub keep_alive_interval: Duration,
    /// The most request body bytes held at once, across all requests (e.g. 32Mi); a body that does not fit waits, within its deadline, then gets 503.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_BODY_BYTES", default_value = "32Mi", value_parser = crate::cli::size::parse_size)]
    pub max_inflight_body_bytes: usize,
    /// The most requests in flight at once, across all connections and HTTP/2 streams; more get 503 at once.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_REQUESTS", default_value_t = crate::server::budget::DEFAULT_MAX_INFLIGHT_REQUESTS)]
    pub max_inflight_requests: usize,
    /// Kubeconfig for RBAC checks (forceReapply.rbac), Events, the sweeper and leader election; without it, the in-cluster service account or KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The namespaces the webhook configurations skip (comma-separated), besides the webhook's own (POD_NAMESPACE): a request about them cannot come from the API server, so it records no Event.
    #[arg(
        long,
        env = "WEBHOOK_UNGUARDED_NAMESPACES",
        value_delimiter = ',',
        default_value = "kube-system,pipelinerollout-webhook"
    )]
    pub unguarded_namespaces: Vec<String>,
    /// Watch PipelineRollouts and reset allow-data-loss to "false" once a forced re-apply's pause is over (needs get, list, watch and patch on pipelinerollouts).
    #[arg(long, env = "WEBHOOK_RESET_STALE_FORCE")]
    pub reset_stale_force: bool,
    /// How long the pause must have been over before the sweeper resets a force.
    #[arg(long, env = "WEBHOOK_STALE_FORCE_GRACE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub stale_force_grace: Duration,

    // Leader election (background::leader).
    /// Elect one replica, the holder of a Lease, to run the background work (the sweeper); every replica serves admission. Needs get, list, watch, patch and create on leases. Off (--leader-elect=false): every replica runs it.
    #[arg(
        long,
        env = "WEBHOOK_LEADER_ELECT",
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value_t = false
    )]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_LEASE_NAME", default_value = crate::background::leader::DEFAULT_LEASE_NAME)]
    pub leader_elect_lease_name: String,
    /// The Lease's namespace (the webhook's own, which the Deployment sets as POD_NAMESPACE); without it, the kubeconfig's or service account's namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub leader_elect_namespace: Option<String>,
    /// How long a renewal holds the Lease: another replica takes over this long after the leader's last renewal (whole seconds). A Lease that states a longer leaseDurationSeconds is trusted for this long only.
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// The leader stops the background work when no renewal has succeeded for this long (shorter than the lease duration).
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often the leader renews, and how long any Lease call may take before it is retried (whole seconds, shorter than the renew deadline).
    #[arg(long, env = "WEBHOOK_LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = humantime::parse_duration)]
    pub leader_elect_retry_period: Duration,

    // The audit of stored rollouts into PolicyReports.
    /// Audit every stored PipelineRollout, MonoVertexRollout and ISBServiceRollout into PolicyReports (one per namespace) when an API server can be reached; `--audit=false` turns it off (needs list and watch on pipelinerollouts, monovertexrollouts and isbservicerollouts, and get, list, create, patch and delete on policyreports).
    #[arg(long, env = "WEBHOOK_AUDIT", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub audit: bool,
    /// How often the audit judges every stored object again, changed or not (it also does at start, on every change and after each policy reload).
    #[arg(long, env = "WEBHOOK_AUDIT_INTERVAL", default_value = "1h", value_parser = parse_positive_duration)]
    pub audit_interval: Duration,
    /// The audit's API requests a second (report writes and deletions), after the burst; admission requests are never counted against it.
    #[arg(long, env = "WEBHOOK_AUDIT_QPS", default_value_t = 5.0, value_parser = parse_qps)]
    pub audit_qps: f64,
    /// The audit's API requests allowed at once before --audit-qps applies.
    #[arg(long, env = "WEBHOOK_AUDIT_BURST", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub audit_burst: u32,

    /// Certificates managed by the webhook itself.
    #[command(flatten)]
    pub certs: CertArgs,
}

/// Why a flag's value was refused (clap prints the message after the flag).
#[derive(Debug, thiserror::Error)]
pub enum FlagValueError {
    /// A duration of zero where one above zero is needed.
    #[error("must be above 0, e.g. 1h")]
    ZeroDuration,
    /// Not a duration at all.
    #[error("{0}: write a duration such as 30m or 1h")]
    NotADuration(#[from] humantime::DurationError),
    /// Not a request rate above zero.
    #[error("must be a number of requests a second above 0, e.g. 5 or 0.5")]
    NotARate,
}

/// A duration above zero.
fn parse_positive_duration(text: &str) -> Result<Duration, FlagValueError> {
    match humantime::parse_duration(text)? {
        d if d.is_zero() => Err(FlagValueError::ZeroDuration),
        d => Ok(d),
    }
}

/// A request rate: a number above 0.
fn parse_qps(text: &str) -> Result<f64, FlagValueError> {
    match text.parse::<f64>() {
        Ok(q) if q.is_finite() && q > 0.0 => Ok(q),
        _ => Err(FlagValueError::NotARate),
    }
}

impl ServeArgs {
    /// The Lease's settings with --leader-elect, checked; `None` without.
    pub fn lease_options(&self) -> Result<Option<LeaseOptions>, LeaseOptionsError> {
        if !self.leader_elect {
            return Ok(None);
        }
        LeaseOptions::new(
            self.leader_elect_namespace.clone(),
            &self.leader_elect_lease_name,
            crate::background::leader::own_identity(),
            self.leader_elect_lease_duration,
            self.leader_elect_renew_deadline,
            self.leader_elect_retry_period,
        )
        .map(Some)
    }
}

// ---- Certificates managed by the webhook (`serve --manage-certs`) ----

/// Flags of `serve` for `--manage-certs`.
#[derive(Debug, Clone, Args)]
pub struct CertArgs {
    /// Keep a CA and the serving certificate in the Secret --cert-secret and the CA in the caBundle of the webhooks that call --cert-service, rotating both; serve --tls-cert/--tls-key from that Secret's volume, and be ready only once the caBundle trusts the served certificate.
    #[arg(long, env = "WEBHOOK_MANAGE_CERTS", requires = "tls_cert")]
    pub manage_certs: bool,
    /// With --manage-certs: run the certificate controller in this process (false: only serve the Secret's certificate and report trust, for a replica that does not lead).
    #[arg(long, env = "WEBHOOK_CERT_CONTROLLER", default_value_t = true, action = clap::ArgAction::Set)]
    pub cert_controller: bool,
    /// The Secret the serving certificate, its key and its CA's certificate are kept in (what every replica mounts).
    #[arg(long, env = "WEBHOOK_CERT_SECRET", default_value = crate::background::certs::DEFAULT_SECRET)]
    pub cert_secret: String,
    /// The Secret the CAs and their keys are kept in; no pod mounts it, the leader reads and writes it through the API.
    #[arg(long, env = "WEBHOOK_CA_SECRET", default_value = crate::background::certs::DEFAULT_CA_SECRET)]
    pub ca_secret: String,
    /// The Secrets' namespace; without it, the webhook's own (POD_NAMESPACE), else pipelinerollout-webhook.
    #[arg(long, env = "WEBHOOK_CERT_SECRET_NAMESPACE")]
    pub cert_secret_namespace: Option<String>,
    /// The Service the serving certificate is for; only webhooks whose clientConfig.service names it get the caBundle.
    #[arg(
        long,
        env = "WEBHOOK_CERT_SERVICE",
        default_value = "pipelinerollout-webhook"
    )]
    pub cert_service: String,
    /// The Service's namespace; without it, the Secret's.
    #[arg(long, env = "WEBHOOK_CERT_SERVICE_NAMESPACE")]
    pub cert_service_namespace: Option<String>,
    /// The ValidatingWebhookConfiguration whose webhooks get the caBundle.
    #[arg(
        long,
        env = "WEBHOOK_VALIDATING_CONFIGURATION",
        default_value = "pipelinerollout-webhook"
    )]
    pub validating_configuration: String,
    /// The MutatingWebhookConfiguration whose webhooks get the caBundle.
    #[arg(
        long,
        env = "WEBHOOK_MUTATING_CONFIGURATION",
        default_value = "pipelinerollout-webhook"
    )]
    pub mutating_configuration: String,
    /// How long a CA is valid; it is rotated at two thirds of that.
    #[arg(long, env = "WEBHOOK_CA_VALIDITY", default_value = "5years", value_parser = humantime::parse_duration)]
    pub ca_validity: Duration,
    /// How long a serving certificate is valid; it is renewed at two thirds of that.
    #[arg(long, env = "WEBHOOK_CERT_VALIDITY", default_value = "4weeks", value_parser = humantime::parse_duration)]
    pub cert_validity: Duration,
    /// How long a Secret change takes to reach every replica (the kubelet's sync of the volume, about a minute) and every API server; each step of a CA rotation waits this long, and every certificate is renewed at least this long (and 3s) before it expires.
    #[arg(long, env = "WEBHOOK_CERT_PROPAGATION", default_value = "3m", value_parser = humantime::parse_duration)]
    pub cert_propagation: Duration,
}

/// Why the `--manage-certs` flags cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertArgsError {
    /// A lifetime is too short to rotate in.
    #[error("--{flag} {value} is too short: at least 3s")]
    TooShort {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
    },
    /// The lifetimes cannot be kept to with the propagation delay.
    #[error(transparent)]
    Lifetimes(#[from] crate::background::certs::schedule::LifetimeError),
}

impl CertArgs {
    /// The controller's options, with the webhook's namespace `own`
    /// (`POD_NAMESPACE`) as the default namespace.
    pub fn options(
        &self,
        own: Option<String>,
    ) -> Result<crate::background::certs::CertOptions, CertArgsError> {
        use crate::background::certs::{CertOptions, ServiceRef};
        for (flag, value) in [
            ("ca-validity", self.ca_validity),
            ("cert-validity", self.cert_validity),
        ] {
            if value < Duration::from_secs(3) {
                return Err(CertArgsError::TooShort {
                    flag,
                    value: humantime::format_duration(value).to_string(),
                });
            }
        }
        crate::background::certs::schedule::check_lifetimes(
            self.cert_validity,
            self.ca_validity,
            self.cert_propagation,
        )?;
        let namespace = self
            .cert_secret_namespace
            .clone()
            .or(own.filter(|n| !n.is_empty()))
            .unwrap_or_else(|| "pipelinerollout-webhook".to_owned());
        Ok(CertOptions {
            secret: self.cert_secret.clone(),
            ca_secret: self.ca_secret.clone(),
            service: ServiceRef {
                name: self.cert_service.clone(),
                namespace: self
                    .cert_service_namespace
                    .clone()
                    .unwrap_or_else(|| namespace.clone()),
            },
            secret_namespace: namespace,
            validating: self.validating_configuration.clone(),
            mutating: self.mutating_configuration.clone(),
            ca_validity: self.ca_validity,
            cert_validity: self.cert_validity,
            propagation: self.cert_propagation,
        })
    }
}

// ---- end of the --manage-certs flags ----

/// The server's options from `serve`'s flags. Without --tls-cert and
/// --tls-key, the development certificates in --dev-certs-dir are served
/// (generated if absent), which is why this can fail.
impl TryFrom<&ServeArgs> for ServeOptions {
    type Error = CertError;

    fn try_from(args: &ServeArgs) -> Result<Self, CertError> {
        let (cert, key) = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => (cert.clone(), key.clone()),
            _ => {
                let (paths, generated) = pki::ensure_dev_certs(&args.dev_certs_dir)?;
                tracing::warn!(
                    ca = %paths.ca.display(),
                    generated,
                    "no --tls-cert/--tls-key: serving development certificates for localhost; try:\n  curl --cacert {} -H 'Content-Type: application/json' --data @tests/fixtures/admission/01-create-kubectl-apply-validate.json https://localhost:{}/validate",
                    paths.ca.display(),
                    args.listen.port()
                );
                (paths.cert, paths.key)
            }
        };
        Ok(ServeOptions {
            listen: args.listen,
            admin_listen: Some(args.admin_listen),
            policy_file: args.policy.clone(),
            tls: TlsFiles {
                cert,
                key,
                client_ca: args.client_ca.clone(),
            },
            reload_interval: args.reload_interval,
            shutdown_delay: args.shutdown_delay,
            shutdown_grace: args.shutdown_grace,
            max_connections: args.max_connections,
            idle_timeout: args.idle_timeout,
            keep_alive_interval: args.keep_alive_interval,
            max_inflight_body_bytes: args.max_inflight_body_bytes,
            max_inflight_requests: args.max_inflight_requests,
            kubeconfig: args.kubeconfig.clone(),
            unguarded_namespaces: unguarded_namespaces(
                &args.unguarded_namespaces,
                std::env::var("POD_NAMESPACE").ok(),
            ),
            managed_certificate: args.certs.manage_certs,
        })
    }
}

/// Flags of `export-vap`.
#[derive(Debug, Clone, Args)]
pub struct ExportVapArgs {
    /// Policy file (YAML or JSON); without it, the built-in policy.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// The name of the ValidatingAdmissionPolicy and of its binding.
    #[arg(long, default_value = crate::vap::DEFAULT_NAME)]
    pub name: String,
    /// Write the YAML to this file instead of standard output.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Exit 1 (writing nothing) when the policy asks for a validation CEL cannot express (a minPauseAge above 0).
    #[arg(long)]
    pub strict: bool,
}

/// The namespaces no Event is written from: those given, and the
/// webhook's own (`POD_NAMESPACE`, which the Deployment sets), which the
/// webhook configurations always skip.
fn unguarded_namespaces(given: &[String], own: Option<String>) -> Vec<String> {
    let mut all: Vec<String> = given
        .iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    if let Some(own) = own.filter(|n| !n.is_empty() && !all.contains(n)) {
        all.push(own);
    }
    all
}

/// Flags of `review`.
#[derive(Debug, Clone, Args)]
pub struct ReviewArgs {
    /// Which webhook answers.
    #[arg(long, value_enum)]
    pub webhook: WebhookArg,
    /// Policy file; without it, the built-in policy.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Kubeconfig for RBAC checks (forceReapply.rbac); without it, what only RBAC could allow is denied.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Judge as at this time (RFC 3339, e.g. 2026-12-01T10:00:00Z) instead of now, so a check of forceReapply.minPauseAge is reproducible.
    #[arg(long, value_parser = crate::policy::timestamp::parse_rfc3339)]
    pub now: Option<time::OffsetDateTime>,
    /// The AdmissionReview file, or - for stdin (the default).
    #[arg(default_value = "-")]
    pub file: String,
}

/// `--webhook` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WebhookArg {
    /// The validating webhook.
    Validate,
    /// The mutating webhook.
    Mutate,
}

impl From<WebhookArg> for Webhook {
    fn from(arg: WebhookArg) -> Self {
        match arg {
            WebhookArg::Validate => Webhook::Validate,
            WebhookArg::Mutate => Webhook::Mutate,
        }
    }
}

/// Flags of `check`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Policy file; without it, the built-in policy.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// The namespace of manifests that set no metadata.namespace.
    #[arg(long, short = 'n', value_name = "NS", default_value = "default")]
    pub namespace: String,
    /// The manifests now deployed (a file, a directory, or a dump of `kubectl get pipelinerollouts -A -o yaml`); a rollout found there by namespace and name is judged as an UPDATE from it. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub against: Vec<String>,
    /// The user the writes are judged for (e.g. system:serviceaccount:argocd:argocd-application-controller).
    #[arg(long = "as", value_name = "USER", default_value = crate::check::DEFAULT_USER)]
    pub user: String,
    /// A group of that user; repeatable (system:authenticated is always added).
    #[arg(long = "as-group", value_name = "GROUP")]
    pub groups: Vec<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// ManifestJudge as at this time (RFC 3339) instead of now, so forceReapply.minPauseAge is checked reproducibly.
    #[arg(long, value_parser = crate::policy::timestamp::parse_rfc3339)]
    pub now: Option<time::OffsetDateTime>,
    /// Manifest files, directories (read recursively: .yaml, .yml, .json), or - for standard input.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

/// `--output` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// One line per finding, then a summary.
    Text,
    /// A JSON array of findings.
    Json,
    /// A JUnit XML report: one test case per PipelineRollout.
    Junit,
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn refused_flag_values_say_what_to_write() {
        let cases: [(&[&str], &str); 4] = [
            (&["--audit-interval", "0s"], "must be above 0, e.g. 1h"),
            (
                &["--audit-interval", "soon"],
                "write a duration such as 30m or 1h",
            ),
            (&["--audit-qps", "0"], "requests a second above 0"),
            (&["--audit-qps", "many"], "requests a second above 0"),
        ];
        for (args, says) in cases {
            let Err(e) = serve(args) else {
                panic!("{args:?} was accepted");
            };
            assert!(e.to_string().contains(says), "{args:?}: {e}");
        }
        assert_eq!(
            serve(&["--audit-qps", "0.5"]).map(|s| s.audit_qps).ok(),
            Some(0.5)
        );
    }

    fn serve(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        let cli = Cli::try_parse_from(
            std::iter::once("pipelinerollout-webhook").chain(args.iter().copied()),
        )?;
        match cli.command {
            Some(Command::Serve(serve)) => Ok(serve),
            _ => Ok(cli.serve),
        }
    }

    #[test]
    fn leader_election_is_off_by_default_and_takes_true_or_false() {
        let cases: [(&[&str], bool); 5] = [
            (&["serve"], false),
            (&["serve", "--leader-elect"], true),
            (&["serve", "--leader-elect=true"], true),
            (&["serve", "--leader-elect=false"], false),
            (&["--leader-elect", "--listen", "127.0.0.1:1"], true),
        ];
        for (args, want) in cases {
            let parsed = serve(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert_eq!(parsed.leader_elect, want, "{args:?}");
        }
        assert!(serve(&["serve", "--leader-elect=maybe"]).is_err());
    }

    #[test]
    fn lease_settings_are_checked_only_with_election_on() {
        let off = serve(&["serve", "--leader-elect-renew-deadline=20s"]).expect("parses");
        assert_eq!(off.lease_options(), Ok(None));
        let on = serve(&[
            "serve",
            "--leader-elect",
            "--leader-elect-renew-deadline=20s",
        ])
        .expect("parses");
        let e = on
            .lease_options()
            .expect_err("renew deadline above the duration");
        assert!(
            e.to_string().contains("--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (15s)"),
            "{e}"
        );
        let ok =
            serve(&["serve", "--leader-elect", "--leader-elect-namespace=hooks"]).expect("parses");
        let lease = ok.lease_options().expect("valid").expect("on");
        assert_eq!(
            (lease.namespace.as_deref(), lease.name.as_str()),
            (Some("hooks"), "pipelinerollout-webhook")
        );
        assert_eq!(
            (lease.duration, lease.renew_deadline, lease.retry_period),
            (
                Duration::from_secs(15),
                Duration::from_secs(10),
                Duration::from_secs(2)
            )
        );
    }

    #[test]
    fn certificate_lifetimes_are_checked_and_namespaces_default_to_the_webhooks_own() {
        let parse = |flags: &[&str]| {
            let mut argv = vec![
                "pipelinerollout-webhook",
                "serve",
                "--tls-cert=c",
                "--tls-key=k",
            ];
            argv.extend_from_slice(flags);
            match Cli::try_parse_from(argv).expect("flags parse").command {
                Some(Command::Serve(args)) => args.certs,
                other => panic!("not serve: {other:?}"),
            }
        };
        use crate::background::certs::schedule::LifetimeError;
        // (flags, POD_NAMESPACE, the Secret's and the Service's namespace or the error)
        type Case<'a> = (
            &'a [&'a str],
            Option<&'a str>,
            Result<(&'a str, &'a str), CertArgsError>,
        );
        let cases: [Case<'_>; 7] = [
            (&[], Some("hooks"), Ok(("hooks", "hooks"))),
            (
                &[],
                None,
                Ok(("pipelinerollout-webhook", "pipelinerollout-webhook")),
            ),
            (
                &["--cert-secret-namespace=a", "--cert-service-namespace=b"],
                Some("hooks"),
                Ok(("a", "b")),
            ),
            (
                &["--cert-validity=2s"],
                None,
                Err(CertArgsError::TooShort {
                    flag: "cert-validity",
                    value: "2s".to_owned(),
                }),
            ),
            (
                &["--cert-validity=1y", "--ca-validity=1y"],
                None,
                Err(LifetimeError::CertOutlivesCa.into()),
            ),
            // The review's combination with the default propagation (3m).
            (
                &["--cert-validity=30s", "--ca-validity=75s"],
                None,
                Err(LifetimeError::CertTooShort {
                    cert: "30s".into(),
                    propagation: "3m".into(),
                    margin: "3s".into(),
                    least: "6m 6s".into(),
                }
                .into()),
            ),
            (
                &[
                    "--cert-validity=30s",
                    "--ca-validity=75s",
                    "--cert-propagation=10s",
                ],
                None,
                Ok(("pipelinerollout-webhook", "pipelinerollout-webhook")),
            ),
        ];
        for (flags, own, want) in cases {
            let got = parse(flags)
                .options(own.map(str::to_owned))
                .map(|o| (o.secret_namespace, o.service.namespace));
            let want = want.map(|(a, b)| (a.to_owned(), b.to_owned()));
            assert_eq!(got, want, "{flags:?} in {own:?}");
        }
        assert!(
            Cli::try_parse_from(["pipelinerollout-webhook", "serve", "--manage-certs"]).is_err(),
            "--manage-certs needs --tls-cert (the Secret's volume)"
        );
    }

    #[test]
    fn the_audit_is_on_by_default_and_its_flags_refuse_nonsense() {
        let serve = |extra: &[&str]| {
            let mut argv = vec!["pipelinerollout-webhook", "serve"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|cli| match cli.command {
                Some(Command::Serve(args)) => (
                    args.audit,
                    args.audit_interval,
                    args.audit_qps,
                    args.audit_burst,
                ),
                _ => panic!("not serve"),
            })
        };
        let hour = Duration::from_secs(3600);
        assert_eq!(serve(&[]).expect("defaults"), (true, hour, 5.0, 10));
        assert!(!serve(&["--audit=false"]).expect("off").0);
        assert!(serve(&["--audit"]).expect("on").0);
        let tuned = serve(&[
            "--audit-interval",
            "10m",
            "--audit-qps",
            "0.5",
            "--audit-burst",
            "1",
        ]);
        assert_eq!(
            tuned.expect("tuned"),
            (true, Duration::from_secs(600), 0.5, 1)
        );
        for bad in [
            ["--audit-interval", "0s"],
            ["--audit-qps", "0"],
            ["--audit-qps", "NaN"],
            ["--audit-burst", "0"],
        ] {
            assert!(serve(&bad).is_err(), "{bad:?} is refused");
        }
    }

    #[test]
    fn the_webhooks_own_namespace_is_always_unguarded() {
        let given = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let cases = [
            (
                "the defaults, in the manifests' namespace",
                given(&["kube-system", "pipelinerollout-webhook"]),
                Some("pipelinerollout-webhook"),
                vec!["kube-system", "pipelinerollout-webhook"],
            ),
            (
                "installed elsewhere",
                given(&["kube-system", "pipelinerollout-webhook"]),
                Some("webhooks"),
                vec!["kube-system", "pipelinerollout-webhook", "webhooks"],
            ),
            (
                "outside a pod",
                given(&["kube-system"]),
                None,
                vec!["kube-system"],
            ),
            (
                "blanks dropped",
                given(&[" kube-system ", ""]),
                Some(""),
                vec!["kube-system"],
            ),
        ];
        for (name, list, own, want) in cases {
            assert_eq!(
                unguarded_namespaces(&list, own.map(str::to_owned)),
                want,
                "{name}"
            );
        }
    }
}
