//! The metrics of the files the server reloads: the policy (its reloads
//! and the generation in force) and the serving certificate (its reloads
//! and its expiry).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{ResultLabels, results_at_zero};

#[derive(Debug, Clone)]
pub struct ReloadMetrics {
    pub policy_reloads: Family<ResultLabels, Counter>,
    pub policy_generation: Gauge,
    pub tls_reloads: Family<ResultLabels, Counter>,
    pub certificate_expiry: Gauge,
}

fn result(ok: bool) -> ResultLabels {
    ResultLabels {
        result: if ok { "success" } else { "failure" },
    }
}

impl ReloadMetrics {
    /// Registers the block, both results of each reload at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            policy_reloads: Family::default(),
            policy_generation: Gauge::default(),
            tls_reloads: Family::default(),
            certificate_expiry: Gauge::default(),
        };
        registry.register(
            "policy_reloads",
            "Policy file reloads, by result",
            metrics.policy_reloads.clone(),
        );
        registry.register(
            "policy_generation",
            "Generation of the policy in force: 1 at start, one more per successful reload",
            metrics.policy_generation.clone(),
        );
        registry.register(
            "tls_reloads",
            "Certificate reloads, by result",
            metrics.tls_reloads.clone(),
        );
        registry.register_with_unit(
            "tls_certificate_expiry_timestamp",
            "When the serving certificate expires (notAfter), as a Unix timestamp",
            Unit::Seconds,
            metrics.certificate_expiry.clone(),
        );
        for family in [&metrics.policy_reloads, &metrics.tls_reloads] {
            results_at_zero(family, &["success", "failure"]);
        }
        metrics
    }

    /// Counts one reload of the policy file; a successful one puts the
    /// next generation in force, which it returns.
    pub fn record_policy_reload(&self, ok: bool) -> i64 {
        if ok {
            self.policy_generation.inc();
        }
        self.policy_reloads.get_or_create(&result(ok)).inc();
        self.policy_generation.get()
    }

    /// Counts one reload of the certificate files.
    pub fn record_tls_reload(&self, ok: bool) {
        self.tls_reloads.get_or_create(&result(ok)).inc();
    }

    /// The served certificate's notAfter (Unix seconds).
    pub fn set_certificate_expiry(&self, not_after: i64) {
        self.certificate_expiry.set(not_after);
    }
}
