//! Rules 13 to 15: Numaplane's keys on its children (Pipeline, MonoVertex,
//! InterStepBufferService) and in the child template of each rollout
//! (`spec.pipeline.metadata`, `spec.monoVertex.metadata`,
//! `spec.interStepBufferService.metadata`), which Numaplane copies onto
//! every child it makes, as its own account.
//!
//! - Rule 13: the `force-promote` label skips the progressive assessment.
//!   Numaplane acts on its presence, so a value other than "true" is
//!   denied as misleading; setting it needs the forceReapply permission,
//!   and on a child an upgrade in progress (`in-progress` or `trial`).
//! - Rule 14: `marked-for-deletion: "true"` deletes a recyclable Pipeline
//!   without draining; it needs the `forceReapply.deleteUndrained`
//!   permission, and on a Pipeline a `recyclable` or `recyclable-expired` one.
//! - Rule 15: Numaplane's bookkeeping keys (the upgrade state above all,
//!   which rules 13 and 14 read) are changed by its controller only.
//!
//! The controller's own writes of children are not judged: what they carry
//! comes from a rollout, which was judged when it was written. A key that
//! an UPDATE leaves as it was is not judged again (ratcheting).

use serde_json::Value;

use super::force::Settle;
use super::guarded_write::{GuardedWrite, Operation};
use super::rule::Rule;
use super::verdict::{EventReason, Finding, Gate, StoredState, Verdict};
use super::violation::{NotActable, Violation, cut, show};
use crate::kinds::{
    BOOKKEEPING_ANNOTATIONS, BOOKKEEPING_LABELS, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION,
    PROMOTABLE_STATES, RECYCLABLE_STATES, UPGRADE_STATE,
};
use crate::policy::model::Policy;
use crate::policy::user::Permission;
use crate::rollout::{GuardedObject, Map};

/// Whether the write is the Numaplane controller's own.
fn by_controller(policy: &Policy, write: &GuardedWrite<'_>) -> bool {
    write.user.username() == policy.numaplane.controller_account
}

/// The controller's writes of children are not judged by rules 13 to 15.
fn exempt(policy: &Policy, write: &GuardedWrite<'_>) -> bool {
    write.kind.is_child() && by_controller(policy, write)
}

/// The label map and the annotation map the rules read on `kind`: a
/// child's own, or a rollout's child template.
fn maps(kind: Kind) -> (Map, Map) {
    if kind.is_child() {
        (Map::Labels, Map::Annotations)
    } else {
        (Map::TemplateLabels, Map::TemplateAnnotations)
    }
}

/// The value of `key` in `map`, in the object and in the stored object.
fn values<'a>(
    write: &'a GuardedWrite<'_>,
    map: Map,
    key: &str,
) -> (Option<&'a Value>, Option<&'a Value>) {
    let new = write.object.key_in(write.kind, map, key);
    let old = write.old().and_then(|o| o.key_in(write.kind, map, key));
    (new, old)
}

/// The force-promote label, when the write adds it or changes its value.
fn promote_label<'a>(write: &'a GuardedWrite<'_>) -> Option<(Map, &'a Value)> {
    let (labels, _) = maps(write.kind);
    match values(write, labels, FORCE_PROMOTE_LABEL) {
        (Some(new), old) if old != Some(new) => Some((labels, new)),
        _ => None,
    }
}

/// marked-for-deletion, when the write makes it "true".
fn marked_for_deletion(write: &GuardedWrite<'_>) -> Option<Map> {
    if !write.kind.honours_marked_for_deletion() {
        return None;
    }
    let (_, annotations) = maps(write.kind);
    let is_true = |v: Option<&Value>| v.and_then(Value::as_str) == Some("true");
    let (new, old) = values(write, annotations, MARKED_FOR_DELETION);
    (is_true(new) && !is_true(old)).then_some(annotations)
}

/// Where a force on a child stands: the stored object's upgrade state (on
/// CREATE, the object's own), unless it is one of `wanted`.
fn not_actable(write: &GuardedWrite<'_>, wanted: [&'static str; 2]) -> Option<NotActable> {
    if !write.kind.is_child() {
        return None;
    }
    let stored: &GuardedObject = write.old().unwrap_or(write.object);
    let state = stored.label(UPGRADE_STATE).and_then(Value::as_str);
    match state {
        Some(state) if wanted.contains(&state) => None,
        state => Some(NotActable {
            state: state.map(str::to_owned),
            wanted,
        }),
    }
}

