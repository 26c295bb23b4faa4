//! PipelineRollouts: their identity (from [`crate::kinds`], where every
//! guarded kind's is written), and a typed, lenient view of the few fields
//! the policy judges, read in one pass; every other field is skipped
//! without being built. The same view reads the other guarded kinds (the
//! other rollouts and the children): their labels, annotations, owner and
//! the metadata a rollout copies onto its children ([`keys`]).

mod bounded;
mod child;
mod drain;
mod fields;
mod keys;
mod lifecycle;

pub(crate) use child::{ChildContent, Ownership};

pub(crate) use drain::{DEFAULT_DELETION_WORDS, DELETION_FIELD, DeletionTimeout};
pub use fields::{ANNOTATIONS, DESIRED_PHASE, FORCE_PROMOTE_FIELD, FieldPath, LABELS};
pub(crate) use fields::{
    PAUSE_BEGIN, SCALE_FACTOR_FIELD, TEMPLATE_ANNOTATIONS, UPGRADE_IN_PROGRESS,
};
pub(crate) use keys::{Keys, Map, TemplateMeta};
pub use lifecycle::LifecycleKey;
pub(crate) use lifecycle::TimeoutSlot;

use self::lifecycle::Lifecycle;

use serde::Deserialize;
use serde_json::Value;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::kinds::Kind;
use crate::lenient::{JsonKind, List, Obj, Text};
use crate::namespace_config::{CONFIG_LABEL, ConfigData, ConfigRead};

use self::keys::Template;

pub(crate) const GROUP: &str = Kind::PipelineRollout.group();
pub(crate) const VERSION: &str = crate::kinds::VERSION;
pub(crate) const RESOURCE: &str = Kind::PipelineRollout.resource();
pub(crate) const KIND: &str = Kind::PipelineRollout.kind();

pub use crate::kinds::ALLOW_DATA_LOSS;

/// The drain timeout, `spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds`.
pub(crate) const TIMEOUT_FIELD: FieldPath = LifecycleKey::Pause.rollout_field();
/// The webhook's own annotation recording which progressive upgrade a
/// forcePromote was set for (`forcePromote.oneShot`): `upgrade:NAME` when
/// it was set while the upgrade of child NAME was in progress, `after:NAME`
/// when it was set after that upgrade had ended (`after:` alone: no upgrade
/// yet).
pub const FORCE_PROMOTE_FOR: &str =
    "pipelinerollout-webhook.numaplane.numaproj.io/force-promote-for";

