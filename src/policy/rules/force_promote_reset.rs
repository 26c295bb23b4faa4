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
//!
//! Rule 25: the record is the webhook's own. While forcePromote stays on,
//! `/mutate` puts back a record a write drops (a `kubectl replace` or a
//! GitOps sync of a manifest without it) and replaces one the write left
//! as it was but that does not fit (left over, or unreadable); `/validate`
//! refuses a record the write itself sets to anything but what `/mutate`
//! writes, so a forged record cannot stop the reset.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Value, json};

use super::guarded_write::{GuardedWrite, Operation};
use super::verdict::{EventReason, Finding, ForceEvent, Verdict};
use super::violation::{RecordProblem, Violation, cut};
use crate::policy::model::Policy;
use crate::rollout::{
    ANNOTATIONS, FORCE_PROMOTE_FIELD, FORCE_PROMOTE_FOR, GuardedObject, ProgressiveUpgrade,
};

/// Rule 12's warning: an UPDATE keeps forcePromote on.
const LEFT_ON_WARNING: &str = "forcePromote is still true: the next upgrade skips assessment and deletes recyclable pipelines undrained";

/// The warning a reset answers with.
pub(crate) const RESET_WARNING: &str = "forcePromote was reset to false: the upgrade it was set for is over, so the next is assessed as usual";

/// Rule 12: an UPDATE that keeps `forcePromote: true` (the reset, when it
/// comes, answers with its own warning instead).
pub(crate) fn left_on_warning(write: &GuardedWrite<'_>) -> Option<String> {
    let kept = write.operation == Operation::Update
        && write.is_pipeline_rollout()
        && write.object.force_promote()
        && write.old().is_some_and(GuardedObject::force_promote);
    kept.then(|| LEFT_ON_WARNING.to_owned())
}

/// The record of the upgrade a forcePromote turned on now is for, from the
/// stored status (none on CREATE).
fn record(old: Option<&GuardedObject>) -> String {
    match old.map(GuardedObject::progressive_upgrade) {
        Some(ProgressiveUpgrade {
            in_progress: true,
            child: Some(child),
        }) => format!("upgrade:{child}"),
        Some(upgrade) => format!("after:{}", upgrade.child.unwrap_or_default()),
        None => "after:".to_owned(),
    }
}

/// The longest record kept: a child's name is a Kubernetes object name.
const RECORD_CHARS: usize = 253 + "upgrade:".len();

/// Whether `record` is one `/mutate` writes: `upgrade:CHILD` (CHILD not
/// empty) or `after:` and a child's name, if any, in the characters of an
/// object name.
fn is_record(record: &str) -> bool {
    let child = record
        .strip_prefix("upgrade:")
        .filter(|c| !c.is_empty())
        .or_else(|| record.strip_prefix("after:"));
    record.len() <= RECORD_CHARS
        && child.is_some_and(|c| {
            c.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        })
}

/// The stored record, when the stored forcePromote is on and its record
/// readable: the one record a write that keeps forcePromote on carries.
fn standing_record<'a>(write: &'a GuardedWrite<'_>) -> Option<&'a str> {
    write
        .old()
        .filter(|old| old.force_promote())
        .and_then(GuardedObject::force_promote_for)
        .filter(|r| is_record(r))
}

/// The record a write with forcePromote on carries: the standing one, or
/// else the upgrade the stored status shows now.
fn expected_record(write: &GuardedWrite<'_>) -> String {
    standing_record(write).map_or_else(|| record(write.old()), str::to_owned)
}

