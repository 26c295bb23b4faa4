//! Rules 16 to 18: the deletion timeout, how long Numaflow drains a
//! Pipeline being deleted before it deletes the buffers, is an integer
//! within the namespace's `deletionTimeout` range that fits Numaflow's
//! clock. Numaflow reads `lifecycle.deletionGracePeriodSeconds`, else the
//! deprecated `lifecycle.deleteGracePeriodSeconds`, else 30 s
//! (`GetTerminationGracePeriodSeconds`): the field it reads is judged, and
//! the other one warns.

use super::guarded_write::GuardedWrite;
use super::rule::Rule;
use super::timeout::{JudgedSlot, OverflowReading};
use super::timeout_field::TimeoutField;
use super::verdict::{Finding, StoredState};
use super::violation::show;
use crate::policy::model::DrainTimeout;
use crate::rollout::{DELETION_FIELD, DeletionTimeout, GuardedObject, LifecycleKey, TimeoutSlot};

/// What the deletion rules found: findings (judged by rule 8 and warn mode
/// like every other), and warnings about the field Numaflow does not read.
#[derive(Debug, Default)]
pub(crate) struct DeletionFindings {
    /// Violations of rules 16 to 18.
    pub(crate) findings: Vec<Finding>,
    /// Warnings: the deprecated field in use, or ignored.
    pub(crate) warnings: Vec<String>,
}

/// Where the two deletion fields of one object are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    /// A PipelineRollout's `spec.pipeline.spec.lifecycle`.
    Rollout,
    /// A child Pipeline's own `spec.lifecycle`.
    Child,
}

impl Holder {
    /// The deletion field and its deprecated name, as paths.
    const fn fields(self) -> (TimeoutField, TimeoutField) {
        match self {
            Self::Rollout => (
                TimeoutField::ROLLOUT_DELETION,
                TimeoutField::ROLLOUT_DEPRECATED_DELETION,
            ),
            Self::Child => (
                TimeoutField::CHILD_DELETION,
                TimeoutField::CHILD_DEPRECATED_DELETION,
            ),
        }
    }

    fn slot(self, object: &GuardedObject, key: LifecycleKey) -> TimeoutSlot<'_> {
        match self {
            Self::Rollout => object.lifecycle_timeout(key),
            Self::Child => object.child_lifecycle_timeout(key),
        }
    }
}

/// Rule 17 on a stored PipelineRollout whose pipeline sets no deletion
/// timeout: a warning. Numaflow then falls back to the Pipeline's schema
/// default where its full CRDs are installed (30 s), but with its minimal
/// CRDs (no schema defaults) to `metadata.deletionGracePeriodSeconds`,
/// which the API server sets to 0 for a custom resource: a delete then
/// drains nothing. A write is allowed (`/mutate` defaults it).
pub(crate) fn stored_state(write: &GuardedWrite<'_>) -> Option<StoredState> {
    let unset = write.is_pipeline_rollout()
        && write.is_stored()
        && write.object.deletion_timeout() == DeletionTimeout::Default;
    unset.then(|| StoredState::warn(
        Rule::DeletionTimeoutRange,
        format!(
            "{DELETION_FIELD} is not set: with Numaflow's full CRDs the Pipeline gets their default of 30s, but with its minimal CRDs (no schema defaults) Numaflow drains a deleted Pipeline for metadata.deletionGracePeriodSeconds, which the API server sets to 0, so its buffers are deleted undrained; set {DELETION_FIELD}"
        ),
    ))
}

/// Rules 16 to 18 for the deletion timeout of a PipelineRollout write.
/// A lifecycle that is not an object is reported once, by rule 2 (the
/// pause timeout behind it cannot be read either).
pub(crate) fn rollout_findings(dt: &DrainTimeout, write: &GuardedWrite<'_>) -> DeletionFindings {
    judge(dt, write, Holder::Rollout, true)
}

/// Rules 16 to 18 for the deletion timeout of `holder` in `write`.
/// `warn_ignored_always`: warn that the deprecated field is ignored
/// whenever both differ; otherwise only when the write changes the
/// deprecated one (Numaflow's Pipeline CRD defaults both to 30 on a child,
/// so a child carries both).
pub(crate) fn judge(
    dt: &DrainTimeout,
    write: &GuardedWrite<'_>,
    holder: Holder,
    warn_ignored_always: bool,
) -> DeletionFindings {
    let mut out = DeletionFindings::default();
    let (field, deprecated_field) = holder.fields();
    let current = holder.slot(write.object, LifecycleKey::Deletion);
    let deprecated = holder.slot(write.object, LifecycleKey::DeprecatedDeletion);
    let old = write.old();
    let stored = |key| old.map(|o| holder.slot(o, key));
    let old_current = stored(LifecycleKey::Deletion);
    let old_deprecated = stored(LifecycleKey::DeprecatedDeletion);
    let judged = match (&current, &deprecated) {
        (TimeoutSlot::Blocked { .. }, _) => None,
        (TimeoutSlot::Set(value), TimeoutSlot::Set(old_name)) => {
            let deprecated_changed = old_deprecated.as_ref() != Some(&deprecated);
            if value != old_name && (warn_ignored_always || deprecated_changed) {
                out.warnings.push(format!(
                    "{} {} is ignored: Numaflow uses {} {}; remove it",
                    deprecated_field.name(),
                    show(old_name),
                    field.name(),
                    show(value)
                ));
            }
            Some(JudgedSlot {
                field,
                slot: &current,
                unchanged: old_current.as_ref() == Some(&current),
            })
        }
        (TimeoutSlot::Set(_), _) => Some(JudgedSlot {
            field,
            slot: &current,
            unchanged: old_current.as_ref() == Some(&current),
        }),
        (TimeoutSlot::Unset { .. }, TimeoutSlot::Set(_)) => {
            out.warnings.push(format!(
                "{} is deprecated: rename it {} (Numaflow reads that first)",
                deprecated_field.name(),
                field.name()
            ));
            // The value Numaflow reads is the deprecated one as long as the
            // new one stays unset.
            let unchanged = old_deprecated.as_ref() == Some(&deprecated)
                && old_current
                    .as_ref()
                    .is_some_and(|s| matches!(s, TimeoutSlot::Unset { .. }));
            Some(JudgedSlot {
                field: deprecated_field,
                slot: &deprecated,
                unchanged,
            })
        }
        _ => None,
    };
    if let Some(judged) = judged {
        out.findings = judged.findings(dt, write.namespace, OverflowReading::Clock);
    }
    out
}
