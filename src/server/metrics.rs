//! Prometheus metrics, all named `pipelinerollout_webhook_*`, served in the
//! OpenMetrics text format on the admin port.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::admission::{AdmissionRequest, Outcome};
use crate::events::EventCounts;
use crate::server::recent_forces::RecentForces;

pub use crate::server::audit_metrics::{AuditMetrics, ViolationLabels};
pub use crate::server::budget_metrics::{BudgetMetrics, LaneLabels, ReasonLabels};
pub use crate::server::cert_metrics::{
    CertMetrics, ConfigurationLabels, IssueLabels, OperationLabels, StepLabels,
};
pub use crate::server::leader_metrics::{LeaderMetrics, TransitionLabels};

/// The Content-Type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Request-duration buckets, in seconds: fine below a millisecond, where
/// answers should be, and up to the API server's longest timeout.
const DURATION_BUCKETS: [f64; 17] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// Labels of a served request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// validate, mutate, or other (unknown paths).
    pub webhook: &'static str,
    /// CREATE, UPDATE, DELETE, CONNECT, or "" when unknown.
    pub operation: &'static str,
    /// allowed, denied or error.
    pub result: &'static str,
    /// The HTTP status code.
    pub code: u16,
}

/// Labels of a request-duration observation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// validate, mutate or other.
    pub webhook: &'static str,
}

/// Labels of a force-reapply or force-promote decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateLabels {
    /// force-reapply or force-promote.
    pub gate: &'static str,
    /// allowed, denied or would_deny.
    pub result: &'static str,
}

/// Labels of a reload (success or failure) or of an RBAC check (allowed,
/// denied or error).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The result.
    pub result: &'static str,
}

/// Labels of a denial: the rule broken (docs/rules.md; 0: the request
/// could not be judged).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    /// The rule's number.
    pub rule: u8,
}

/// Labels of a stale-force reset: who reset it.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResetLabels {
    /// mutate (the one-shot rule) or sweeper.
    pub by: &'static str,
}

