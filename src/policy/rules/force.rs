//! Rules 5 to 7 and 11: the `allow-data-loss` annotation's value, who may
//! force a re-apply or a promotion and when, and a force left on.

use super::decision::{Decision, Finding, Gate, GateResult};
use super::review::{Operation, Review};
use super::violation::{NotPausing, Violation, show};
use crate::policy::model::{Mode, Policy};
use crate::policy::user::Permission;

/// Rule 5's first half: `metadata` and its annotations must be objects.
pub fn metadata_finding(review: &Review<'_>) -> Option<Finding> {
    let (path, kind) = review.object.malformed_metadata()?;
    let unchanged = review
        .old()
        .is_some_and(|o| o.malformed_metadata() == Some((path, kind)));
    Some(Finding {
        violation: Violation::MetadataMalformed { path, found: kind },
        unchanged,
    })
}

/// Rule 5: the annotation, when present, is exactly "true" or "false".
pub fn annotation_finding(review: &Review<'_>) -> Option<Finding> {
    let value = review
        .object
        .allow_data_loss()
        .filter(|v| v.as_str() != Some("true") && v.as_str() != Some("false"))?;
    let unchanged = review
        .old()
        .is_some_and(|o| o.allow_data_loss() == Some(value));
    Some(Finding {
        violation: Violation::AnnotationInvalid { value: show(value) },
        unchanged,
    })
}

/// What rules 6 and 7 ask of a request, worked out once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForceGates {
    /// Rule 6 applies: the annotation becomes "true".
    pub reapply: bool,
    /// Rule 7 applies: forcePromote is turned on and the policy gates it.
    pub promote: bool,
    /// Why rule 6's pause condition fails, when it applies and fails.
    pub not_pausing: Option<NotPausing>,
    /// Whether the stored object says its pipeline is pausing.
    pub pausing: bool,
}

impl ForceGates {
    /// Works out which gates a request meets.
    pub fn of(policy: &Policy, review: &Review<'_>) -> Self {
        let reapply = review.annotation_becomes_true();
        let pausing = review.old_is_pausing();
        let not_pausing = match (
            reapply && policy.force_reapply.require_pausing,
            review.operation,
            pausing,
        ) {
            (false, _, _) | (true, Operation::Update, true) => None,
            (true, Operation::Create, _) => Some(NotPausing::NewObject),
            (true, Operation::Update, false) => Some(NotPausing::Idle),
        };
        Self {
            reapply,
            promote: policy.force_reapply.gate_force_promote && review.force_promote_turned_on(),
            not_pausing,
            pausing,
        }
    }

    /// Whether either gate needs the requester's permission.
    pub fn need_permission(&self) -> bool {
        self.reapply || self.promote
    }
}

/// Rules 6 and 7: records each gate's decision (audit annotation, metric
/// label) and its denial.
pub fn judge_gates(
    decision: &mut Decision,
    policy: &Policy,
    review: &Review<'_>,
    gates: ForceGates,
    permission: &Permission,
) {
    let user = review.user.username();
    let refused = match permission {
        Permission::Granted(_) => None,
        Permission::Refused(why) => Some(why.clone()),
        Permission::NotNeeded => Some("its permission was not checked".to_owned()),
    };
    if gates.reapply {
        let outcome = if refused.is_none() && gates.not_pausing.is_none() {
            Ok(())
        } else {
            Err(Violation::ForceReapplyDenied {
                user: user.to_owned(),
                refused: refused.clone(),
                not_pausing: gates.not_pausing,
            })
        };
        record_gate(
            decision,
            policy.mode,
            Gate::ForceReapply,
            user,
            permission,
            outcome,
        );
    }
    if gates.promote {
        let outcome = match &refused {
            None => Ok(()),
            Some(why) => Err(Violation::ForcePromoteDenied {
                user: user.to_owned(),
                refused: why.clone(),
            }),
        };
        record_gate(
            decision,
            policy.mode,
            Gate::ForcePromote,
            user,
            permission,
            outcome,
        );
    }
}

/// Rule 11: the annotation left at "true" after the force is over.
pub fn stale_force_warning(review: &Review<'_>, gates: ForceGates) -> Option<String> {
    let stale = review.object.forces_reapply()
        && review
            .old()
            .is_some_and(crate::rollout::PipelineRollout::forces_reapply)
        && !gates.pausing;
    stale.then(|| {
        "allow-data-loss is still \"true\" and nothing is pausing: this change applies without draining; set it to \"false\""
            .to_owned()
    })
}

/// Records a rule 6 or 7 decision: the audit annotation, and the denial.
fn record_gate(
    decision: &mut Decision,
    mode: Mode,
    gate: Gate,
    user: &str,
    permission: &Permission,
    outcome: Result<(), Violation>,
) {
    let (result, text) = match (&outcome, mode) {
        (Ok(()), _) => {
            let how = match permission {
                Permission::Granted(how) => how.as_str(),
                _ => "permission not needed",
            };
            (
                GateResult::Allowed,
                format!("allowed: user \"{user}\", {how}"),
            )
        }
        (Err(v), Mode::Enforce) => (
            GateResult::Denied,
            format!("denied by rule {}: user \"{user}\"", v.rule()),
        ),
        (Err(v), Mode::Warn) => (
            GateResult::WouldDeny,
            format!(
                "would-deny by rule {} (warn mode): user \"{user}\"",
                v.rule()
            ),
        ),
    };
    decision.audit.insert(gate.as_str().to_owned(), text);
    decision.gates.push((gate, result));
    if let Err(v) = outcome {
        decision.denials.push(v);
    }
}
