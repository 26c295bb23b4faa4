//! The command line's definitions: every command, and the flags of all but
//! `serve` and `check`, parsed by clap. `serve`'s flags are its components'
//! own (each a `clap::Args` in the component's module), flattened into
//! [`ServeArgs`]; `check`'s are [`crate::check::CheckArgs`].
//! What each command does is in the file named after it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub(crate) use crate::check::{CheckArgs, OutputFormat};

use super::logging::LoggingArgs;
use crate::admission::Webhook;
use crate::apiserver::args::ApiServerArgs;
use crate::background::audit::args::AuditArgs;
use crate::background::certs::args::CertArgs;
use crate::background::leader::args::LeaseArgs;
use crate::background::sweeper::SweeperArgs;
use crate::events::args::EventArgs;
use crate::server::args::ServerArgs;

/// What `--version` prints after the name: the crate's version and the git
/// commit the binary was built from (`unknown` when the build could not
/// tell; build.rs).
const VERSION: &str = concat!(
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
    pub(crate) command: Option<Command>,
    /// `serve`'s flags, accepted without the word `serve`.
    #[command(flatten)]
    pub(crate) serve: ServeArgs,
    /// Logging's flags, of every command.
    #[command(flatten)]
    pub logging: LoggingArgs,
}

/// The commands.
// Parsed once at start-up: the size of `serve`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
    /// Print the validation rules of a policy as ValidatingAdmissionPolicies and their bindings (YAML), or with --mutating its defaults as a MutatingAdmissionPolicy, for in-process admission without the webhook (docs/vap.md).
    ExportVap(ExportVapArgs),
}

/// Flags of `gen-certs`.
#[derive(Debug, Clone, Args)]
pub(crate) struct GenCertsArgs {
    /// The webhook's Service name.
    #[arg(long, default_value = "pipelinerollout-webhook")]
    pub(crate) service: String,
    /// The webhook's namespace.
    #[arg(long, default_value = "pipelinerollout-webhook")]
    pub(crate) namespace: String,
    /// Where to write ca.crt, tls.crt, tls.key and ca-bundle.patch.yaml.
    #[arg(long, default_value = "manifests/overlays/self-signed/certs")]
    pub(crate) out: PathBuf,
    /// Validity of the serving certificate, in days (the CA: ten times as long).
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(i64).range(1..=3650))]
    pub(crate) days: i64,
    /// Replace certificates already in --out: renews the serving certificate under the existing CA (ca.crt and ca.key), so the webhook configurations' caBundle does not change.
    #[arg(long)]
    pub(crate) force: bool,
    /// With --force, also make a new CA (the caBundle changes: re-apply the webhook configurations).
    #[arg(long, requires = "force")]
    pub(crate) new_ca: bool,
}

/// Flags of `serve`: each component's own, in the order `--help` lists
/// them.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// The HTTPS server: addresses, policy and certificate files, reloads,
    /// shutdown, connections and the body budget.
    #[command(flatten)]
    pub(crate) server: ServerArgs,
    /// How the API server is reached.
    #[command(flatten)]
    pub(crate) api: ApiServerArgs,
    /// Where Events are not written.
    #[command(flatten)]
    pub(crate) events: EventArgs,
    /// The stale-force sweeper.
    #[command(flatten)]
    pub(crate) sweeper: SweeperArgs,
    /// Leader election.
    #[command(flatten)]
    pub(crate) leader: LeaseArgs,
    /// The audit of stored rollouts into PolicyReports.
    #[command(flatten)]
    pub(crate) audit: AuditArgs,
    /// Certificates managed by the webhook itself.
    #[command(flatten)]
    pub(crate) certs: CertArgs,
}

/// Flags of `export-vap`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ExportVapArgs {
    /// Policy file (YAML or JSON); without it, the built-in policy.
    #[arg(long)]
    pub(crate) policy: Option<PathBuf>,
    /// The name of the ValidatingAdmissionPolicy and of its binding.
    #[arg(long, default_value = crate::vap::DEFAULT_NAME, value_parser = object_name)]
    pub(crate) name: String,
    /// Write the YAML to this file instead of standard output.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Exit 1 (writing nothing) when the policy asks for what the export cannot express (a minPauseAge above 0; with --mutating, forcePromote.oneShot).
    #[arg(long)]
    pub(crate) strict: bool,
    /// Write what /mutate fills in (the default drain timeouts, the one-shot reset) as a MutatingAdmissionPolicy named NAME-defaults instead (Kubernetes 1.36 or newer).
    #[arg(long)]
    pub(crate) mutating: bool,
}