pub(crate) fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Every metric the webhook exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests served.
    pub requests: Family<RequestLabels, Counter>,
    /// How long requests took.
    pub request_duration: Family<WebhookLabels, Histogram, fn() -> Histogram>,
    /// Requests being served now.
    pub in_flight: Gauge,
    /// Broken rules that denied a request, by rule.
    pub denials: Family<RuleLabels, Counter>,
    /// Force-reapply and force-promote decisions.
    pub gate_decisions: Family<GateLabels, Counter>,
    /// Policy reloads.
    pub policy_reloads: Family<ResultLabels, Counter>,
    /// Generation of the policy in force (1 at start, +1 per successful reload).
    pub policy_generation: Gauge,
    /// TLS reloads.
    pub tls_reloads: Family<ResultLabels, Counter>,
    /// The serving certificate's notAfter, as a Unix timestamp.
    pub certificate_expiry: Gauge,
    /// RBAC checks (SubjectAccessReviews or cached answers), by result.
    pub rbac_checks: Family<ResultLabels, Counter>,
    /// RBAC answers served from the cache.
    pub rbac_cache_hits: Counter,
    /// How long RBAC checks took.
    pub rbac_duration: Histogram,
    /// Kubernetes Events, by reason and result.
    pub events: EventCounts,
    /// Stale forces reset, by who reset them.
    pub force_resets: Family<ResetLabels, Counter>,
    /// Sweeper resets that lost to a concurrent change (looked at again).
    pub sweeper_conflicts: Counter,
    /// Sweeper resets that failed for another reason.
    pub sweeper_errors: Counter,
    /// Times the sweeper's watch failed and was restarted.
    pub sweeper_watch_restarts: Counter,
    /// The body budget and the request limit.
    pub budget: BudgetMetrics,
    /// Leader election.
    pub leader: LeaderMetrics,
    /// Log lines dropped because the log buffer was full or their write failed.
    pub log_lines_dropped: Counter,
    /// The most recent force decisions: when, by whom, on which rollout.
    pub recent_forces: RecentForces,
    /// The certificates of `--manage-certs`.
    pub certs: CertMetrics,
    /// The audit of stored rollouts.
    pub audit: AuditMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric, with a `log_lines_dropped`
    /// counter of its own (nothing drops log lines into it).
    pub fn new() -> Self {
        Self::with_log_lines_dropped(Counter::default())
    }

    /// Creates and registers every metric; `log_lines_dropped` reports
    /// `log_lines_dropped`, the log sink's own counter.
    pub fn with_log_lines_dropped(log_lines_dropped: Counter) -> Self {
        let mut registry = Registry::with_prefix("pipelinerollout_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        let request_duration =
            Family::<WebhookLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram as fn() -> Histogram,
            );
        let in_flight = Gauge::default();
        let gate_decisions = Family::<GateLabels, Counter>::default();
        let denials = Family::<RuleLabels, Counter>::default();
        let policy_reloads = Family::<ResultLabels, Counter>::default();
        let policy_generation = Gauge::default();
        let tls_reloads = Family::<ResultLabels, Counter>::default();
        let certificate_expiry = Gauge::default();
        let rbac_checks = Family::<ResultLabels, Counter>::default();
        let rbac_cache_hits = Counter::default();
        let rbac_duration = duration_histogram();
        let events = EventCounts::default();
        let force_resets = Family::<ResetLabels, Counter>::default();
        let sweeper_conflicts = Counter::default();
        let sweeper_errors = Counter::default();
        let sweeper_watch_restarts = Counter::default();
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because the log buffer was full or their write failed (requests never wait for the log)",
            log_lines_dropped.clone(),
        );
        registry.register(
            "events",
            "Kubernetes Events on PipelineRollouts, by reason and result (sent, failed, dropped)",
            events.clone(),
        );
        registry.register(
            "force_resets",
            "allow-data-loss annotations reset to \"false\" once the force was over, by who reset them (mutate, sweeper)",
            force_resets.clone(),
        );
        registry.register(
            "sweeper_conflicts",
            "Sweeper resets refused because the object changed since it was seen (it is looked at again)",
            sweeper_conflicts.clone(),
        );
        registry.register(
            "sweeper_errors",
            "Sweeper resets that failed for a reason other than a conflict",
            sweeper_errors.clone(),
        );
        registry.register(
            "sweeper_watch_restarts",
            "Times the sweeper's watch of PipelineRollouts failed and was restarted with backoff",
            sweeper_watch_restarts.clone(),
        );
        registry.register(
            "requests",
            "Admission requests answered, by webhook, operation, result (allowed, denied, error) and HTTP code",
            requests.clone(),
        );
        registry.register_with_unit(
            "request_duration",
            "Time from a request's headers to its answer",
            Unit::Seconds,
            request_duration.clone(),
        );
        registry.register(
            "requests_in_flight",
            "Requests being answered now",
            in_flight.clone(),
        );
        registry.register(
            "denials",
            "Broken rules that denied a request, by rule number (docs/rules.md; 0: the request could not be judged)",
            denials.clone(),
        );
        registry.register(
            "force_decisions",
            "Decisions on forcing a re-apply (allow-data-loss) or a promotion (forcePromote), by gate and result",
            gate_decisions.clone(),
        );
        registry.register(
            "policy_reloads",
            "Policy file reloads, by result",
            policy_reloads.clone(),
        );
        registry.register(
            "policy_generation",
            "Generation of the policy in force: 1 at start, one more per successful reload",
            policy_generation.clone(),
        );
        registry.register(
            "tls_reloads",
            "Certificate reloads, by result",
            tls_reloads.clone(),
        );
        registry.register_with_unit(
            "tls_certificate_expiry_timestamp",
            "When the serving certificate expires (notAfter), as a Unix timestamp",
            Unit::Seconds,
            certificate_expiry.clone(),
        );
        registry.register(
            "rbac_checks",
            "Force-reapply permission checks through RBAC, by result (allowed, denied, error)",
            rbac_checks.clone(),
        );
        registry.register(
            "rbac_cache_hits",
            "RBAC answers reused from the cache instead of a new SubjectAccessReview",
            rbac_cache_hits.clone(),
        );
        registry.register_with_unit(
            "rbac_check_duration",
            "Time an RBAC check took (cache hits included)",
            Unit::Seconds,
            rbac_duration.clone(),
        );
        let budget = BudgetMetrics::register(&mut registry);
        let audit = AuditMetrics::register(&mut registry);
        let certs = CertMetrics::register(&mut registry);
        let leader = LeaderMetrics::register(&mut registry);
        let recent_forces = RecentForces::default();
        registry.register_with_unit(
            "force_decision_timestamp",
            "When a force was decided (not a dry run), by gate, result, PipelineRollout (rollout_namespace, rollout) and user; the most recent 64 of each result only",
            Unit::Seconds,
            recent_forces.family.clone(),
        );
        let metrics = Self {
            registry,
            requests,
            request_duration,
            in_flight,
            denials,
            gate_decisions,
            policy_reloads,
            policy_generation,
            tls_reloads,
            certificate_expiry,
            rbac_checks,
            rbac_cache_hits,
            rbac_duration,
            events,
            force_resets,
            sweeper_conflicts,
            sweeper_errors,
            sweeper_watch_restarts,
            budget,
            leader,
            log_lines_dropped,
            audit,
            certs,
            recent_forces,
        };
        super::metric_series::start_at_zero(&metrics);
        metrics
    }

    /// Records what one answered review decided: the force gates, and the
    /// RBAC check made for it.
    pub fn record(&self, request: &AdmissionRequest, outcome: &Outcome) {
        if outcome.decision.reset_force && !request.dry_run {
            self.force_resets
                .get_or_create(&ResetLabels { by: "mutate" })
                .inc();
        }
        for violation in &outcome.decision.denials {
            self.denials
                .get_or_create(&RuleLabels {
                    rule: violation.rule().number(),
                })
                .inc();
        }
        for (gate, result) in &outcome.decision.gates {
            if !request.dry_run {
                self.recent_forces.record(
                    (gate.as_str(), result.as_str()),
                    &request.namespace,
                    &request.name,
                    request.user.username(),
                );
            }
            self.gate_decisions
                .get_or_create(&GateLabels {
                    gate: gate.as_str(),
                    result: result.as_str(),
                })
                .inc();
        }
        if let Some(trace) = outcome.rbac {
            self.rbac_checks
                .get_or_create(&ResultLabels {
                    result: trace.result,
                })
                .inc();
            if trace.cached {
                self.rbac_cache_hits.inc();
            }
            self.rbac_duration.observe(trace.duration.as_secs_f64());
        }
    }

    /// Counts a reload of the policy (`policy`) or of the TLS files.
    pub fn count_reload(family: &Family<ResultLabels, Counter>, ok: bool) {
        let result = if ok { "success" } else { "failure" };
        family.get_or_create(&ResultLabels { result }).inc();
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String does not fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_log_lines_are_exported_from_the_start() {
        let text = Metrics::new().encode();
        assert!(
            text.lines()
                .any(|l| l == "pipelinerollout_webhook_log_lines_dropped_total 0"),
            "{text}"
        );
    }

    #[test]
    fn audit_violations_that_are_gone_leave_the_gauge() {
        let metrics = Metrics::new();
        let labels = |ns: &str| ViolationLabels {
            rollout_namespace: ns.to_owned(),
            rule: "drain-timeout-range".to_owned(),
            result: "fail".to_owned(),
        };
        metrics
            .audit
            .set_violations([(labels("a"), 2), (labels("b"), 1)]);
        metrics.audit.set_violations([(labels("b"), 3)]);
        let text = metrics.encode();
        assert!(
            text.contains("pipelinerollout_webhook_audit_violations{rollout_namespace=\"b\",rule=\"drain-timeout-range\",result=\"fail\"} 3"),
            "{text}"
        );
        assert!(!text.contains("namespace=\"a\""), "{text}");
        assert!(
            text.contains("pipelinerollout_webhook_audit_results{result=\"fail\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("pipelinerollout_webhook_audit_results{result=\"warn\"} 0"),
            "{text}"
        );
    }
}
