//! Rules 20 and 21: deletes that drain for at most a deletion timeout.
//!
//! - Rule 20: a DELETE of a Pipeline, MonoVertex or InterStepBufferService
//!   that a rollout owns (label `numaplane.numaproj.io/parent-rollout-name`)
//!   ends its drain after its deletion timeout, as `marked-for-deletion`
//!   does at once: it needs the `forceReapply.deleteUndrained` permission,
//!   except for Numaplane's controller and Kubernetes' own deleters
//!   (`forceReapply.deleteUndrained.systemDeleters`). A child without the
//!   label is no rollout's: allowed.
//! - Rule 21: a DELETE of a PipelineRollout makes Numaplane delete its
//!   Pipelines, each drained for at most its deletion timeout: allowed with
//!   a warning naming that timeout, and with
//!   `forceReapply.deleteUndrained.gateRolloutDeletes` it needs the
//!   permission too.
//!
//! Both judge the stored object (a DELETE's `object`); dry runs are
//! judged like any other request.

use serde_json::Value;

use super::force::record_gate;
use super::guarded_write::GuardedWrite;
use super::verdict::{EventReason, ForceEvent, Gate, Verdict};
use super::violation::{Violation, cut};
use crate::kinds::{Kind, PARENT_ROLLOUT};
use crate::policy::model::{Mode, Policy};
use crate::policy::user::Permission;

/// What rules 20 and 21 ask of a DELETE, worked out once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct DeleteGates {
    /// Rule 20 applies: an owned child deleted by an account the policy
    /// does not exempt; the owning rollout's name.
    child_of: Option<String>,
    /// Rule 20 does not apply: why (an exempt account's role, or no
    /// owner), for the audit annotation.
    exempt: Option<&'static str>,
    /// Rule 21 applies: a PipelineRollout deleted; what its Pipeline's
    /// deletion timeout is, in words.
    rollout: Option<String>,
    /// Rule 21 needs the permission (gateRolloutDeletes).
    rollout_gated: bool,
}

/// The owning rollout's name of a child (its parent-rollout-name label).
/// Labels that cannot be read may hide the label: judged as owned, so a
/// stored object of a wrong shape never lets a delete through unasked.
fn owner<'a>(write: &'a GuardedWrite<'_>) -> Option<&'a str> {
    if let Some(("metadata" | "metadata.labels", _)) = write.object.malformed_metadata() {
        return Some("(its labels cannot be read)");
    }
    match write.object.label(PARENT_ROLLOUT) {
        Some(Value::String(name)) => Some(name),
        // A label value is a string; anything else still names an owner.
        Some(_) => Some("?"),
        None => None,
    }
}

impl DeleteGates {
    /// Works out which of rules 20 and 21 a request meets.
    pub(crate) fn of(policy: &Policy, write: &GuardedWrite<'_>) -> Self {
        if !write.is_delete() {
            return Self::default();
        }
        let user = write.user.username();
        let system = policy.is_system_deleter(user);
        if write.kind == Kind::PipelineRollout {
            // The namespace controller deleting a namespace is not gated.
            return Self {
                rollout: Some(write.object.deletion_timeout().to_string()),
                rollout_gated: policy
                    .force_reapply
                    .delete_undrained
                    .own
                    .gate_rollout_deletes
                    && !system,
                ..Self::default()
            };
        }
        if !write.kind.is_child() {
            return Self::default();
        }
        let Some(parent) = owner(write) else {
            return Self {
                exempt: Some(
                    "no numaplane.numaproj.io/parent-rollout-name label: no rollout owns it",
                ),
                ..Self::default()
            };
        };
        if user == policy.numaplane.controller_account {
            return Self {
                exempt: Some("numaplane.controllerAccount (it deletes the children it made)"),
                ..Self::default()
            };
        }
        if system {
            return Self {
                exempt: Some(
                    "listed in forceReapply.deleteUndrained.systemDeleters (it deletes children as their owner or namespace is deleted)",
                ),
                ..Self::default()
            };
        }
        Self {
            child_of: Some(parent.to_owned()),
            ..Self::default()
        }
    }

