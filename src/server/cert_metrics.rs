//! The metrics of the certificates the webhook manages (`serve
//! --manage-certs`, `background::certs`), registered by
//! [`Metrics`](super::metrics::Metrics).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of an issued certificate.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IssueLabels {
    /// ca or serving.
    pub kind: &'static str,
    /// initial, rotation, names, invalid or ca-switch.
    pub reason: &'static str,
}

/// Labels of a CA rotation step.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    /// started, switched or completed.
    pub step: &'static str,
}

/// Labels of a caBundle write.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigurationLabels {
    /// validating or mutating.
    pub configuration: &'static str,
}

/// Labels of a failed certificate operation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// secret, bundle, watch or issue.
    pub operation: &'static str,
}

/// The metrics of the certificate controller and of the trust check.
#[derive(Debug, Clone)]
pub struct CertMetrics {
    /// Certificates issued, by kind and reason.
    pub issued: Family<IssueLabels, Counter>,
    /// CA rotation steps.
    pub ca_rotations: Family<StepLabels, Counter>,
    /// caBundle writes, by configuration.
    pub bundle_updates: Family<ConfigurationLabels, Counter>,
    /// Failed operations (retried), by operation.
    pub errors: Family<OperationLabels, Counter>,
    /// 1 when the caBundle trusts the served certificate.
    pub trusted: Gauge,
}

impl CertMetrics {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            issued: Family::default(),
            ca_rotations: Family::default(),
            bundle_updates: Family::default(),
            errors: Family::default(),
            trusted: Gauge::default(),
        };
        registry.register(
            "certs_issued",
            "Certificates the webhook issued into its Secret (--manage-certs), by kind (ca, serving) and reason (initial, rotation, names, invalid, ca-switch)",
            metrics.issued.clone(),
        );
        registry.register(
            "certs_ca_rotations",
            "CA rotation steps (started: new CA in the caBundle; switched: serving certificate from the new CA; completed: old CA out of the caBundle)",
            metrics.ca_rotations.clone(),
        );
        registry.register(
            "certs_ca_bundle_updates",
            "caBundle writes into the webhook configurations, by configuration (validating, mutating)",
            metrics.bundle_updates.clone(),
        );
        registry.register(
            "certs_errors",
            "Failed certificate operations, retried with backoff, by operation (secret, bundle, watch, issue)",
            metrics.errors.clone(),
        );
        registry.register(
            "certs_trusted",
            "1 when the webhook configurations' caBundle trusts the certificate this replica serves (--manage-certs; /readyz waits for it)",
            metrics.trusted.clone(),
        );
        metrics
    }
}