/// The fields the policy reads of any guarded object: a PipelineRollout,
/// the other rollouts (they share `metadata` and `spec.strategy`), a child
/// (read by [`child`]'s reader: its `spec` and `status` kept whole too) and
/// a namespace-level ConfigMap (its `data`). Admission, `check`, the audit
/// and the sweeper all judge this one view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuardedObject {
    metadata: Obj<Metadata>,
    spec: Obj<Spec>,
    status: Obj<Status>,
    /// A ConfigMap's `data`, read for Numaplane's namespace-level
    /// configuration only (no rollout has a top-level `data`).
    data: Obj<ConfigData>,
    /// A child's `spec` and `status` as found (rule 26 compares them);
    /// `None` for an object whose `kind` names no child.
    child: Option<Box<ChildContent>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    #[serde(default)]
    annotations: Obj<Keys>,
    #[serde(default)]
    labels: Obj<Keys>,
    /// As found: rule 26 compares it whole, and [`PipelineRollout::parent`]
    /// reads the owner from it.
    #[serde(default)]
    owner_references: Option<Value>,
    /// As found: rule 26 compares it on children.
    #[serde(default)]
    finalizers: Option<Value>,
    #[serde(default)]
    uid: Text,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    pipeline: Obj<Pipeline>,
    #[serde(default)]
    mono_vertex: Obj<Template>,
    #[serde(default)]
    inter_step_buffer_service: Obj<Template>,
    #[serde(default)]
    strategy: Obj<Strategy>,
    #[serde(default)]
    riders: List<Obj<drain::Rider>>,
    /// A child Pipeline's own lifecycle (`spec.lifecycle`).
    #[serde(default)]
    lifecycle: Obj<Lifecycle>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct Pipeline {
    #[serde(default)]
    metadata: Obj<TemplateMeta>,
    #[serde(default)]
    spec: Obj<PipelineSpec>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct PipelineSpec {
    #[serde(default)]
    lifecycle: Obj<Lifecycle>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Strategy {
    #[serde(default)]
    recycle_strategy: Obj<RecycleStrategy>,
    #[serde(default)]
    progressive: Obj<Progressive>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RecycleStrategy {
    #[serde(default)]
    scale_factor: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Progressive {
    #[serde(default)]
    force_promote: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    upgrade_in_progress: Text,
    #[serde(default)]
    conditions: List<Obj<Condition>>,
    #[serde(default)]
    pause_status: Obj<PauseStatus>,
    #[serde(default)]
    progressive_status: Obj<ProgressiveStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProgressiveStatus {
    #[serde(default)]
    upgrading_pipeline_status: Obj<UpgradingPipelineStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct UpgradingPipelineStatus {
    #[serde(default)]
    name: Text,
}

/// Where a progressive upgrade stands, as the stored status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProgressiveUpgrade<'a> {
    /// Whether one is in progress (`status.upgradeInProgress` is
    /// `Progressive`).
    pub(crate) in_progress: bool,
    /// The child of the current or most recent one
    /// (`status.progressiveStatus.upgradingPipelineStatus.name`), if any.
    pub(crate) child: Option<&'a str>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PauseStatus {
    #[serde(default)]
    last_pause_begin_time: Text,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
struct Condition {
    #[serde(default, rename = "type")]
    type_: Text,
    #[serde(default)]
    status: Text,
    #[serde(default)]
    reason: Text,
    #[serde(default, rename = "lastTransitionTime")]
    last_transition_time: Text,
}

impl Condition {
    fn is_pause(&self) -> bool {
        self.type_.as_deref() == Some("PipelinePausingOrPaused")
    }

    fn is_true(&self) -> bool {
        self.status.as_deref() == Some("True")
    }

    fn says_pausing(&self) -> bool {
        self.is_pause() && self.is_true() && self.reason.as_deref() == Some("PipelinePausing")
    }
}

/// When the stored status says the pause began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PauseStart {
    At(OffsetDateTime),
    /// The status names no start.
    Missing,
    /// The status names a start that is not an RFC 3339 time: its path and
    /// the value as found.
    Unreadable {
        path: &'static str,
        value: String,
    },
}

/// The dotted path of the condition's start time, for messages.
const CONDITION_TIME_PATH: &str = "status.conditions[PipelinePausingOrPaused].lastTransitionTime";

fn read_time(text: &Text, path: &'static str) -> PauseStart {
    match text.as_deref() {
        None | Some("") => PauseStart::Missing,
        Some(value) => OffsetDateTime::parse(value, &Rfc3339).map_or_else(
            |_| PauseStart::Unreadable {
                path,
                value: value.to_owned(),
            },
            PauseStart::At,
        ),
    }
}

impl GuardedObject {
    #[cfg(test)]
    fn config_data(&self) -> &Obj<ConfigData> {
        &self.data
    }

    /// This object as Numaplane reads a ConfigMap it labels.
    pub(crate) fn config_read(&self) -> ConfigRead {
        let label = self.label(CONFIG_LABEL).and_then(Value::as_str);
        ConfigRead::of(label, &self.data)
    }

    #[cfg(test)]
    pub(crate) fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        crate::skim::from_slice(json.as_bytes())
    }

    fn strategy(&self) -> Option<&Strategy> {
        self.spec.get()?.strategy.get()
    }

    /// `spec.strategy.recycleStrategy.scaleFactor`, when set and not null.
    pub(crate) fn scale_factor(&self) -> Option<&Value> {
        self.strategy()?
            .recycle_strategy
            .get()?
            .scale_factor
            .as_ref()
            .filter(|v| !v.is_null())
    }

    /// Whether `spec.strategy.progressive.forcePromote` is JSON `true`.
    pub(crate) fn force_promote(&self) -> bool {
        self.strategy()
            .and_then(|s| s.progressive.get())
            .and_then(|p| p.force_promote.as_ref())
            .is_some_and(|v| v == &Value::Bool(true))
    }

    /// The `allow-data-loss` annotation's value, when present.
    pub(crate) fn allow_data_loss(&self) -> Option<&Value> {
        self.annotation(ALLOW_DATA_LOSS)
    }

    /// The webhook's record of the upgrade a forcePromote was set for
    /// ([`FORCE_PROMOTE_FOR`]), when present as a string.
    pub(crate) fn force_promote_for(&self) -> Option<&str> {
        self.annotation(FORCE_PROMOTE_FOR)?.as_str()
    }

    /// Where a progressive upgrade stands, as the stored status says.
    pub(crate) fn progressive_upgrade(&self) -> ProgressiveUpgrade<'_> {
        let status = self.status.get();
        ProgressiveUpgrade {
            in_progress: status
                .is_some_and(|s| s.upgrade_in_progress.as_deref() == Some("Progressive")),
            child: status
                .and_then(|s| s.progressive_status.get())
                .and_then(|p| p.upgrading_pipeline_status.get())
                .and_then(|u| u.name.as_deref()),
        }
    }

    /// Whether `allow-data-loss` is exactly the string `"true"`, the only
    /// value Numaplane acts on.
    pub(crate) fn forces_reapply(&self) -> bool {
        self.allow_data_loss().and_then(Value::as_str) == Some("true")
    }

    /// Whether `metadata.annotations` is an object (a patch can add a key).
    pub(crate) fn has_annotations(&self) -> bool {
        self.metadata
            .get()
            .is_some_and(|m| m.annotations.get().is_some())
    }

    /// Where `metadata`, `metadata.annotations` or `metadata.labels` is not
    /// an object: the dotted path and what was found.
    pub(crate) fn malformed_metadata(&self) -> Option<(&'static str, JsonKind)> {
        match &self.metadata {
            Obj::Wrong(kind) => Some(("metadata", *kind)),
            Obj::Present(meta) => match (&meta.annotations, &meta.labels) {
                (Obj::Wrong(kind), _) => Some((ANNOTATIONS.dotted(), *kind)),
                (_, Obj::Wrong(kind)) => Some((LABELS.dotted(), *kind)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The object's uid, when it has one (the API server sets it on CREATE
    /// before the validating webhooks run).
    pub(crate) fn uid(&self) -> Option<&str> {
        self.metadata.get().and_then(|m| m.uid.as_deref())
    }

    /// Whether the stored status says the pipeline is pausing right now:
    /// a pause-and-drain upgrade is in progress, or the controller's
    /// `PipelinePausingOrPaused` condition is True with reason
    /// `PipelinePausing` (a pause triggered by an ISBServiceRollout or
    /// NumaflowControllerRollout update).
    pub(crate) fn is_pausing(&self) -> bool {
        let Some(status) = self.status.get() else {
            return false;
        };
        if status.upgrade_in_progress.as_deref() == Some("PipelinePauseAndDrain") {
            return true;
        }
        self.conditions().any(Condition::says_pausing)
    }

    fn conditions(&self) -> impl Iterator<Item = &Condition> {
        self.status
            .get()
            .into_iter()
            .flat_map(|s| s.conditions.items().iter().filter_map(Obj::get))
    }

    /// Whether the stored status shows no pause at all: no pause-and-drain
    /// upgrade in progress and no `PipelinePausingOrPaused` condition that
    /// is True (pausing or paused). An object without a status shows none.
    pub(crate) fn pause_is_over(&self) -> bool {
        let upgrading = self
            .status
            .get()
            .is_some_and(|s| s.upgrade_in_progress.as_deref() == Some("PipelinePauseAndDrain"));
        !upgrading && !self.conditions().any(|c| c.is_pause() && c.is_true())
    }

    /// When the pause began: the `lastTransitionTime` of the
    /// `PipelinePausingOrPaused` condition while it says pausing, else
    /// `status.pauseStatus.lastPauseBeginTime`.
    pub(crate) fn pause_started(&self) -> PauseStart {
        if let Some(condition) = self.conditions().find(|c| c.says_pausing()) {
            let start = read_time(&condition.last_transition_time, CONDITION_TIME_PATH);
            if start != PauseStart::Missing {
                return start;
            }
        }
        match self.status.get().and_then(|s| s.pause_status.get()) {
            Some(pause) => read_time(&pause.last_pause_begin_time, PAUSE_BEGIN.dotted()),
            None => PauseStart::Missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view(v: Value) -> GuardedObject {
        GuardedObject::from_json(&v.to_string()).expect("valid JSON")
    }

    /// An object with `value` at `path` and nothing else.
    fn at(path: FieldPath, value: Value) -> GuardedObject {
        let object = path
            .keys()
            .iter()
            .rev()
            .fold(value, |inner, key| json!({ *key: inner }));
        view(object)
    }

    #[test]
    fn the_view_reads_each_field_at_its_path() {
        assert_eq!(
            at(SCALE_FACTOR_FIELD, json!(25)).scale_factor(),
            Some(&json!(25))
        );
        assert!(at(FORCE_PROMOTE_FIELD, json!(true)).force_promote());
        assert!(at(UPGRADE_IN_PROGRESS, json!("PipelinePauseAndDrain")).is_pausing());
        assert!(matches!(
            at(PAUSE_BEGIN, json!("2024-05-01T10:00:00Z")).pause_started(),
            PauseStart::At(_)
        ));
        let annotations = json!({ ALLOW_DATA_LOSS: "true", FORCE_PROMOTE_FOR: "after:" });
        assert!(at(ANNOTATIONS, annotations.clone()).forces_reapply());
        assert_eq!(
            at(ANNOTATIONS, annotations).force_promote_for(),
            Some("after:")
        );
        for key in [
            LifecycleKey::Pause,
            LifecycleKey::Deletion,
            LifecycleKey::DeprecatedDeletion,
        ] {
            let seven = json!(7);
            assert_eq!(
                at(key.rollout_field(), json!(7)).lifecycle_timeout(key),
                TimeoutSlot::Set(&seven),
                "{key:?}"
            );
            assert_eq!(
                at(key.child_field(), json!(7)).child_lifecycle_timeout(key),
                TimeoutSlot::Set(&seven),
                "{key:?}"
            );
        }
    }

    #[test]
    fn timeout_slot_for_each_shape() {
        let seven = json!(7);
        let cases: Vec<(Value, TimeoutSlot)> = vec![
            (json!({}), TimeoutSlot::Unset { depth: 0 }),
            (json!({"spec": null}), TimeoutSlot::Unset { depth: 0 }),
            (json!({"spec": {}}), TimeoutSlot::Unset { depth: 1 }),
            (
                json!({"spec": {"pipeline": {}}}),
                TimeoutSlot::Unset { depth: 2 },
            ),
            (
                json!({"spec": {"pipeline": {"spec": {"lifecycle": null}}}}),
                TimeoutSlot::Unset { depth: 3 },
            ),
            (
                json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": null}}}}}),
                TimeoutSlot::Unset { depth: 4 },
            ),
            (
                json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": 7}}}}}),
                TimeoutSlot::Set(&seven),
            ),
            (
                json!({"spec": {"pipeline": "oops"}}),
                TimeoutSlot::Blocked {
                    path: "spec.pipeline",
                    found: JsonKind::String,
                },
            ),
            (
                json!({"spec": {"pipeline": {"spec": {"lifecycle": [1]}}}}),
                TimeoutSlot::Blocked {
                    path: "spec.pipeline.spec.lifecycle",
                    found: JsonKind::Array,
                },
            ),
        ];
        for (object, want) in cases {
            assert_eq!(view(object.clone()).timeout(), want, "{object}");
        }
    }

    #[test]
    fn pausing_from_upgrade_or_condition() {
        let cond = |status: &str, reason: &str| {
            json!({"status": {"conditions": [
                {"type": "Other", "status": "True", "reason": "PipelinePausing"},
                {"type": "PipelinePausingOrPaused", "status": status, "reason": reason}
            ]}})
        };
        assert!(
            view(json!({"status": {"upgradeInProgress": "PipelinePauseAndDrain"}})).is_pausing()
        );
        assert!(view(cond("True", "PipelinePausing")).is_pausing());
        assert!(!view(cond("True", "PipelinePaused")).is_pausing());
        assert!(!view(cond("False", "Unpaused")).is_pausing());
        assert!(!view(json!({"status": {"upgradeInProgress": "Progressive"}})).is_pausing());
        assert!(!view(json!({"status": "weird"})).is_pausing());
        assert!(!view(json!({"status": {"conditions": "weird"}})).is_pausing());
    }

    #[test]
    fn reads_annotation_scale_factor_and_force_promote() {
        let object = view(json!({
            "metadata": {"annotations": {ALLOW_DATA_LOSS: "true", "other": "x"}},
            "spec": {"strategy": {"recycleStrategy": {"scaleFactor": 25}, "progressive": {"forcePromote": true}}}
        }));
        assert!(object.forces_reapply());
        assert_eq!(object.scale_factor(), Some(&json!(25)));
        assert!(object.force_promote());
        let other = view(
            json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "True"}},
            "spec": {"strategy": {"progressive": {"forcePromote": "true"}}}}),
        );
        assert!(!other.forces_reapply());
        assert!(!other.force_promote());
        assert_eq!(
            view(json!({"metadata": {"annotations": "x"}})).malformed_metadata(),
            Some(("metadata.annotations", JsonKind::String))
        );
    }
}
