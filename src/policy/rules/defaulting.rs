//! `/mutate`: fill in a missing drain timeout with the scope's default:
//! the pause timeout from `drainTimeout`, and the deletion timeout from
//! `deletionTimeout` when neither `deletionGracePeriodSeconds` nor the
//! deprecated `deleteGracePeriodSeconds` is set (a user's deprecated
//! field is never written over: Numaflow reads it while the new one is
//! unset).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::Value;

use super::guarded_write::GuardedWrite;
use super::verdict::Verdict;
use crate::policy::duration::format_seconds;
use crate::policy::model::{DrainTimeout, Policy};
use crate::rollout::{LifecycleKey, TimeoutSlot};

/// Fills in the missing drain timeouts: JSON Patch operations that add the
/// namespace's defaults, creating the objects on the way. A present
/// timeout (even an invalid one) is never changed.
pub(crate) fn default_timeout(policy: &Policy, write: &GuardedWrite<'_>, verdict: &mut Verdict) {
    let object = write.object;
    let pause = object.timeout();
    let created_lifecycle = match pause {
        TimeoutSlot::Set(_) => false,
        TimeoutSlot::Blocked { path, found } => {
            // The deletion timeout sits behind the same objects.
            verdict.warnings.push(format!(
                "no default drain timeouts set: {path} is {found}, not an object"
            ));
            return;
        }
        TimeoutSlot::Unset { depth } => {
            let seconds = add_default(
                &policy.drain_timeout,
                write.namespace,
                LifecycleKey::Pause,
                depth,
                verdict,
            );
            verdict.defaulted = Some(seconds);
            audit(
                verdict,
                "drain-timeout-default",
                seconds,
                &policy.drain_timeout,
            );
            true
        }
    };
    let unset = |key| matches!(object.lifecycle_timeout(key), TimeoutSlot::Unset { .. });
    if let TimeoutSlot::Unset { depth } = object.lifecycle_timeout(LifecycleKey::Deletion)
        && unset(LifecycleKey::DeprecatedDeletion)
    {
        // The patch above made `lifecycle` (and what holds it), if it was missing.
        let depth = if created_lifecycle { 4 } else { depth };
        let dt = &policy.deletion_timeout;
        let seconds = add_default(dt, write.namespace, LifecycleKey::Deletion, depth, verdict);
        audit(verdict, "deletion-timeout-default", seconds, dt);
    }
}

/// Adds `key` at the namespace's default to the patch, creating the
/// objects from `depth` on; the value written.
fn add_default(
    dt: &DrainTimeout,
    namespace: &str,
    key: LifecycleKey,
    depth: usize,
    verdict: &mut Verdict,
) -> u64 {
    let seconds = dt.default_seconds(dt.scope(namespace).rules.default);
    let path = key.rollout_field().keys();
    let mut value = Value::from(seconds);
    for step in path[depth + 1..].iter().rev() {
        value = Value::Object([((*step).to_owned(), value)].into_iter().collect());
    }
    let pointer = PointerBuf::from_tokens(path[..=depth].iter().copied());
    verdict.patch.push(PatchOperation::Add(AddOperation {
        path: pointer,
        value,
    }));
    seconds
}

/// Records a default in the audit annotations: the seconds and their meaning.
fn audit(verdict: &mut Verdict, key: &str, seconds: u64, dt: &DrainTimeout) {
    let meaning = if seconds >= dt.no_timeout_seconds {
        "no timeout".to_owned()
    } else {
        format_seconds(seconds)
    };
    verdict
        .audit
        .insert(key.to_owned(), format!("{seconds} ({meaning})"));
}
