//! The metrics of the RBAC checks made for forces: results, cache hits,
//! durations.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::labels::{ResultLabels, duration_histogram, results_at_zero};
use crate::authz::RbacTrace;

#[derive(Debug, Clone)]
pub struct RbacMetrics {
    pub checks: Family<ResultLabels, Counter>,
    pub cache_hits: Counter,
    pub duration: Histogram,
}

impl RbacMetrics {
    /// Registers the block, its results at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            checks: Family::default(),
            cache_hits: Counter::default(),
            duration: duration_histogram(),
        };
        registry.register(
            "rbac_checks",
            "Force-reapply permission checks through RBAC, by result (allowed, denied, error)",
            metrics.checks.clone(),
        );
        registry.register(
            "rbac_cache_hits",
            "RBAC answers reused from the cache instead of a new SubjectAccessReview",
            metrics.cache_hits.clone(),
        );
        registry.register_with_unit(
            "rbac_check_duration",
            "Time an RBAC check took (cache hits included)",
            Unit::Seconds,
            metrics.duration.clone(),
        );
        results_at_zero(&metrics.checks, &["allowed", "denied", "error"]);
        metrics
    }

    pub fn record_check(&self, trace: &RbacTrace) {
        self.checks
            .get_or_create(&ResultLabels {
                result: trace.result,
            })
            .inc();
        if trace.cached {
            self.cache_hits.inc();
        }
        self.duration.observe(trace.duration.as_secs_f64());
    }
}
