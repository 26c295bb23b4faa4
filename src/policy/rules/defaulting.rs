//! `/mutate`: fill in a missing drain timeout with the scope's default.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::Value;

use super::decision::Decision;
use super::rollout_write::RolloutWrite;
use crate::policy::duration::format_seconds;
use crate::policy::model::Policy;
use crate::rollout::{TIMEOUT_PATH, TimeoutSlot};

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
