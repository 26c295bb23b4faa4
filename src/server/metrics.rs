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

pub use crate::server::budget_metrics::{BudgetMetrics, LaneLabels, ReasonLabels};

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
                    rule: violation.rule(),
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

// Leader election (`background::leader`).

/// Labels of a change of who runs the background controllers.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    /// acquired, lost or released.
    pub transition: &'static str,
}

/// The metrics of leader election.
#[derive(Debug, Clone)]
pub struct LeaderMetrics {
    /// 1 while this replica runs the background controllers.
    pub leader: Gauge,
    /// Changes, by transition.
    pub transitions: Family<TransitionLabels, Counter>,
    /// Failed calls about the Lease.
    pub lease_errors: Counter,
}

impl LeaderMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            leader: Gauge::default(),
            transitions: Family::default(),
            lease_errors: Counter::default(),
        };
        registry.register(
            "leader",
            "1 while this replica runs the background controllers (the stale-force sweeper): as the holder of the Lease, or always with --leader-elect=false; else 0",
            metrics.leader.clone(),
        );
        registry.register(
            "leader_transitions",
            "Times this replica started (acquired) or stopped (lost: the Lease went elsewhere or was not renewed in time; released: on shutdown) the background controllers",
            metrics.transitions.clone(),
        );
        registry.register(
            "leader_lease_errors",
            "Failed calls about the Lease (read, create, renew, release), each retried after --leader-elect-retry-period",
            metrics.lease_errors.clone(),
        );
        metrics
    }
}

// ---- Certificates managed by the webhook (`serve --manage-certs`) ----

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
    fn register(registry: &mut Registry) -> Self {
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

// ---- end of the certificate metrics ----

// The audit of stored rollouts into PolicyReports.

/// Labels of the audit's violations gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ViolationLabels {
    /// The namespace.
    pub namespace: String,
    /// The rule's name, as in the PolicyReports.
    pub rule: String,
    /// fail, warn or error.
    pub result: String,
}

/// The metrics of the audit (`background::audit`).
#[derive(Debug, Clone)]
pub struct AuditMetrics {
    /// Results that are not a pass, by namespace, rule and result.
    pub violations: Family<ViolationLabels, Gauge>,
    /// The label sets set last, so that those gone are removed.
    violation_labels: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<ViolationLabels>>>,
    /// When the last full audit ended, as a Unix timestamp.
    pub last_audit: Gauge,
    /// How long the last full audit took, in seconds.
    pub last_audit_duration: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Objects judged by the last full audit.
    pub audited_objects: Gauge,
    /// PolicyReport writes, by result (written, deleted, failed).
    pub report_writes: Family<ResultLabels, Counter>,
    /// Times the audit's watch failed and was restarted.
    pub watch_restarts: Counter,
}

impl AuditMetrics {
    fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            violations: Family::default(),
            violation_labels: std::sync::Arc::default(),
            last_audit: Gauge::default(),
            last_audit_duration: Gauge::default(),
            audited_objects: Gauge::default(),
            report_writes: Family::default(),
            watch_restarts: Counter::default(),
        };
        registry.register(
            "audit_violations",
            "Stored objects whose audit result is not a pass, by namespace, rule and result (fail, warn, error)",
            metrics.violations.clone(),
        );
        registry.register_with_unit(
            "audit_last_completed_timestamp",
            "When the last full audit of the stored objects ended, as a Unix timestamp",
            Unit::Seconds,
            metrics.last_audit.clone(),
        );
        registry.register_with_unit(
            "audit_last_duration",
            "How long the last full audit took to judge every stored object",
            Unit::Seconds,
            metrics.last_audit_duration.clone(),
        );
        registry.register(
            "audit_objects",
            "Stored objects judged by the last full audit",
            metrics.audited_objects.clone(),
        );
        registry.register(
            "audit_report_writes",
            "PolicyReport writes by the audit, by result (written, deleted, failed: retried with backoff)",
            metrics.report_writes.clone(),
        );
        registry.register(
            "audit_watch_restarts",
            "Times the audit's watch failed and was restarted with backoff",
            metrics.watch_restarts.clone(),
        );
        metrics
    }

    /// Puts `counts` in force, removing the label sets no longer there.
    pub fn set_violations(&self, counts: impl IntoIterator<Item = (ViolationLabels, i64)>) {
        let mut previous = match self.violation_labels.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut now = std::collections::HashSet::new();
        for (labels, count) in counts {
            self.violations.get_or_create(&labels).set(count);
            now.insert(labels);
        }
        for gone in previous.iter().filter(|l| !now.contains(l)) {
            self.violations.remove(gone);
        }
        *previous = now;
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
            namespace: ns.to_owned(),
            rule: "drain-timeout-range".to_owned(),
            result: "fail".to_owned(),
        };
        metrics
            .audit
            .set_violations([(labels("a"), 2), (labels("b"), 1)]);
        metrics.audit.set_violations([(labels("b"), 3)]);
        let text = metrics.encode();
        assert!(
            text.contains("pipelinerollout_webhook_audit_violations{namespace=\"b\",rule=\"drain-timeout-range\",result=\"fail\"} 3"),
            "{text}"
        );
        assert!(!text.contains("namespace=\"a\""), "{text}");
    }
}
