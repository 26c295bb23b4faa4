//! `/mutate`: fill in a missing drain timeout with the scope's default.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use serde_json::Value;

use super::decision::{Decision, EventReason, ForceEvent};
use super::rollout_write::{Operation, RolloutWrite};
use super::violation::cut;
use crate::policy::duration::format_seconds;
use crate::policy::model::Policy;
use crate::rollout::{ALLOW_DATA_LOSS, TIMEOUT_PATH, TimeoutSlot};

/// The warning a reset answers with (kubectl prints it).
pub const RESET_WARNING: &str = "the forced re-apply is over: allow-data-loss was reset to \"false\", so this change drains as usual";

/// The one-shot force (`forceReapply.oneShot`): on an UPDATE that keeps
/// `allow-data-loss: "true"` after the stored object's pause is over, a
/// patch operation sets it back to "false", so this change and every later
/// one drain as usual. Never on CREATE, never when this request turns the
/// annotation on, never while a pause is in progress; a re-invocation sees
/// "false" and does nothing.
pub fn reset_stale_force(policy: &Policy, write: &RolloutWrite<'_>, decision: &mut Decision) {
    let Some(old) = write.old() else {
        return;
    };
    let stale = policy.force_reapply.one_shot
        && write.operation == Operation::Update
        && old.forces_reapply()
        && write.object.forces_reapply()
        && old.pause_is_over();
    if !stale {
        return;
    }
    let path = PointerBuf::from_tokens(["metadata", "annotations", ALLOW_DATA_LOSS]);
    decision
        .patch
        .push(PatchOperation::Replace(ReplaceOperation {
            path,
            value: Value::from("false"),
        }));
    decision.reset_force = true;
    decision.warnings.push(RESET_WARNING.to_owned());
    decision.audit.insert(
        "force-reapply-reset".to_owned(),
        format!(
            "reset to \"false\" by /mutate on an update by user \"{}\": the pause it was set for is over",
            write.user.username()
        ),
    );
    decision.events.push(ForceEvent {
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

/// Fills in a missing drain timeout: a JSON Patch operation that adds the
/// namespace's default, creating the objects on the way. A present timeout
/// (even an invalid one) is never changed.
pub fn default_timeout(policy: &Policy, write: &RolloutWrite<'_>, decision: &mut Decision) {
    match write.object.timeout() {
        TimeoutSlot::Set(_) => {}
        TimeoutSlot::Blocked { path, found } => decision.warnings.push(format!(
            "no default drain timeout set: {path} is {found}, not an object"
        )),
        TimeoutSlot::Unset { depth } => {
            let dt = &policy.drain_timeout;
            let default = dt.scope(write.namespace).rules.default;
            let seconds = dt.default_seconds(default);
            let mut value = Value::from(seconds);
            for key in TIMEOUT_PATH[depth + 1..].iter().rev() {
                value = Value::Object([((*key).to_owned(), value)].into_iter().collect());
            }
            let path = PointerBuf::from_tokens(TIMEOUT_PATH[..=depth].iter().copied());
            decision
                .patch
                .push(PatchOperation::Add(AddOperation { path, value }));
            decision.defaulted = Some(seconds);
            let meaning = if seconds >= dt.no_timeout_seconds {
                "no timeout".to_owned()
            } else {
                format_seconds(seconds)
            };
            decision.audit.insert(
                "drain-timeout-default".to_owned(),
                format!("{seconds} ({meaning})"),
            );
        }
    }
}
