//! The flags of `serve --manage-certs`, checked into the [`CertOptions`]
//! the certificate controller and the readiness check run with.

use std::time::Duration;

use clap::ArgAction;

use super::{CertOptions, ServiceRef};

/// Flags of `serve` for `--manage-certs`.
#[derive(Debug, Clone, clap::Args)]
pub struct CertArgs {
    /// Keep a CA and the serving certificate in the Secret --cert-secret and the CA in the caBundle of the webhooks that call --cert-service, rotating both; serve --tls-cert/--tls-key from that Secret's volume, and be ready only once the caBundle trusts the served certificate.
    // --tls-cert is the server's flag (crate::server::args): the one
    // relation between components' flags, checked by clap.
    #[arg(long, env = "WEBHOOK_MANAGE_CERTS", requires = "tls_cert")]
    pub manage_certs: bool,
    /// With --manage-certs: run the certificate controller in this process (false: only serve the Secret's certificate and report trust, for a replica that does not lead).
    #[arg(long, env = "WEBHOOK_CERT_CONTROLLER", default_value_t = true, action = ArgAction::Set)]
    pub cert_controller: bool,
    /// The Secret the serving certificate, its key and its CA's certificate are kept in (what every replica mounts).
    #[arg(long, env = "WEBHOOK_CERT_SECRET", default_value = super::DEFAULT_SECRET)]
    pub cert_secret: String,
    /// The Secret the CAs and their keys are kept in; no pod mounts it, the leader reads and writes it through the API.
    #[arg(long, env = "WEBHOOK_CA_SECRET", default_value = super::DEFAULT_CA_SECRET)]
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
    #[error("--{flag} {value} is too short: at least 3s")]
    TooShort { flag: &'static str, value: String },
    #[error(transparent)]
    Lifetimes(#[from] super::schedule::LifetimeError),
}

impl CertArgs {
    /// The controller's options with --manage-certs, checked, with the
    /// webhook's namespace `own` (`POD_NAMESPACE`) as the default
    /// namespace; `None` without.
    pub fn options(&self, own: Option<String>) -> Result<Option<CertOptions>, CertArgsError> {
        if !self.manage_certs {
            return Ok(None);
        }
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
        super::schedule::check_lifetimes(
            self.cert_validity,
            self.ca_validity,
            self.cert_propagation,
        )?;
        let namespace = self
            .cert_secret_namespace
            .clone()
            .or(own.filter(|n| !n.is_empty()))
            .unwrap_or_else(|| "pipelinerollout-webhook".to_owned());
        Ok(Some(CertOptions {
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
        }))
    }
}
