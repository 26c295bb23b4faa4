//! The metrics of what the rules decided on answered requests: the broken
//! rules that denied, the gate decisions (forces), the most recent forces,
//! and the resets of the one-shot rule.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::{Registry, Unit};

use super::force_resets::{ForceResets, ResetBy};
use super::recent_forces::RecentForces;
use crate::admission::{AdmissionRequest, Reply};
use crate::policy::rules::{Gate, GateResult, Rule};

/// Labels of a force-reapply or force-promote decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GateLabels {
    /// force-reapply or force-promote.
    pub gate: &'static str,
    /// allowed, denied or would_deny.
    pub result: &'static str,
}

/// Labels of a denial: the rule broken (docs/rules.md; 0: the request
/// could not be judged).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: u8,
}

#[derive(Debug)]
pub struct DecisionMetrics {
    pub denials: Family<RuleLabels, Counter>,
    pub force_decisions: Family<GateLabels, Counter>,
    pub recent_forces: RecentForces,
    /// Stale forces reset (here: by the one-shot rule).
    resets: ForceResets,
}

impl DecisionMetrics {
    /// Registers the block, its known series at zero; the one-shot rule's
    /// resets count in `resets`.
    pub fn register(registry: &mut Registry, resets: ForceResets) -> Self {
        let metrics = Self {
            denials: Family::default(),
            force_decisions: Family::default(),
            recent_forces: RecentForces::default(),
            resets,
        };
        registry.register(
            "denials",
            "Broken rules that denied a request, by rule number (docs/rules.md; 0: the request could not be judged)",
            metrics.denials.clone(),
        );
        registry.register(
            "force_decisions",
            "Decisions on forcing a re-apply (allow-data-loss) or a promotion (forcePromote), by gate and result",
            metrics.force_decisions.clone(),
        );
        registry.register_with_unit(
            "force_decision_timestamp",
            "When a force was decided (not a dry run), by gate, result, PipelineRollout (rollout_namespace, rollout) and user; the most recent 64 of each result only",
            Unit::Seconds,
            metrics.recent_forces.family.clone(),
        );
        for gate in [
            Gate::ForceReapply,
            Gate::ForcePromote,
            Gate::DeleteUndrained,
            Gate::DeleteChild,
            Gate::DeleteRollout,
            Gate::NamespaceStrategy,
            Gate::EditChild,
            Gate::ControllerDefinitions,
        ] {
            for result in [
                GateResult::Allowed,
                GateResult::Denied,
                GateResult::WouldDeny,
            ] {
                metrics
                    .force_decisions
                    .get_or_create(&GateLabels {
                        gate: gate.as_str(),
                        result: result.as_str(),
                    })
                    .inc_by(0);
            }
        }
        // Rule 0 (not judged) and the rules that deny (docs/rules.md).
        for rule in Rule::denying().map(Rule::number) {
            metrics
                .denials
                .get_or_create(&RuleLabels { rule })
                .inc_by(0);
        }
        metrics
    }

    /// Records what one answered review decided: the reset of a stale
    /// force, the broken rules, the force gates.
    pub fn record_decision(&self, request: &AdmissionRequest, outcome: &Reply) {
        if outcome.verdict.reset_force && !request.dry_run {
            self.resets.record_reset(ResetBy::Mutate);
        }
        for violation in &outcome.verdict.denials {
            self.denials
                .get_or_create(&RuleLabels {
                    rule: violation.rule().number(),
                })
                .inc();
        }
        for (gate, result) in &outcome.verdict.gates {
            if !request.dry_run {
                self.recent_forces.record(
                    (gate.as_str(), result.as_str()),
                    &request.namespace,
                    &request.name,
                    request.user.username(),
                );
            }
            self.force_decisions
                .get_or_create(&GateLabels {
                    gate: gate.as_str(),
                    result: result.as_str(),
                })
                .inc();
        }
    }
}