/// Rules 5 (for a rollout's template), 13 (the label's value) and 15:
/// the findings that need no permission.
pub(crate) fn findings(policy: &Policy, write: &GuardedWrite<'_>) -> Vec<Finding> {
    let mut found = Vec::new();
    if exempt(policy, write) {
        return found;
    }
    let kind = write.kind;
    // A PipelineRollout's spec.pipeline that is not an object is rule 2's.
    let template = write
        .object
        .malformed_template(kind)
        .filter(|(path, _)| !(kind == Kind::PipelineRollout && path == "spec.pipeline"));
    if let Some((path, kind_found)) = template {
        let unchanged = write
            .old()
            .and_then(|o| o.malformed_template(kind))
            .is_some_and(|(p, k)| p == path && k == kind_found);
        found.push(Finding {
            violation: Violation::TemplateMalformed {
                path,
                found: kind_found,
            },
            unchanged,
        });
    }
    if let Some((map, value)) = promote_label(write)
        && value.as_str() != Some("true")
    {
        found.push(Finding {
            violation: Violation::ForcePromoteLabelValue {
                path: map.path(kind),
                value: show(value),
            },
            unchanged: false,
        });
    }
    if !by_controller(policy, write) {
        let (labels, annotations) = maps(kind);
        let keys = BOOKKEEPING_LABELS
            .iter()
            .map(|k| (labels, *k))
            .chain(BOOKKEEPING_ANNOTATIONS.iter().map(|k| (annotations, *k)));
        for (map, key) in keys {
            let change = match values(write, map, key) {
                (Some(new), Some(old)) if new != old => "change",
                (Some(_), None) => "set",
                (None, Some(_)) => "remove",
                _ => continue,
            };
            found.push(Finding {
                violation: Violation::BookkeepingChanged {
                    user: write.user.username().to_owned(),
                    path: map.path(kind),
                    key: key.to_owned(),
                    change,
                    controller: policy.numaplane.controller_account.clone(),
                },
                unchanged: false,
            });
        }
    }
    found
}

/// What rules 13 and 14 ask of a request, worked out once.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct KeyGates {
    /// Rule 13 applies: the force-promote label is set in this map.
    promote: Option<Map>,
    /// Why the label cannot act on this child, when it cannot.
    promote_state: Option<NotActable>,
    /// Rule 14 applies: marked-for-deletion becomes "true" in this map.
    undrained: Option<Map>,
    /// Why it cannot act on this Pipeline, when it cannot.
    undrained_state: Option<NotActable>,
    /// The controller's own write of a child carries a force (copied from
    /// its rollout): not judged, but recorded in the audit annotations.
    by_controller: Vec<Gate>,
}

impl KeyGates {
    /// Works out which of rules 13 and 14 a request meets (none for a
    /// stored object: see [`stored_states`]).
    pub(crate) fn of(policy: &Policy, write: &GuardedWrite<'_>) -> Self {
        if write.is_stored() {
            return Self::default();
        }
        if exempt(policy, write) {
            let mut by_controller = Vec::new();
            if promote_label(write).is_some() {
                by_controller.push(Gate::ForcePromote);
            }
            if marked_for_deletion(write).is_some() {
                by_controller.push(Gate::DeleteUndrained);
            }
            return Self {
                by_controller,
                ..Self::default()
            };
        }
        let promote = policy
            .force_reapply
            .gate_force_promote
            .then(|| promote_label(write).map(|(map, _)| map))
            .flatten();
        let undrained = marked_for_deletion(write);
        Self {
            promote,
            promote_state: promote.and_then(|_| not_actable(write, PROMOTABLE_STATES)),
            undrained,
            undrained_state: undrained.and_then(|_| not_actable(write, RECYCLABLE_STATES)),
            by_controller: Vec::new(),
        }
    }

    /// Whether a gate denies whatever the requester's permission.
    pub(crate) fn denied_anyway(&self) -> bool {
        self.promote_state.is_some() || self.undrained_state.is_some()
    }

    /// Whether rule 13 needs the forceReapply permission.
    pub(crate) fn need_force_permission(&self) -> bool {
        self.promote.is_some()
    }

    /// Whether rule 14 needs the deleteUndrained permission.
    pub(crate) fn need_undrained_permission(&self) -> bool {
        self.undrained.is_some()
    }

