//! `/mutate`: the one-shot force. A forced re-apply whose pause is over is
//! reset, so that later changes drain as usual.

use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation};
use serde_json::Value;

use super::guarded_write::{GuardedWrite, Operation};
use super::verdict::{EventReason, ForceEvent, Verdict};
use super::violation::cut;
use crate::policy::model::Policy;
use crate::rollout::{ALLOW_DATA_LOSS, ANNOTATIONS, GuardedObject};

/// The warning a reset answers with (kubectl prints it).
pub(crate) const RESET_WARNING: &str = "the forced re-apply is over: allow-data-loss was reset to \"false\", so this change drains as usual";

/// Whether the force `object` holds is over: `allow-data-loss` is "true"
/// and the pause it was set for has ended. What `/mutate`'s reset and the
/// stale-force sweeper both ask.
pub(crate) fn force_is_stale(object: &GuardedObject) -> bool {
    object.forces_reapply() && object.pause_is_over()
}

/// The one-shot force (`forceReapply.oneShot`): on an UPDATE that keeps
/// `allow-data-loss: "true"` after the stored object's pause is over, a
/// patch operation sets it back to "false", so this change and every later
/// one drain as usual. Never on CREATE, never when this request turns the
/// annotation on, never while a pause is in progress; a re-invocation sees
/// "false" and does nothing.
pub(crate) fn reset_stale_force(policy: &Policy, write: &GuardedWrite<'_>, verdict: &mut Verdict) {
    let Some(old) = write.old() else {
        return;
    };
    let stale = policy.force_reapply.one_shot
        && write.operation == Operation::Update
        && force_is_stale(old)
        && write.object.forces_reapply();
    if !stale {
        return;
    }
    let path = PointerBuf::from_tokens(ANNOTATIONS.entry_keys(ALLOW_DATA_LOSS));
    verdict
        .patch
        .push(PatchOperation::Replace(ReplaceOperation {
            path,
            value: Value::from("false"),
        }));
    verdict.reset_force = true;
    verdict.warnings.push(RESET_WARNING.to_owned());
    verdict.audit.insert(
        "force-reapply-reset".to_owned(),
        format!(
            "reset to \"false\" by /mutate on an update by user \"{}\": the pause it was set for is over",
            write.user.username()
        ),
    );
    verdict.events.push(ForceEvent {
        reason: EventReason::ForceReapplyReset,
        note: cut(
            &format!(
                "allow-data-loss reset to \"false\" by the mutating webhook on an update by user \"{}\": the forced re-apply is over, so this change drains as usual",
                write.user.username()
            ),
            1000,
        ),
    });
}