/// Rule 25 for `/validate`: a record this write sets (to a value the
/// stored object does not have) that is not the one `/mutate` writes.
/// Dropping the record is never refused; `/mutate` puts it back while it
/// is needed.
pub(crate) fn record_finding(policy: &Policy, write: &GuardedWrite<'_>) -> Option<Finding> {
    // A stored record goes with its stored forcePromote, judged by state.
    if !write.is_pipeline_rollout() || write.is_stored() {
        return None;
    }
    let written = write.object.force_promote_for()?;
    if write.old().and_then(GuardedObject::force_promote_for) == Some(written) {
        return None;
    }
    let why = if !is_record(written) {
        RecordProblem::Unreadable
    } else if !policy.force_promote.one_shot {
        RecordProblem::OneShotOff
    } else if !write.object.force_promote() {
        // /mutate drops a record whose forcePromote is off.
        RecordProblem::PromoteOff
    } else {
        let expected = expected_record(write);
        if written == expected {
            return None;
        }
        RecordProblem::NotThisOne(expected)
    };
    Some(Finding {
        violation: Violation::ForcePromoteRecordWritten {
            value: format!("\"{}\"", cut(written, 64)),
            why,
        },
        unchanged: false,
    })
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
    PointerBuf::from_tokens(ANNOTATIONS.entry_keys(FORCE_PROMOTE_FOR))
}

/// The one-shot forcePromote (`forcePromote.oneShot`) for `/mutate`: records
/// the upgrade a forcePromote is for, resets it once that upgrade is over,
/// and drops a record whose forcePromote is gone.
pub(crate) fn reset_finished_force_promote(
    policy: &Policy,
    write: &GuardedWrite<'_>,
    verdict: &mut Verdict,
) {
    if !policy.force_promote.one_shot || write.object.malformed_metadata().is_some() {
        return;
    }
    let on = write.object.force_promote();
    let recorded = write.object.force_promote_for();
    let stored = write.old().and_then(GuardedObject::force_promote_for);
    match (on, recorded) {
        (false, Some(_)) => verdict.patch.push(PatchOperation::Remove(RemoveOperation {
            path: record_path(),
        })),
        (false, None) => {}
        // A record the write sets itself is left for /validate to refuse
        // (rule 25).
        (true, Some(r)) if Some(r) != stored => {}
        (true, None) => {
            let value = Value::from(expected_record(write));
            let op = if write.object.has_annotations() {
                PatchOperation::Add(AddOperation {
                    path: record_path(),
                    value,
                })
            } else {
                PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(ANNOTATIONS.keys().iter().copied()),
                    value: json!({ FORCE_PROMOTE_FOR: value }),
                })
            };
            verdict.patch.push(op);
        }
        (true, Some(record)) => {
            // Left as stored but not this forcePromote's record (left over
            // from before, or unreadable): replaced.
            let expected = expected_record(write);
            if record != expected {
                verdict
                    .patch
                    .push(PatchOperation::Replace(ReplaceOperation {
                        path: record_path(),
                        value: Value::from(expected),
                    }));
                return;
            }
            let over = write.operation == Operation::Update
                && write.old().is_some_and(|old| {
                    old.force_promote() && is_over(record, old.progressive_upgrade())
                });
            if over {
                reset(write, verdict);
            }
        }
    }
}

fn reset(write: &GuardedWrite<'_>, verdict: &mut Verdict) {
    verdict.patch.extend([
        PatchOperation::Replace(ReplaceOperation {
            path: PointerBuf::from_tokens(FORCE_PROMOTE_FIELD.keys().iter().copied()),
            value: Value::Bool(false),
        }),
        PatchOperation::Remove(RemoveOperation {
            path: record_path(),
        }),
    ]);
    verdict.warnings.push(RESET_WARNING.to_owned());
    let user = write.user.username();
    verdict.audit.insert(
        "force-promote-reset".to_owned(),
        format!(
            "reset to false by /mutate on an update by user \"{user}\": the progressive upgrade it was set for is over"
        ),
    );
    verdict.events.push(ForceEvent {
        reason: EventReason::ForcePromoteReset,
        note: cut(
            &format!(
                "forcePromote reset to false by the mutating webhook on an update by user \"{user}\": the progressive upgrade it was set for is over, so the next one is assessed as usual"
            ),
            1000,
        ),
    });
}
