//! The metrics of the certificates the webhook manages (`serve
//! --manage-certs`, `background::certs`), and what that work reports into
//! them ([`CertEvent`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One thing the certificate work did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertEvent {
    /// A certificate was issued: `ca` or `serving`, and why (the label of
    /// the plan's reason).
    Issued {
        /// ca or serving.
        kind: &'static str,
        /// initial, rotation, names, invalid, deleted or ca-switch.
        reason: &'static str,
    },
    /// A CA rotation step: started, switched or completed.
    Rotation(&'static str),
    /// A caBundle was written into a configuration (validating, mutating).
    BundleUpdated(&'static str),
    /// Something failed, or was held back, and is retried.
    Error(CertOperation),
}

/// What failed, or was held back, in the certificate work: the `operation`
/// label of `certs_errors`, each series started at zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertOperation {
    /// Reading or writing a certificate Secret.
    Secret,
    /// Writing a caBundle into a webhook configuration.
    Bundle,
    /// Watching the Secrets and configurations.
    Watch,
    /// Issuing a certificate.
    Issue,
    /// A Secret write held back: written too often.
    Rate,
}

impl CertOperation {
    /// Every operation, in the order the help text names them.
    pub const ALL: [Self; 5] = [
        Self::Secret,
        Self::Bundle,
        Self::Watch,
        Self::Issue,
        Self::Rate,
    ];

    /// The label value.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Secret => "secret",
            Self::Bundle => "bundle",
            Self::Watch => "watch",
            Self::Issue => "issue",
            Self::Rate => "rate",
        }
    }
}

/// Labels of an issued certificate.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IssueLabels {
    /// ca or serving.
    pub kind: &'static str,
    /// initial, rotation, names, invalid, deleted or ca-switch.
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
    /// One of [`CertOperation`]'s labels.
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
    /// Creates the block, its known series at zero (zero without
    /// `--manage-certs`), and registers it in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            issued: Family::default(),
            ca_rotations: Family::default(),
            bundle_updates: Family::default(),
            errors: Family::default(),
            trusted: Gauge::default(),
        };
        registry.register(
            "certs_issued",
            "Certificates the webhook issued into its Secret (--manage-certs), by kind (ca, serving) and reason (initial, rotation, names, invalid, deleted, ca-switch)",
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
            "Failed certificate operations, retried with backoff, by operation (secret, bundle, watch, issue; rate: a Secret write held back because the Secrets were written too often)",
            metrics.errors.clone(),
        );
        registry.register(
            "certs_trusted",
            "1 when the webhook configurations' caBundle trusts the certificate this replica serves (--manage-certs; /readyz waits for it)",
            metrics.trusted.clone(),
        );
        for kind in ["ca", "serving"] {
            for reason in [
                "initial",
                "rotation",
                "names",
                "invalid",
                "deleted",
                "ca-switch",
            ] {
                metrics
                    .issued
                    .get_or_create(&IssueLabels { kind, reason })
                    .inc_by(0);
            }
        }
        for step in ["started", "switched", "completed"] {
            metrics
                .ca_rotations
                .get_or_create(&StepLabels { step })
                .inc_by(0);
        }
        for configuration in ["validating", "mutating"] {
            metrics
                .bundle_updates
                .get_or_create(&ConfigurationLabels { configuration })
                .inc_by(0);
        }
        for operation in CertOperation::ALL {
            metrics
                .errors
                .get_or_create(&OperationLabels {
                    operation: operation.label(),
                })
                .inc_by(0);
        }
        metrics
    }

    /// Counts one thing the certificate work did.
    pub fn record_cert(&self, event: CertEvent) {
        match event {
            CertEvent::Issued { kind, reason } => {
                self.issued
                    .get_or_create(&IssueLabels { kind, reason })
                    .inc();
            }
            CertEvent::Rotation(step) => {
                self.ca_rotations.get_or_create(&StepLabels { step }).inc();
            }
            CertEvent::BundleUpdated(configuration) => {
                self.bundle_updates
                    .get_or_create(&ConfigurationLabels { configuration })
                    .inc();
            }
            CertEvent::Error(operation) => {
                self.errors
                    .get_or_create(&OperationLabels {
                        operation: operation.label(),
                    })
                    .inc();
            }
        }
    }

    /// Whether the caBundle trusts the served certificate.
    pub fn set_trusted(&self, trusted: bool) {
        self.trusted.set(i64::from(trusted));
    }
}