/// Why a `--name` was refused (clap prints it after the flag and its value).
#[derive(Debug, thiserror::Error)]
#[error("not a Kubernetes object name (lowercase letters, digits, '-' and '.', at most 253)")]
struct NotAnObjectName;

/// A Kubernetes object name (a DNS subdomain), as `export-vap --name` takes.
fn object_name(text: &str) -> Result<String, NotAnObjectName> {
    crate::vap::valid_name(text)
        .then(|| text.to_owned())
        .ok_or(NotAnObjectName)
}

/// Flags of `review`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ReviewArgs {
    /// Which webhook answers.
    #[arg(long, value_enum)]
    pub(crate) webhook: WebhookArg,
    /// Policy file; without it, the built-in policy.
    #[arg(long)]
    pub(crate) policy: Option<PathBuf>,
    /// Kubeconfig for RBAC checks (forceReapply.rbac); without it, what only RBAC could allow is denied.
    #[arg(long)]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// Judge as at this time (RFC 3339, e.g. 2026-12-01T10:00:00Z) instead of now, so a check of forceReapply.minPauseAge is reproducible.
    #[arg(long, value_parser = crate::policy::timestamp::parse_rfc3339)]
    pub(crate) now: Option<time::OffsetDateTime>,
    /// The AdmissionReview file, or - for stdin (the default).
    #[arg(default_value = "-")]
    pub(crate) file: String,
}

