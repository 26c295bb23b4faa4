//! Rule 19: `numaflow.numaproj.io/pause-timestamp` is Numaflow's.
//!
//! Numaflow's controller sets it on a Pipeline when it starts pausing it
//! and ends the pause at that time plus `pauseGracePeriodSeconds`, drained
//! or not; it removes the annotation when it resumes the Pipeline (Numaflow
//! v1.8, `pausePipeline` and `resumePipeline`). Setting or changing it is
//! therefore Numaflow's controller's alone: an earlier time ends a drain
//! undrained, and a time set on a running Pipeline is taken as the start
//! of its next pause. Removing it is allowed: Numaflow then sets it again
//! to the present and the pause starts over, so the drain only gets longer.
//!
//! Judged on a Pipeline, and in a PipelineRollout's
//! `spec.pipeline.metadata.annotations`, which Numaplane copies onto every
//! Pipeline it makes (there nobody may put it).

use serde_json::Value;

use super::guarded_write::GuardedWrite;
use super::verdict::Finding;
use super::violation::{Violation, show};
use crate::kinds::{Kind, PAUSE_TIMESTAMP};
use crate::policy::model::Policy;
use crate::rollout::Map;

/// Rule 19's finding, if the write sets or changes the annotation and is
/// not Numaflow's controller's (for a template: anyone's).
pub(crate) fn finding(policy: &Policy, write: &GuardedWrite<'_>) -> Option<Finding> {
    let map = match write.kind {
        Kind::Pipeline => Map::Annotations,
        Kind::PipelineRollout => Map::TemplateAnnotations,
        _ => return None,
    };
    if write.is_delete() {
        return None;
    }
    let new = write.object.key_in(write.kind, map, PAUSE_TIMESTAMP)?;
    let old: Option<&Value> = write
        .old()
        .and_then(|o| o.key_in(write.kind, map, PAUSE_TIMESTAMP));
    let change = match old {
        Some(old) if old == new => return None,
        Some(_) => "change",
        None => "set",
    };
    let user = write.user.username();
    let template = write.kind == Kind::PipelineRollout;
    if !template && user == policy.numaflow.controller_account {
        return None;
    }
    Some(Finding {
        violation: Violation::PauseTimestampChanged {
            user: user.to_owned(),
            change,
            path: map.path(write.kind),
            value: show(new),
            template,
            controller: policy.numaflow.controller_account.clone(),
        },
        unchanged: false,
    })
}
