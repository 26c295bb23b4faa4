//! The command line: `serve` (the default), `review`, `check`, `check-policy` and `gen-certs`.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use prometheus_client::metrics::counter::Counter;

use crate::admission::{self, AnswerContext, Webhook};
use crate::authz::{self, Authorizer, RbacAuthorizer, StaticLists};
use crate::background::sweeper::{SweepOutcome, SweeperHost};
use crate::certs;
use crate::events::EventQueue;
use crate::policy::Policy;
use crate::server::Shared;
use crate::server::metrics::{Metrics, ResetLabels};
use crate::server::tls::TlsFiles;
use crate::server::{self, ServeOptions};
use std::sync::Arc;

/// Where `serve` keeps development certificates by default.
pub const DEV_CERTS_DIR: &str = "certs";

/// Admission webhook for Numaplane PipelineRollouts: validates and defaults
/// drain timeouts, and gates the forced re-apply (allow-data-loss).
#[derive(Debug, Parser)]
#[command(
    name = "pipelinerollout-webhook",
    version,
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
    Check(crate::check::CheckArgs),
    /// Check a policy file: print the effective policy and exit 0, or print the error and exit 2.
    CheckPolicy {
        /// The policy file (YAML or JSON).
        file: PathBuf,
    },
    /// Write a CA and a serving certificate for the in-cluster Service, plus the kustomize patch that puts the CA into the webhook configurations (for installing without cert-manager).
    GenCerts(GenCertsArgs),
    /// Print the validation rules of a policy as a ValidatingAdmissionPolicy and its binding (YAML), for in-process admission without the webhook (docs/vap.md).
    ExportVap(crate::vap::ExportVapArgs),
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
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_BODY_BYTES", default_value = "32Mi", value_parser = crate::server::budget::parse_size)]
    pub max_inflight_body_bytes: usize,
    /// The most requests in flight at once, across all connections and HTTP/2 streams; more get 503 at once.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_REQUESTS", default_value_t = crate::server::budget::DEFAULT_MAX_INFLIGHT_REQUESTS)]
    pub max_inflight_requests: usize,
    /// Kubeconfig for RBAC checks (forceReapply.rbac), Events and the sweeper; without it, the in-cluster service account or KUBECONFIG.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Watch PipelineRollouts and reset allow-data-loss to "false" once a forced re-apply's pause is over (needs get, list, watch and patch on pipelinerollouts).
    #[arg(long, env = "WEBHOOK_RESET_STALE_FORCE")]
    pub reset_stale_force: bool,
    /// How long the pause must have been over before the sweeper resets a force.
    #[arg(long, env = "WEBHOOK_STALE_FORCE_GRACE", default_value = "10s", value_parser = humantime::parse_duration)]
    pub stale_force_grace: Duration,
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
    #[arg(long, value_parser = crate::policy::duration::parse_rfc3339)]
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

/// Keeps the log writer's background thread; dropping it writes what is
/// waiting. Hold it until the program ends.
#[must_use = "dropping the guard stops the log writer"]
pub struct LoggingGuard {
    _sink: Option<crate::logsink::SinkGuard>,
    dropped_lines: Counter,
}

impl LoggingGuard {
    /// The log sink's count of dropped lines, for the metrics to export
    /// (zero for good when lines go straight to stderr).
    pub fn dropped_lines(&self) -> Counter {
        self.dropped_lines.clone()
    }
}

impl std::fmt::Debug for LoggingGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoggingGuard")
    }
}