/// `--webhook` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum WebhookArg {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    use super::*;
    use crate::background::certs::args::CertArgsError;

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
            serve(&["--audit-qps", "0.5"])
                .map(|s| s.audit.audit_qps)
                .ok(),
            Some(0.5)
        );
    }

    #[test]
    fn gen_certs_days_and_export_vap_names_are_checked_by_clap() {
        let refused = |args: &[&str]| {
            let argv = std::iter::once("pipelinerollout-webhook").chain(args.iter().copied());
            Cli::try_parse_from(argv).expect_err("refused").to_string()
        };
        for days in ["0", "3651"] {
            let e = refused(&["gen-certs", "--days", days]);
            assert!(
                e.contains("'--days <DAYS>'") && e.contains("1..=3650"),
                "{e}"
            );
        }
        let e = refused(&["export-vap", "--name", "Not_A_Name"]);
        assert!(
            e.contains("'--name <NAME>': not a Kubernetes object name"),
            "{e}"
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
            assert_eq!(parsed.leader.leader_elect, want, "{args:?}");
        }
        assert!(serve(&["serve", "--leader-elect=maybe"]).is_err());
    }

    #[test]
    fn lease_settings_are_checked_only_with_election_on() {
        let off = serve(&["serve", "--leader-elect-renew-deadline=20s"]).expect("parses");
        assert_eq!(off.leader.options(), Ok(None));
        let on = serve(&[
            "serve",
            "--leader-elect",
            "--leader-elect-renew-deadline=20s",
        ])
        .expect("parses");
        let e = on
            .leader
            .options()
            .expect_err("renew deadline above the duration");
        assert!(
            e.to_string().contains("--leader-elect-renew-deadline (20s) must be shorter than --leader-elect-lease-duration (15s)"),
            "{e}"
        );
        let ok =
            serve(&["serve", "--leader-elect", "--leader-elect-namespace=hooks"]).expect("parses");
        let lease = ok.leader.options().expect("valid").expect("on");
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
                "--manage-certs",
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
                .map(|o| o.expect("--manage-certs"))
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
                    args.audit.audit,
                    args.audit.audit_interval,
                    args.audit.audit_qps,
                    args.audit.audit_burst,
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

    /// Deployments and the Helm chart pass these flags and variables, and
    /// `--help` lists them in this order, whichever component owns them.
    #[test]
    fn serve_keeps_every_flag_its_variable_and_their_order() {
        let want: [(&str, Option<&str>); 44] = [
            ("listen", Some("WEBHOOK_LISTEN")),
            ("admin-listen", Some("WEBHOOK_ADMIN_LISTEN")),
            ("policy", Some("WEBHOOK_POLICY")),
            ("tls-cert", Some("WEBHOOK_TLS_CERT")),
            ("tls-key", Some("WEBHOOK_TLS_KEY")),
            ("client-ca", Some("WEBHOOK_CLIENT_CA")),
            ("dev-certs-dir", Some("WEBHOOK_DEV_CERTS_DIR")),
            ("reload-interval", Some("WEBHOOK_RELOAD_INTERVAL")),
            ("shutdown-delay", Some("WEBHOOK_SHUTDOWN_DELAY")),
            ("shutdown-grace", Some("WEBHOOK_SHUTDOWN_GRACE")),
            ("max-connections", Some("WEBHOOK_MAX_CONNECTIONS")),
            ("idle-timeout", Some("WEBHOOK_IDLE_TIMEOUT")),
            ("keep-alive-interval", Some("WEBHOOK_KEEP_ALIVE_INTERVAL")),
            (
                "max-inflight-body-bytes",
                Some("WEBHOOK_MAX_INFLIGHT_BODY_BYTES"),
            ),
            (
                "max-inflight-requests",
                Some("WEBHOOK_MAX_INFLIGHT_REQUESTS"),
            ),
            ("kubeconfig", None),
            ("unguarded-namespaces", Some("WEBHOOK_UNGUARDED_NAMESPACES")),
            ("reset-stale-force", Some("WEBHOOK_RESET_STALE_FORCE")),
            ("stale-force-grace", Some("WEBHOOK_STALE_FORCE_GRACE")),
            ("leader-elect", Some("WEBHOOK_LEADER_ELECT")),
            (
                "leader-elect-lease-name",
                Some("WEBHOOK_LEADER_ELECT_LEASE_NAME"),
            ),
            ("leader-elect-namespace", Some("POD_NAMESPACE")),
            (
                "leader-elect-lease-duration",
                Some("WEBHOOK_LEADER_ELECT_LEASE_DURATION"),
            ),
            (
                "leader-elect-renew-deadline",
                Some("WEBHOOK_LEADER_ELECT_RENEW_DEADLINE"),
            ),
            (
                "leader-elect-retry-period",
                Some("WEBHOOK_LEADER_ELECT_RETRY_PERIOD"),
            ),
            ("audit", Some("WEBHOOK_AUDIT")),
            ("audit-interval", Some("WEBHOOK_AUDIT_INTERVAL")),
            ("audit-qps", Some("WEBHOOK_AUDIT_QPS")),
            ("audit-burst", Some("WEBHOOK_AUDIT_BURST")),
            ("manage-certs", Some("WEBHOOK_MANAGE_CERTS")),
            ("cert-controller", Some("WEBHOOK_CERT_CONTROLLER")),
            ("cert-secret", Some("WEBHOOK_CERT_SECRET")),
            ("ca-secret", Some("WEBHOOK_CA_SECRET")),
            (
                "cert-secret-namespace",
                Some("WEBHOOK_CERT_SECRET_NAMESPACE"),
            ),
            ("cert-service", Some("WEBHOOK_CERT_SERVICE")),
            (
                "cert-service-namespace",
                Some("WEBHOOK_CERT_SERVICE_NAMESPACE"),
            ),
            (
                "validating-configuration",
                Some("WEBHOOK_VALIDATING_CONFIGURATION"),
            ),
            (
                "mutating-configuration",
                Some("WEBHOOK_MUTATING_CONFIGURATION"),
            ),
            ("ca-validity", Some("WEBHOOK_CA_VALIDITY")),
            ("cert-validity", Some("WEBHOOK_CERT_VALIDITY")),
            ("cert-propagation", Some("WEBHOOK_CERT_PROPAGATION")),
            ("log-level", Some("LOG_LEVEL")),
            ("log-format", Some("LOG_FORMAT")),
            ("help", None),
        ];
        let mut cli = <Cli as clap::CommandFactory>::command();
        cli.build();
        let serve = cli.find_subcommand("serve").expect("serve");
        let mut flags: Vec<_> = serve.get_arguments().collect();
        // Sorted as --help lists them (clap's display order).
        flags.sort_by_key(|a| a.get_display_order());
        let got: Vec<(String, Option<String>)> = flags
            .iter()
            .map(|a| {
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                (a.get_long().unwrap_or_default().to_owned(), env)
            })
            .collect();
        let want: Vec<(String, Option<String>)> = want
            .iter()
            .map(|(f, e)| ((*f).to_owned(), e.map(str::to_owned)))
            .collect();
        assert_eq!(got, want);
    }
}
