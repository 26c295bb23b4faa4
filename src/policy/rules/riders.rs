//! Rule 22: a PipelineRollout with a HorizontalPodAutoscaler rider has
//! every progressive upgrade promoted without assessment (Numaplane
//! 75c9dd5, `progressiveUnsupported`): allowed, with a warning, on every
//! CREATE and UPDATE that carries one; the audit reports it as `warn`.
//! Rule 28: a rider that grants access (a Role or RoleBinding, a
//! ServiceAccount, a Secret) is applied by Numaplane with its own account,
//! so whoever may edit the rollout creates it: warned the same way.

use super::guarded_write::GuardedWrite;
use super::rule::Rule;
use super::verdict::StoredState;

/// Rule 22's warning, when the written PipelineRollout has an HPA rider.
pub(crate) fn hpa_rider_warning(write: &GuardedWrite<'_>) -> Option<String> {
    if !write.is_pipeline_rollout() || write.is_delete() {
        return None;
    }
    let first = *write.object.hpa_riders().first()?;
    Some(hpa_rider_message(first))
}

/// Rule 28's warnings, one per rider that grants access (at most three),
/// when the written PipelineRollout has any.
pub(crate) fn access_rider_warnings(write: &GuardedWrite<'_>) -> Vec<String> {
    if !write.is_pipeline_rollout() || write.is_delete() {
        return Vec::new();
    }
    write
        .object
        .access_riders()
        .into_iter()
        .take(3)
        .map(|(index, kind)| access_rider_message(index, kind))
        .collect()
}

/// Rules 22 and 28 on a stored object: its first HPA rider and its first
/// rider that grants access, each a warning.
pub(crate) fn stored_states(write: &GuardedWrite<'_>) -> Vec<StoredState> {
    let object = write.object;
    let hpa = object
        .hpa_riders()
        .first()
        .map(|&index| StoredState::warn(Rule::HpaRider, hpa_rider_message(index)));
    let access = object.access_riders().first().map(|&(index, kind)| {
        StoredState::warn(Rule::AccessRider, access_rider_message(index, kind))
    });
    hpa.into_iter().chain(access).collect()
}

/// The warning for a rider of `kind` that grants access at
/// `spec.riders[index]`.
fn access_rider_message(index: usize, kind: &str) -> String {
    format!(
        "spec.riders[{index}] is a {kind}: Numaplane creates it as itself, for anyone who may edit this rollout"
    )
}

/// The warning for an HPA rider at `spec.riders[index]`.
fn hpa_rider_message(index: usize) -> String {
    format!(
        "spec.riders[{index}] is an HPA: Numaplane promotes every progressive upgrade of this rollout without assessment"
    )
}