    /// Rules 13 and 14: records each gate's decision (Event, audit
    /// annotation, metric label) and its denial.
    pub(crate) fn judge(
        &self,
        verdict: &mut Verdict,
        policy: &Policy,
        write: &GuardedWrite<'_>,
        force: &Permission,
        undrained: &Permission,
    ) {
        let kind = write.kind;
        let user = write.user.username();
        for gate in &self.by_controller {
            verdict.audit.insert(
                gate.as_str().to_owned(),
                format!(
                    "not judged: user \"{}\" is numaplane.controllerAccount, writing its own child (the key comes from its rollout, judged there)",
                    cut(user, 64)
                ),
            );
        }
        let about = match (kind.is_child(), write.object.parent(kind)) {
            (true, Some(parent)) => format!(
                " on this {} of {} \"{}\"",
                kind.kind(),
                kind.rollout().kind(),
                cut(parent, 64)
            ),
            (true, None) => format!(
                " on this {} (no {} owns it)",
                kind.kind(),
                kind.rollout().kind()
            ),
            (false, _) => format!(
                " in spec.{}.metadata (copied onto every {} it makes)",
                kind.template().unwrap_or_default(),
                kind.child().kind()
            ),
        };
        let also = if kind.is_child() {
            ""
        } else {
            ", of every upgrade to come"
        };
        if let Some(map) = self.promote {
            let outcome = gate_outcome(force, self.promote_state.as_ref()).map(|r| {
                r.map_err(|(refused, state)| Violation::ForcePromoteLabelDenied {
                    user: user.to_owned(),
                    path: map.path(kind),
                    also,
                    refused,
                    state,
                })
            });
            if let Some(outcome) = outcome {
                settle(policy, write, force, &about).gate_as(
                    verdict,
                    Gate::ForcePromote,
                    (
                        EventReason::ForcePromoteAllowed,
                        "the force-promote label (a promotion without assessment)",
                    ),
                    outcome,
                );
            }
        }
        if let Some(map) = self.undrained {
            let outcome = gate_outcome(undrained, self.undrained_state.as_ref()).map(|r| {
                r.map_err(|(refused, state)| Violation::DeleteUndrainedDenied {
                    user: user.to_owned(),
                    path: map.path(kind),
                    refused,
                    state,
                })
            });
            if let Some(outcome) = outcome {
                settle(policy, write, undrained, &about).gate(
                    verdict,
                    Gate::DeleteUndrained,
                    outcome,
                );
            }
        }
    }
}

/// Rules 13 and 14 on a stored rollout: the force-promote label and
/// `marked-for-deletion: "true"` in its child template, judged by the state
/// they leave, since who set them cannot be known. The label warns;
/// marked-for-deletion fails (each recyclable Pipeline is deleted at once
/// without draining).
pub(crate) fn stored_states(write: &GuardedWrite<'_>) -> Vec<StoredState> {
    let kind = write.kind;
    if kind.is_child() {
        return Vec::new();
    }
    let child = kind.child().kind();
    let mut states = Vec::new();
    if write
        .object
        .key_in(kind, Map::TemplateLabels, FORCE_PROMOTE_LABEL)
        .is_some()
    {
        states.push(StoredState::warn(
            Rule::ForcePromoteLabel,
            format!(
                "{}[\"{FORCE_PROMOTE_LABEL}\"] is set: Numaplane copies it onto every {child} it makes, so every upgrade to come is promoted without assessment; remove it (who set it is unknown to the audit)",
                Map::TemplateLabels.path(kind),
            ),
        ));
    }
    if let Some(map) = marked_for_deletion(write) {
        states.push(StoredState {
            rule: Rule::DeleteUndrained,
            fails: true,
            message: format!(
                "{}[\"{MARKED_FOR_DELETION}\"] is \"true\": Numaplane copies it onto every {child} it makes, and deletes each at once without draining when it becomes recyclable, which can lose data; remove it (who set it is unknown to the audit)",
                map.path(kind),
            ),
        });
    }
    states
}

/// A gate's outcome from the permission and the state: `None` when it
/// says nothing (its permission was not asked and nothing else denies).
#[allow(clippy::type_complexity)]
fn gate_outcome(
    permission: &Permission,
    state: Option<&NotActable>,
) -> Option<Result<(), (Option<String>, Option<Box<NotActable>>)>> {
    let refused = match permission {
        Permission::Granted(_) => None,
        Permission::NotAsked if state.is_none() => return None,
        Permission::NotAsked => None,
        Permission::Refused(why) => Some(why.clone()),
        Permission::NotNeeded => Some("its permission was not checked".to_owned()),
    };
    Some(match (refused, state) {
        (None, None) => Ok(()),
        (refused, state) => Err((refused, state.cloned().map(Box::new))),
    })
}

fn settle<'a>(
    policy: &Policy,
    write: &GuardedWrite<'a>,
    permission: &'a Permission,
    about: &str,
) -> Settle<'a> {
    Settle {
        mode: policy.mode,
        update: write.operation == Operation::Update,
        user: write.user.username(),
        permission,
        after: String::new(),
        about: about.to_owned(),
    }
}
