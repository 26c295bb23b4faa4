//! Prometheus metrics, all named `pipelinerollout_webhook_*`, served in the
//! OpenMetrics text format on the admin port.
//!
//! One file per block, each owned by the component it counts: it
//! registers itself in the registry, creates the series whose labels are
//! known in advance at zero, and is fed through domain methods
//! (`record_transition(transition)`, `record_audit(event)`) or, for a plain
//! counter, its `inc()`. A series that appears only with its first
//! increment hides that increment from `increase()` and `rate()`
//! (Prometheus sees its first sample, 1, as the start), so an alert on the
//! first policy reload failure or the first force after a restart would
//! never fire; hence the zeroed series.
//!
//! The blocks import only [`labels`] and what they count, never this file
//! or each other (the reset counter aside, which two blocks share).

pub mod audit;
pub mod bookkeeping;
pub mod budget;
pub mod certificates;
pub mod decisions;
pub mod events;
pub mod force_resets;
pub mod labels;
pub mod leader;
pub mod rbac;
pub mod recent_forces;
pub mod reloads;
pub mod requests;
pub mod sweeper;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

use self::audit::AuditMetrics;
use self::bookkeeping::BookkeepingRefusals;
use self::budget::BudgetMetrics;
use self::certificates::CertMetrics;
use self::decisions::DecisionMetrics;
use self::force_resets::ForceResets;
use self::leader::LeaderMetrics;
use self::rbac::RbacMetrics;
use self::reloads::ReloadMetrics;
use self::requests::RequestMetrics;
use self::sweeper::SweeperMetrics;
use crate::admission::{AdmissionRequest, Reply};
use crate::events::EventCounts;

/// The Content-Type of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every metric the webhook exports, block by block.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub requests: RequestMetrics,
    pub decisions: DecisionMetrics,
    pub bookkeeping: BookkeepingRefusals,
    pub rbac: RbacMetrics,
    pub reloads: ReloadMetrics,
    pub events: EventCounts,
    pub sweeper: SweeperMetrics,
    pub budget: BudgetMetrics,
    pub leader: LeaderMetrics,
    pub certificates: CertMetrics,
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
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because the log buffer was full or their write failed (requests never wait for the log)",
            log_lines_dropped,
        );
        let events = events::register(&mut registry);
        let resets = ForceResets::register(&mut registry);
        let sweeper = SweeperMetrics::register(&mut registry, resets.clone());
        let requests = RequestMetrics::register(&mut registry);
        let decisions = DecisionMetrics::register(&mut registry, resets);
        let reloads = ReloadMetrics::register(&mut registry);
        let rbac = RbacMetrics::register(&mut registry);
        let bookkeeping = BookkeepingRefusals::register(&mut registry);
        let budget = BudgetMetrics::register(&mut registry);
        let audit = AuditMetrics::register(&mut registry);
        let certificates = CertMetrics::register(&mut registry);
        let leader = LeaderMetrics::register(&mut registry);
        Self {
            registry,
            requests,
            decisions,
            bookkeeping,
            rbac,
            reloads,
            events,
            sweeper,
            budget,
            leader,
            certificates,
            audit,
        }
    }

    /// Records what one answered review decided, and the RBAC check made
    /// for it.
    pub fn record_answer(&self, request: &AdmissionRequest, outcome: &Reply) {
        self.decisions.record_decision(request, outcome);
        if let Some(kind) = request.kind().filter(|_| !request.dry_run) {
            self.bookkeeping.record(kind, &outcome.verdict.denials);
        }
        if let Some(trace) = &outcome.rbac {
            self.rbac.record_check(trace);
        }
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
    use super::audit::ViolationLabels;
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
    fn the_alerted_series_are_exported_before_anything_happens() {
        let text = Metrics::new().encode();
        for line in [
            "pipelinerollout_webhook_policy_reloads_total{result=\"failure\"} 0",
            "pipelinerollout_webhook_rbac_checks_total{result=\"error\"} 0",
            "pipelinerollout_webhook_force_decisions_total{gate=\"force-promote\",result=\"allowed\"} 0",
            "pipelinerollout_webhook_events_total{reason=\"ForceReapplyAllowed\",result=\"dropped\"} 0",
            "pipelinerollout_webhook_events_total{reason=\"DeleteUndrainedDenied\",result=\"failed\"} 0",
            "pipelinerollout_webhook_events_total{reason=\"NamespaceStrategyAllowed\",result=\"dropped\"} 0",
            "pipelinerollout_webhook_events_total{reason=\"NamespaceStrategyDenied\",result=\"failed\"} 0",
            "pipelinerollout_webhook_limit_refusals_total{reason=\"body_budget\"} 0",
            "pipelinerollout_webhook_force_resets_total{by=\"sweeper\"} 0",
            "pipelinerollout_webhook_force_decisions_total{gate=\"delete-undrained\",result=\"allowed\"} 0",
            "pipelinerollout_webhook_denials_total{rule=\"14\"} 0",
            "pipelinerollout_webhook_bookkeeping_refusals_total{kind=\"Pipeline\",controller_namespace=\"true\"} 0",
            "pipelinerollout_webhook_audit_report_writes_total{result=\"failed\"} 0",
            "pipelinerollout_webhook_certs_errors_total{operation=\"bundle\"} 0",
            "pipelinerollout_webhook_certs_issued_total{kind=\"serving\",reason=\"rotation\"} 0",
            "pipelinerollout_webhook_certs_ca_rotations_total{step=\"started\"} 0",
            "pipelinerollout_webhook_certs_ca_bundle_updates_total{configuration=\"mutating\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?}:\n{text}");
        }
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
