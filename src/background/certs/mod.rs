//! Certificates without cert-manager (`serve --manage-certs`): the
//! webhook keeps its own CA and serving certificate in Secrets and its CA
//! in the caBundle of its own webhooks.
//!
//! - [`controller::run`] (one replica, the leader) keeps two Secrets
//!   ([`material`]): the CA Secret, which holds the CA keys and which no
//!   pod mounts (the leader reads and writes it through the API), and the
//!   serving Secret every replica mounts. It creates them when absent,
//!   renews the serving certificate ([`schedule`]) or when its names no
//!   longer match the Service, rotates the CA in three steps ([`plan`]),
//!   replaces what a hand edit made invalid or foreign, and writes the
//!   caBundle ([`bundle`]), putting it back when someone else overwrites
//!   it (it watches both Secrets and both configurations).
//! - [`readiness::run`] (every replica) reports whether the certificate
//!   this replica serves is trusted by the caBundle of every webhook that
//!   calls the Service, which `/readyz` waits for.
//!
//! Both count what they do in [`crate::metrics::certificates`].
//! [`secrets`] bounds how often the Secrets are written; [`linger`] keeps
//! the CAs the replicas serve from in the caBundle when both Secrets are
//! deleted at once.
//!
//! Every replica serves the Secret's files as the kubelet updates them
//! (the server's hot reload); nothing here touches files.

pub mod args;
pub mod bundle;
pub mod controller;
pub mod linger;
pub mod material;
pub mod plan;
pub mod readiness;
pub mod schedule;
pub mod secrets;
pub mod trust;

use std::time::Duration;

/// The default name of the serving Secret (every replica mounts it).
pub const DEFAULT_SECRET: &str = "pipelinerollout-webhook-tls";
/// The default name of the CA Secret (no pod mounts it).
pub const DEFAULT_CA_SECRET: &str = "pipelinerollout-webhook-ca";

/// The Service the certificates are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    pub name: String,
    pub namespace: String,
}

/// What the certificates are for, where they are kept and how long they
/// live.
#[derive(Debug, Clone)]
pub struct CertOptions {
    pub secret: String,
    pub ca_secret: String,
    /// The Secrets' namespace (the webhook's own).
    pub secret_namespace: String,
    /// The Service the serving certificate is for, and whose webhooks get
    /// the caBundle.
    pub service: ServiceRef,
    /// The ValidatingWebhookConfiguration's name.
    pub validating: String,
    /// The MutatingWebhookConfiguration's name.
    pub mutating: String,
    pub ca_validity: Duration,
    /// How long a serving certificate is valid (never beyond its CA).
    pub cert_validity: Duration,
    /// How long a new CA, or a serving certificate from it, takes to reach
    /// every replica (the kubelet's sync of the Secret volume) and API
    /// server; each CA rotation step waits that long.
    pub propagation: Duration,
}

impl CertOptions {
    /// The Service's DNS names, as the serving certificate carries them.
    pub fn dns_names(&self) -> Vec<String> {
        let ServiceRef { name, namespace } = &self.service;
        vec![
            name.clone(),
            format!("{name}.{namespace}"),
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.cluster.local"),
        ]
    }

    /// The name the API server checks the certificate for, and the
    /// serving certificate's common name.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.service.name, self.service.namespace)
    }
}

#[cfg(test)]
mod tests;
