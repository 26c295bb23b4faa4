//! The metrics of the certificates the webhook manages (`serve
//! --manage-certs`, `background::certs`).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `N` labels, each a name and a value.
type Labels<const N: usize> = [(&'static str, &'static str); N];

/// One label's values as an enum, so that only a value started at zero
/// (and named in the help) can be recorded.
macro_rules! label_values {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $value:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $(#[doc = $value] $variant),+
        }

        impl $name {
            const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The label value.
            pub const fn label(self) -> &'static str {
                match self {
                    $(Self::$variant => $value),+
                }
            }
        }
    };
}

label_values!(
    /// What was issued (`kind`).
    Issued { Ca = "ca", Serving = "serving" }
);
label_values!(
    /// Why it was issued (`reason`).
    IssueReason {
        Initial = "initial",
        Rotation = "rotation",
        Names = "names",
        Invalid = "invalid",
        Deleted = "deleted",
        CaSwitch = "ca-switch",
    }
);
label_values!(
    /// A CA rotation step (`step`).
    RotationStep { Started = "started", Switched = "switched", Completed = "completed" }
);
label_values!(
    /// A webhook configuration (`configuration`).
    Configuration { Validating = "validating", Mutating = "mutating" }
);
label_values!(
    /// An operation that failed, or was held back (`operation`).
    Operation {
        Secret = "secret",
        Bundle = "bundle",
        Watch = "watch",
        Issue = "issue",
        Rate = "rate",
    }
);

/// Creates the series of `family` whose `key` is each of `values`, at zero.
fn at_zero(
    family: &Family<Labels<1>, Counter>,
    key: &'static str,
    values: impl Iterator<Item = &'static str>,
) {
    for value in values {
        family.get_or_create(&[(key, value)]).inc_by(0);
    }
}

/// The metrics of the certificate controller and of the trust check.
#[derive(Debug, Clone)]
pub struct CertMetrics {
    issued: Family<Labels<2>, Counter>,
    ca_rotations: Family<Labels<1>, Counter>,
    bundle_updates: Family<Labels<1>, Counter>,
    errors: Family<Labels<1>, Counter>,
    trusted: Gauge,
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
        for kind in Issued::ALL {
            for reason in IssueReason::ALL {
                metrics
                    .issued
                    .get_or_create(&[("kind", kind.label()), ("reason", reason.label())])
                    .inc_by(0);
            }
        }
        let steps = RotationStep::ALL.iter().map(|s| s.label());
        at_zero(&metrics.ca_rotations, "step", steps);
        let configurations = Configuration::ALL.iter().map(|c| c.label());
        at_zero(&metrics.bundle_updates, "configuration", configurations);
        let operations = Operation::ALL.iter().map(|o| o.label());
        at_zero(&metrics.errors, "operation", operations);
        metrics
    }

    /// Counts a certificate issued: `kind` ca or serving, for `reason`
    /// (the label of the plan's reason).
    pub fn issued(&self, kind: Issued, reason: IssueReason) {
        self.issued
            .get_or_create(&[("kind", kind.label()), ("reason", reason.label())])
            .inc();
    }

    /// Counts a CA rotation step: started, switched or completed.
    pub fn rotation(&self, step: RotationStep) {
        self.ca_rotations
            .get_or_create(&[("step", step.label())])
            .inc();
    }

    /// Counts a caBundle written into `configuration` (validating or
    /// mutating).
    pub fn bundle_updated(&self, configuration: Configuration) {
        self.bundle_updates
            .get_or_create(&[("configuration", configuration.label())])
            .inc();
    }

    /// Counts an `operation` that failed, or was held back, and is
    /// retried: secret, bundle, watch, issue or rate.
    pub fn error(&self, operation: Operation) {
        self.errors
            .get_or_create(&[("operation", operation.label())])
            .inc();
    }

    /// Whether the caBundle trusts the served certificate.
    pub fn set_trusted(&self, trusted: bool) {
        self.trusted.set(i64::from(trusted));
    }
}
