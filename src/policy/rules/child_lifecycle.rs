//! A child Pipeline's own drain timeouts: Numaflow reads the pause timeout
//! (`spec.lifecycle.pauseGracePeriodSeconds`) and the deletion timeout
//! (`spec.lifecycle.deletionGracePeriodSeconds`, else the deprecated
//! `deleteGracePeriodSeconds`) from the Pipeline, not from its rollout. A
//! write of them by anyone but Numaplane's controller (which copies them
//! from a rollout that was judged itself) is judged by the rollout's rules:
//! the pause timeout by rules 2 to 4, the deletion timeout by rules 16 to
//! 18, both without the recycle multiplier (Numaflow reads the value as it
//! is).

use super::deletion_timeout::{self, DeletionFindings, Holder};
use super::guarded_write::GuardedWrite;
use super::timeout::{JudgedSlot, OverflowReading};
use super::timeout_field::TimeoutField;
use crate::kinds::Kind;
use crate::policy::model::Policy;
use crate::rollout::{LifecycleKey, TimeoutSlot};

/// The findings on a child Pipeline's lifecycle: none for other kinds and
/// for the Numaplane controller's own writes.
pub(crate) fn findings(policy: &Policy, write: &GuardedWrite<'_>) -> DeletionFindings {
    if write.kind != Kind::Pipeline || write.user.username() == policy.numaplane.controller_account
    {
        return DeletionFindings::default();
    }
    let pause = write.object.child_lifecycle_timeout(LifecycleKey::Pause);
    let old_pause = write
        .old()
        .map(|o| o.child_lifecycle_timeout(LifecycleKey::Pause));
    let judged = JudgedSlot {
        field: TimeoutField::CHILD_PAUSE,
        slot: &pause,
        unchanged: old_pause.as_ref() == Some(&pause),
    };
    let mut out = DeletionFindings {
        findings: judged.findings(
            &policy.drain_timeout,
            write.namespace,
            OverflowReading::Clock,
        ),
        warnings: Vec::new(),
    };
    // A lifecycle that is not an object is reported once, above.
    if !matches!(pause, TimeoutSlot::Blocked { .. }) {
        let deletion =
            deletion_timeout::judge(&policy.deletion_timeout, write, Holder::Child, false);
        out.findings.extend(deletion.findings);
        out.warnings.extend(deletion.warnings);
    }
    out
}
