//! Rule 12 and the one-shot forcePromote: `spec.strategy.progressive.forcePromote`
//! is a standing setting (every later progressive upgrade skips assessment,
//! and recyclable pipelines are deleted without draining), so an UPDATE that
//! keeps it on is warned about, and with `forcePromote.oneShot` `/mutate`
//! resets it once the progressive upgrade it was set for has finished.
//!
//! Which upgrade that is, is recorded when the setting is first seen on:
//! `/mutate` adds the annotation [`FORCE_PROMOTE_FOR`] from the stored
//! status (`upgrade:CHILD` while the upgrade of CHILD is in progress,
//! `after:CHILD` when none is). The reset comes on the first write after the
//! stored status shows that upgrade over; a write that starts the next
//! upgrade is such a write, so the next upgrade is assessed as usual.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Value, json};

use super::decision::{Decision, EventReason, ForceEvent};
use super::rollout_write::{Operation, RolloutWrite};
use super::violation::cut;
use crate::policy::model::Policy;
use crate::rollout::{FORCE_PROMOTE_FOR, FORCE_PROMOTE_PATH, PipelineRollout, ProgressiveUpgrade};

/// Rule 12's warning: an UPDATE keeps forcePromote on.
pub const LEFT_ON_WARNING: &str = "forcePromote is still true: the next upgrade skips assessment and deletes recyclable pipelines undrained";

/// The warning a reset answers with.
pub const RESET_WARNING: &str = "forcePromote was reset to false: the upgrade it was set for is over, so the next is assessed as usual";

/// Rule 12: an UPDATE that keeps `forcePromote: true` (the reset, when it
/// comes, answers with its own warning instead).
pub fn left_on_warning(write: &RolloutWrite<'_>) -> Option<String> {
    let kept = write.operation == Operation::Update
        && write.is_pipeline_rollout()
        && write.object.force_promote()
        && write.old().is_some_and(PipelineRollout::force_promote);
    kept.then(|| LEFT_ON_WARNING.to_owned())
}

/// The record of the upgrade a forcePromote turned on now is for, from the
/// stored status (none on CREATE).
fn record(old: Option<&PipelineRollout>) -> String {
    match old.map(PipelineRollout::progressive_upgrade) {
        Some(ProgressiveUpgrade {
            in_progress: true,
            child: Some(child),
        }) => format!("upgrade:{child}"),
        Some(upgrade) => format!("after:{}", upgrade.child.unwrap_or_default()),
        None => "after:".to_owned(),
    }
}

/// Whether the upgrade `record` names is over, as the stored status shows.
fn is_over(record: &str, now: ProgressiveUpgrade<'_>) -> bool {
    if let Some(child) = record.strip_prefix("upgrade:") {
        return !now.in_progress || now.child != Some(child);
    }
    if let Some(child) = record.strip_prefix("after:") {
        return !now.in_progress && now.child.is_some_and(|c| c != child);
    }
    false
}

fn record_path() -> PointerBuf {
    PointerBuf::from_tokens(["metadata", "annotations", FORCE_PROMOTE_FOR])
}

/// The one-shot forcePromote (`forcePromote.oneShot`) for `/mutate`: records
/// the upgrade a forcePromote is for, resets it once that upgrade is over,
/// and drops a record whose forcePromote is gone.
pub fn reset_finished_force_promote(
    policy: &Policy,
    write: &RolloutWrite<'_>,
    decision: &mut Decision,
) {
    if !policy.force_promote.one_shot || write.object.malformed_metadata().is_some() {
        return;
    }
    let on = write.object.force_promote();
    let recorded = write.object.force_promote_for();
    match (on, recorded) {
        (false, Some(_)) => decision.patch.push(PatchOperation::Remove(RemoveOperation {
            path: record_path(),
        })),
        (false, None) => {}
        (true, None) => {
            let value = Value::from(record(write.old()));
            let op = if write.object.has_annotations() {
                PatchOperation::Add(AddOperation {
                    path: record_path(),
                    value,
                })
            } else {
                PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(["metadata", "annotations"]),
                    value: json!({ FORCE_PROMOTE_FOR: value }),
                })
            };
            decision.patch.push(op);
        }
        (true, Some(record)) => {
            let over = write.operation == Operation::Update
                && write.old().is_some_and(|old| {
                    old.force_promote() && is_over(record, old.progressive_upgrade())
                });
            if over {
                reset(write, decision);
            }
        }
    }
}

fn reset(write: &RolloutWrite<'_>, decision: &mut Decision) {
    decision.patch.extend([
        PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(FORCE_PROMOTE_PATH),
            value: Value::Bool(false),
        }),
        PatchOperation::Remove(RemoveOperation {
            path: record_path(),
        }),
    ]);
    decision.warnings.push(RESET_WARNING.to_owned());
    let user = write.user.username();
    decision.audit.insert(
        "force-promote-reset".to_owned(),
        format!(
            "reset to false by /mutate on an update by user \"{user}\": the progressive upgrade it was set for is over"
        ),
    );
    decision.events.push(ForceEvent {
        reason: EventReason::ForcePromoteReset,
        note: cut(
            &format!(
                "forcePromote reset to false by the mutating webhook on an update by user \"{user}\": the progressive upgrade it was set for is over, so the next one is assessed as usual"
            ),
            1000,
        ),
    });
}