/// Sets up logging to stderr through [`crate::logsink`]: a request never
/// waits for stderr, lines are written in batches, and when stderr does not
/// keep up lines are dropped and counted
/// (`pipelinerollout_webhook_log_lines_dropped_total`). Should the writer
/// thread fail to start, lines are written to stderr directly.
pub fn init_logging(cli: &Cli) -> LoggingGuard {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log_level.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Boxed, so that both writers fit one builder: one small allocation a
    // line, against about 19 k instructions to format a decision line.
    let (writer, guard, dropped_lines) = match crate::logsink::LogSink::start(std::io::stderr()) {
        Ok((sink, guard)) => {
            let dropped_lines = sink.dropped_lines();
            (BoxMakeWriter::new(sink), Some(guard), dropped_lines)
        }
        Err(_) => (
            BoxMakeWriter::new(std::io::stderr),
            None,
            Counter::default(),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    if guard.is_none() {
        tracing::warn!("the log writer thread did not start: logging straight to stderr");
    }
    LoggingGuard {
        _sink: guard,
        dropped_lines,
    }
}

/// Runs the parsed command line, logging through `logging`.
pub fn run(cli: Cli, logging: &LoggingGuard) -> ExitCode {
    match cli.command {
        None => run_serve(cli.serve, logging),
        Some(Command::Serve(args)) => run_serve(args, logging),
        Some(Command::Review(args)) => run_review(&args),
        Some(Command::Check(args)) => run_check(&args),
        Some(Command::CheckPolicy { file }) => run_check_policy(&file),
        Some(Command::GenCerts(args)) => run_gen_certs(&args),
        Some(Command::ExportVap(args)) => run_export_vap(&args),
    }
}

fn run_export_vap(args: &crate::vap::ExportVapArgs) -> ExitCode {
    crate::vap::run(args)
}

/// A runtime for the one-shot commands (`review`, `check`); `Err` is the
/// exit code after saying why.
fn current_thread_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("cannot start the async runtime: {e}");
            ExitCode::from(2)
        })
}

