//! Rule 22: a PipelineRollout with a HorizontalPodAutoscaler rider has
//! every progressive upgrade promoted without assessment (Numaplane
//! 75c9dd5, `progressiveUnsupported`): allowed, with a warning, on every
//! CREATE and UPDATE that carries one; the audit reports it as `warn`.

use super::guarded_write::GuardedWrite;

/// Rule 22's warning, when the written PipelineRollout has an HPA rider.
pub fn hpa_rider_warning(write: &GuardedWrite<'_>) -> Option<String> {
    if !write.is_pipeline_rollout() || write.is_delete() {
        return None;
    }
    let first = *write.object.hpa_riders().first()?;
    Some(hpa_rider_message(first))
}

/// The warning for an HPA rider at `spec.riders[index]` (the audit's
/// message too).
pub fn hpa_rider_message(index: usize) -> String {
    format!(
        "spec.riders[{index}] is an HPA: Numaplane promotes every progressive upgrade of this rollout without assessment"
    )
}