    /// Whether a gate needs the deleteUndrained permission.
    pub(crate) fn need_undrained_permission(&self) -> bool {
        self.child_of.is_some() || (self.rollout.is_some() && self.rollout_gated)
    }

    /// Rules 20 and 21: records each gate's decision (Event, audit
    /// annotation, metric label), its denial and rule 21's warning.
    pub(crate) fn judge(
        &self,
        verdict: &mut Verdict,
        policy: &Policy,
        write: &GuardedWrite<'_>,
        undrained: &Permission,
    ) {
        let user = write.user.username();
        let kind = write.kind;
        if let Some(role) = self.exempt {
            verdict.audit.insert(
                Gate::DeleteChild.as_str().to_owned(),
                format!("allowed: user \"{}\", {role}", cut(user, 64)),
            );
        }
        if let Some(parent) = &self.child_of {
            let outcome = undrained
                .outcome()
                .map_err(|refused| Violation::ChildDeleteDenied {
                    user: user.to_owned(),
                    kind: kind.kind(),
                    rollout: kind.rollout().kind(),
                    parent: cut(parent, 64),
                    refused,
                });
            let what = format!(
                "deleted this {} of {} \"{}\" (drained for at most its deletion timeout)",
                kind.kind(),
                kind.rollout().kind(),
                cut(parent, 64)
            );
            gate(
                verdict,
                policy.mode,
                Gate::DeleteChild,
                user,
                undrained,
                &what,
                outcome,
            );
        }
        if let Some(timeout) = &self.rollout {
            let what = format!("deleted this PipelineRollout (its Pipelines drained {timeout})");
            if self.rollout_gated {
                let outcome =
                    undrained
                        .outcome()
                        .map_err(|refused| Violation::RolloutDeleteDenied {
                            user: user.to_owned(),
                            timeout: timeout.clone(),
                            refused,
                        });
                gate(
                    verdict,
                    policy.mode,
                    Gate::DeleteRollout,
                    user,
                    undrained,
                    &what,
                    outcome,
                );
            }
            let refused = self.rollout_gated && undrained.outcome().is_err();
            if !refused || policy.mode == Mode::Warn {
                verdict.warnings.push(format!(
                    "its Pipelines are deleted too, each drained {timeout}, then undrained data is lost"
                ));
            }
        }
    }
}

/// Records one delete gate's decision: its Event (allowed, warn mode
/// included; or refused: the object is stored, so it can carry one), its
/// audit annotation and metric label, and its denial.
fn gate(
    verdict: &mut Verdict,
    mode: Mode,
    gate: Gate,
    user: &str,
    permission: &Permission,
    what: &str,
    outcome: Result<(), Violation>,
) {
    let who = cut(user, 64);
    let event = match (&outcome, mode) {
        (Ok(()), _) => ForceEvent {
            reason: EventReason::DeleteUndrainedAllowed,
            note: cut(
                &format!(
                    "allowed by the admission webhook: user \"{who}\" {what}; data still in flight may be lost"
                ),
                1000,
            ),
        },
        (Err(v), Mode::Warn) => ForceEvent {
            reason: EventReason::DeleteUndrainedAllowed,
            note: cut(
                &format!(
                    "allowed by the admission webhook in warn mode (enforce would deny: {}): user \"{who}\" {what}",
                    v.summary()
                ),
                1000,
            ),
        },
        (Err(v), Mode::Enforce) => ForceEvent {
            reason: EventReason::DeleteUndrainedDenied,
            note: cut(&format!("refused by the admission webhook: {v}"), 1000),
        },
    };
    verdict.events.push(event);
    record_gate(verdict, mode, gate, user, permission, outcome);
}