fn run_gen_certs(args: &GenCertsArgs) -> ExitCode {
    match gen_certs(args) {
        Ok((paths, renewed)) => {
            let how = if renewed {
                "renewed the serving certificate under the existing CA (caBundle unchanged)"
            } else {
                "made a new CA and serving certificate"
            };
            println!(
                "{how}: wrote {}, {}, {} and {}; valid {} days. Renew with `gen-certs --force` before then and re-apply.",
                paths.ca.display(),
                paths.cert.display(),
                paths.key.display(),
                args.out.join(certs::CA_BUNDLE_PATCH).display(),
                args.days
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-certs: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the certificates; `Ok((paths, true))` when the serving
/// certificate was renewed under an existing CA.
fn gen_certs(args: &GenCertsArgs) -> Result<(certs::CertPaths, bool), String> {
    if !(1..=3650).contains(&args.days) {
        return Err(format!("--days {} must be from 1 to 3650", args.days));
    }
    // Never over the development certificates `serve` uses.
    if let (Ok(out), Ok(dev)) = (
        args.out.canonicalize(),
        Path::new(DEV_CERTS_DIR).canonicalize(),
    ) && out == dev
    {
        return Err(format!(
            "{} holds the development certificates of `serve`; choose another --out",
            args.out.display()
        ));
    }
    let paths = certs::CertPaths::in_dir(&args.out);
    let existing = paths.cert.exists() || paths.key.exists() || paths.ca.exists();
    if !args.force && existing {
        return Err(format!(
            "{} already holds certificates; pass --force to renew them",
            args.out.display()
        ));
    }
    let service = &args.service;
    let namespace = &args.namespace;
    let names = vec![
        service.clone(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    let common_name = format!("{service}.{namespace}.svc");
    let reuse = !args.new_ca && paths.ca.exists() && paths.ca_key.exists();
    let generated = if reuse {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        certs::renew(
            &read(&paths.ca)?,
            &read(&paths.ca_key)?,
            &common_name,
            &names,
            args.days,
        )
    } else {
        certs::generate_with_ca_days(&common_name, &names, args.days, args.days * 10)
    }
    .map_err(|e| e.to_string())?;
    paths.write(&generated).map_err(|e| e.to_string())?;
    paths.write_ca_key(&generated).map_err(|e| e.to_string())?;
    certs::write_ca_bundle_patch(&args.out, &generated.ca_pem).map_err(|e| e.to_string())?;
    Ok((paths, reuse))
}

fn run_check(args: &crate::check::CheckArgs) -> ExitCode {
    match current_thread_runtime() {
        Ok(runtime) => crate::check::run(args, &runtime),
        Err(code) => code,
    }
}

fn run_check_policy(file: &Path) -> ExitCode {
    match Policy::from_file(file) {
        Ok(policy) => {
            print!("{}", policy.to_yaml());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

fn run_review(args: &ReviewArgs) -> ExitCode {
    let policy = match Policy::from_file_or_built_in(args.policy.as_deref()) {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let input = match read_input(&args.file) {
        Ok(input) => input,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match current_thread_runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let answer = runtime.block_on(async {
        let authorizer = match &args.kubeconfig {
            Some(path) => {
                Authorizer::Rbac(RbacAuthorizer::new(authz::kube_client(Some(path)).await?))
            }
            None => {
                Authorizer::StaticLists(StaticLists::new("review was run without --kubeconfig"))
            }
        };
        let judge = AnswerContext {
            authorizer: &authorizer,
            limit: Duration::from_secs(10),
            now: args.now.unwrap_or_else(time::OffsetDateTime::now_utc),
        };
        admission::answer(args.webhook.into(), &policy, &input, judge)
            .await
            .map_err(|e| format!("{}: {e}", args.file))
    });
    match answer {
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
        Ok((_, outcome)) => {
            let pretty = serde_json::from_slice::<serde_json::Value>(&outcome.body)
                .and_then(|v| serde_json::to_string_pretty(&v))
                .unwrap_or_else(|_| String::from_utf8_lossy(&outcome.body).into_owned());
            println!("{pretty}");
            if let Some(message) = outcome.message() {
                eprintln!("denied: {message}");
            }
            if outcome.allowed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Reads an AdmissionReview from a file or stdin; YAML is turned into JSON.
fn read_input(file: &str) -> Result<Vec<u8>, String> {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| format!("cannot read {file}: {e}"))?;
    if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
        return Ok(text.into_bytes());
    }
    let value: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| format!("{file} is neither JSON nor YAML: {e}"))?;
    if !value.is_object() {
        return Err(format!(
            "{file} is not an AdmissionReview: expected a JSON or YAML object with apiVersion, kind and request"
        ));
    }
    serde_json::to_vec(&value).map_err(|e| format!("{file}: {e}"))
}

/// The runtime `serve` runs on: multi-threaded, one worker per core
/// (`TOKIO_WORKER_THREADS` overrides). The benchmark's reference servers
/// run on it too, so that only the handlers differ.
pub fn serving_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

fn run_serve(args: ServeArgs, logging: &LoggingGuard) -> ExitCode {
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

async fn serve(args: ServeArgs, log_lines_dropped: Counter) -> Result<(), String> {
    let (cert, key) = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        _ => {
            let (paths, generated) =
                certs::ensure_dev_certs(&args.dev_certs_dir).map_err(|e| e.to_string())?;
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
    let options = ServeOptions {
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
    };
    let metrics = Metrics::with_log_lines_dropped(log_lines_dropped);
    let running = server::start_with_metrics(options, metrics)
        .await
        .map_err(|e| e.to_string())?;
    if args.reset_stale_force {
        match &running.client {
            Some(client) => crate::background::sweeper::spawn(
                client.clone(),
                std::sync::Arc::clone(&running.shared),
                args.stale_force_grace,
            ),
            None => tracing::warn!(
                "--reset-stale-force is set but no API server can be reached: the sweeper is off"
            ),
        }
    }
    tracing::info!(
        listen = %running.addr,
        admin = ?running.admin_addr,
        policy = %args.policy.as_ref().map_or_else(|| "built-in".to_owned(), |p| p.display().to_string()),
        mode = %running.shared.policy.load().mode,
        mtls = args.client_ca.is_some(),
        "serving /validate and /mutate over HTTPS"
    );
    shutdown_signal().await;
    running.shutdown();
    running.wait().await;
    tracing::info!("stopped");
    Ok(())
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
