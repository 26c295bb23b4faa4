//! The label sets every counter family starts with, at zero. A series that
//! appears only with its first increment hides that increment from
//! `increase()` and `rate()` (Prometheus sees its first sample, 1, as the
//! start), so an alert on the first policy reload failure or the first
//! force after a restart would never fire. Families whose labels are known
//! in advance are exported from the start instead.

use crate::events::EventLabels;
use crate::policy::rules::{EventReason, Gate, GateResult};
use crate::server::metrics::{
    ConfigurationLabels, GateLabels, IssueLabels, LaneLabels, Metrics, OperationLabels,
    ReasonLabels, ResetLabels, ResultLabels, RuleLabels, StepLabels,
};

/// Every Event reason, for the Event counters.
const EVENT_REASONS: [EventReason; 5] = [
    EventReason::ForceReapplyAllowed,
    EventReason::ForcePromoteAllowed,
    EventReason::ForceReapplyDenied,
    EventReason::ForceReapplyReset,
    EventReason::ForcePromoteReset,
];

/// What can become of an Event (`events.rs`).
const EVENT_RESULTS: [&str; 5] = ["sent", "failed", "dropped", "unverified", "unguarded"];

/// Creates the known series of `metrics`' counter families at zero.
pub fn start_at_zero(metrics: &Metrics) {
    for gate in [
        Gate::ForceReapply,
        Gate::ForcePromote,
        Gate::DeleteUndrained,
    ] {
        for result in [
            GateResult::Allowed,
            GateResult::Denied,
            GateResult::WouldDeny,
        ] {
            metrics
                .gate_decisions
                .get_or_create(&GateLabels {
                    gate: gate.as_str(),
                    result: result.as_str(),
                })
                .inc_by(0);
        }
    }
    // Rule 0 (not judged) and the rules that deny (docs/rules.md).
    for rule in crate::policy::rules::Rule::denying().map(|r| r.number()) {
        metrics
            .denials
            .get_or_create(&RuleLabels { rule })
            .inc_by(0);
    }
    for result in ["success", "failure"] {
        metrics
            .policy_reloads
            .get_or_create(&ResultLabels { result })
            .inc_by(0);
        metrics
            .tls_reloads
            .get_or_create(&ResultLabels { result })
            .inc_by(0);
    }
    for result in ["allowed", "denied", "error"] {
        metrics
            .rbac_checks
            .get_or_create(&ResultLabels { result })
            .inc_by(0);
    }
    for by in ["mutate", "sweeper"] {
        metrics
            .force_resets
            .get_or_create(&ResetLabels { by })
            .inc_by(0);
    }
    for reason in EVENT_REASONS {
        for result in EVENT_RESULTS {
            metrics
                .events
                .get_or_create(&EventLabels {
                    reason: reason.as_str(),
                    result,
                })
                .inc_by(0);
        }
    }
    for reason in ["requests_in_flight", "body_budget"] {
        metrics
            .budget
            .refusals
            .get_or_create(&ReasonLabels { reason })
            .inc_by(0);
    }
    for result in ["written", "deleted", "failed"] {
        metrics
            .audit
            .report_writes
            .get_or_create(&ResultLabels { result })
            .inc_by(0);
    }
    for lane in ["small", "large"] {
        metrics
            .budget
            .waits
            .get_or_create(&LaneLabels { lane })
            .inc_by(0);
    }
    certificates_at_zero(metrics);
}

/// The certificate work's counters (`--manage-certs`; zero without it).
fn certificates_at_zero(metrics: &Metrics) {
    let certs = &metrics.certs;
    for kind in ["ca", "serving"] {
        for reason in ["initial", "rotation", "names", "invalid", "ca-switch"] {
            certs
                .issued
                .get_or_create(&IssueLabels { kind, reason })
                .inc_by(0);
        }
    }
    for step in ["started", "switched", "completed"] {
        certs
            .ca_rotations
            .get_or_create(&StepLabels { step })
            .inc_by(0);
    }
    for configuration in ["validating", "mutating"] {
        certs
            .bundle_updates
            .get_or_create(&ConfigurationLabels { configuration })
            .inc_by(0);
    }
    for operation in ["secret", "bundle", "watch", "issue"] {
        certs
            .errors
            .get_or_create(&OperationLabels { operation })
            .inc_by(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alerted_series_are_exported_before_anything_happens() {
        let text = Metrics::new().encode();
        for line in [
            "pipelinerollout_webhook_policy_reloads_total{result=\"failure\"} 0",
            "pipelinerollout_webhook_rbac_checks_total{result=\"error\"} 0",
            "pipelinerollout_webhook_force_decisions_total{gate=\"force-promote\",result=\"allowed\"} 0",
            "pipelinerollout_webhook_events_total{reason=\"ForceReapplyAllowed\",result=\"dropped\"} 0",
            "pipelinerollout_webhook_limit_refusals_total{reason=\"body_budget\"} 0",
            "pipelinerollout_webhook_force_resets_total{by=\"sweeper\"} 0",
            "pipelinerollout_webhook_force_decisions_total{gate=\"delete-undrained\",result=\"allowed\"} 0",
            "pipelinerollout_webhook_denials_total{rule=\"14\"} 0",
            "pipelinerollout_webhook_audit_report_writes_total{result=\"failed\"} 0",
            "pipelinerollout_webhook_certs_errors_total{operation=\"bundle\"} 0",
            "pipelinerollout_webhook_certs_issued_total{kind=\"serving\",reason=\"rotation\"} 0",
            "pipelinerollout_webhook_certs_ca_rotations_total{step=\"started\"} 0",
            "pipelinerollout_webhook_certs_ca_bundle_updates_total{configuration=\"mutating\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?}:\n{text}");
        }
    }
}
