//! The stored forces the audit judges by state, since who set them cannot
//! be known afterwards: allow-data-loss, forcePromote, and the
//! force-promote label and marked-for-deletion in a child template.

use super::{RuleResult, Status, result};
use crate::kinds::{FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION};
use crate::policy::rules::Rule;
use crate::rollout::{
    ALLOW_DATA_LOSS, ANNOTATIONS, DELETION_FIELD, FORCE_PROMOTE_FIELD, GuardedObject, Map,
};

/// A stored `allow-data-loss: "true"`, by state.
pub(super) fn force_reapply_state(view: &GuardedObject) -> RuleResult {
    if !view.forces_reapply() {
        return result(Rule::ForceReapply, Status::Pass, None);
    }
    if view.pause_is_over() {
        return result(
            Rule::ForceReapply,
            Status::Fail,
            Some(format!(
                "{ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] is \"true\" and the pause is over: the next change is applied without draining and can lose data; set it to \"false\" (the stale-force sweeper resets it after its grace period when it runs; who set it is unknown to the audit)"
            )),
        );
    }
    result(
        Rule::ForceReapply,
        Status::Warn,
        Some(format!(
            "{ANNOTATIONS}[\"{ALLOW_DATA_LOSS}\"] is \"true\" while the pipeline is paused or pausing: a forced re-apply is under way, skipping the drain; set it to \"false\" once the pause is over (who set it is unknown to the audit)"
        )),
    )
}

/// Rule 22: an HPA rider, which makes Numaplane promote every progressive
/// upgrade without assessment: `warn` (the webhook allows it, warning).
pub(super) fn hpa_rider_state(view: &GuardedObject) -> RuleResult {
    match view.hpa_riders().first() {
        Some(&index) => result(
            Rule::HpaRider,
            Status::Warn,
            Some(crate::policy::rules::riders::hpa_rider_message(index)),
        ),
        None => result(Rule::HpaRider, Status::Pass, None),
    }
}

/// Rule 28: a PipelineRollout with a rider that grants access, named
/// (the first; the webhook's warning names up to three).
pub(super) fn access_rider_state(view: &GuardedObject) -> RuleResult {
    match view.access_riders().first() {
        Some(&(index, kind)) => result(
            Rule::AccessRider,
            Status::Warn,
            Some(crate::policy::rules::riders::access_rider_message(
                index, kind,
            )),
        ),
        None => result(Rule::AccessRider, Status::Pass, None),
    }
}

/// Rule 17: a PipelineRollout whose pipeline sets no deletion timeout.
/// Numaflow then falls back to the Pipeline's schema default where its
/// full CRDs are installed (30 s), but with its minimal CRDs (no schema
/// defaults) to `metadata.deletionGracePeriodSeconds`, which the API server
/// sets to 0 for a custom resource: a delete then drains nothing. The
/// webhook allows it (`/mutate` defaults it on the next write), so `warn`.
pub(super) fn no_deletion_timeout_state() -> RuleResult {
    result(
        Rule::DeletionTimeoutRange,
        Status::Warn,
        Some(format!(
            "{DELETION_FIELD} is not set: with Numaflow's full CRDs the Pipeline gets their default of 30s, but with its minimal CRDs (no schema defaults) Numaflow drains a deleted Pipeline for metadata.deletionGracePeriodSeconds, which the API server sets to 0, so its buffers are deleted undrained; set {DELETION_FIELD}"
        )),
    )
}

/// A stored `forcePromote: true`, by state.
pub(super) fn force_promote_state(view: &GuardedObject, kind: Kind) -> RuleResult {
    if !view.force_promote() {
        return result(Rule::ForcePromote, Status::Pass, None);
    }
    let upgrade = view.progressive_upgrade();
    let message = if upgrade.in_progress {
        let child = upgrade
            .child
            .map_or_else(|| format!("a {}", child_of(kind)), str::to_owned);
        format!(
            "{FORCE_PROMOTE_FIELD} is true during the progressive upgrade of {child}: it is promoted without assessment; set it to false once the upgrade is over (who set it is unknown to the audit)"
        )
    } else {
        let also = if kind == Kind::PipelineRollout {
            " and recyclable pipelines are deleted without draining"
        } else {
            ""
        };
        format!(
            "{FORCE_PROMOTE_FIELD} is true and no progressive upgrade is in progress: the next upgrade skips assessment{also}; set it to false (who set it is unknown to the audit)"
        )
    };
    result(Rule::ForcePromote, Status::Warn, Some(message))
}

/// A force-promote label stored in a rollout's child template, by state
/// (its permission cannot be judged afterwards); `None` when there is none.
pub(super) fn template_label_state(view: &GuardedObject, kind: Kind) -> Option<RuleResult> {
    view.key_in(kind, Map::TemplateLabels, FORCE_PROMOTE_LABEL)?;
    Some(result(
        Rule::ForcePromoteLabel,
        Status::Warn,
        Some(format!(
            "{}[\"{FORCE_PROMOTE_LABEL}\"] is set: Numaplane copies it onto every {} it makes, so every upgrade to come is promoted without assessment; remove it (who set it is unknown to the audit)",
            Map::TemplateLabels.path(kind),
            child_of(kind)
        )),
    ))
}

/// A `marked-for-deletion: "true"` stored in a PipelineRollout's child
/// template, by state; `None` when there is none.
pub(super) fn template_deletion_state(view: &GuardedObject, kind: Kind) -> Option<RuleResult> {
    if !kind.honours_marked_for_deletion() {
        return None;
    }
    let value = view.key_in(kind, Map::TemplateAnnotations, MARKED_FOR_DELETION)?;
    (value.as_str() == Some("true")).then(|| {
        result(
            Rule::DeleteUndrained,
            Status::Fail,
            Some(format!(
                "{}[\"{MARKED_FOR_DELETION}\"] is \"true\": Numaplane copies it onto every {} it makes, and deletes each at once without draining when it becomes recyclable, which can lose data; remove it (who set it is unknown to the audit)",
                Map::TemplateAnnotations.path(kind),
                child_of(kind)
            )),
        )
    })
}

/// The kind of child a rollout of `kind` makes.
pub(super) fn child_of(kind: Kind) -> &'static str {
    match kind {
        Kind::MonoVertexRollout => Kind::MonoVertex.kind(),
        Kind::IsbServiceRollout => Kind::InterStepBufferService.kind(),
        _ => Kind::Pipeline.kind(),
    }
}
