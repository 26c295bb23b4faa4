//! The kinds the audit judges: one table entry per kind. An entry names
//! the kind's API identity, the parts of a stored object its rules read
//! (the [`Shape`] its watch keeps), the rules a report lists for it, and
//! how stored forces are judged by state. Adding a kind is adding a marker
//! type with [`AuditedKind`] and a line to [`KINDS`].

use futures_util::stream::BoxStream;
use serde_json::Value;

use self::shapes::{ISB_SERVICE_ROLLOUT_SHAPE, MONO_VERTEX_ROLLOUT_SHAPE, PIPELINE_ROLLOUT_SHAPE};
use super::judge;
use super::slim::Shape;
use super::watch::{self, WatchItem};
use crate::kinds::Kind;
use crate::rollout::{self, ALLOW_DATA_LOSS};

/// A kind's API identity and the parts of it kept, known at compile time
/// (the watch reads objects of it as [`super::slim::Slim`]).
pub trait AuditedKind: Send + Sync + 'static {
    /// The API group.
    const GROUP: &'static str;
    /// The version read.
    const VERSION: &'static str;
    /// The kind.
    const KIND: &'static str;
    /// The resource (plural) name.
    const PLURAL: &'static str;
    /// What a stored object keeps.
    const SHAPE: &'static Shape;
}

/// One kind in the audit's table.
#[derive(Debug)]
pub struct KindEntry {
    /// The API group.
    pub group: &'static str,
    /// The version read.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource (plural) name.
    pub plural: &'static str,
    /// The rules every object of this kind gets a result for, in order.
    pub rules: &'static [&'static str],
    /// Watches every object of the kind, slim.
    pub watch: fn(kube::Client) -> BoxStream<'static, WatchItem>,
    /// Judges one stored object (its slim JSON) against the policy.
    pub judge: for<'a> fn(&'a judge::Judge<'a>, &'a Self, &'a str) -> judge::JudgeFuture<'a>,
}

impl KindEntry {
    /// `group/version`, as `apiVersion` writes it.
    pub fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }
}

/// The kinds audited, in report order.
pub static KINDS: &[KindEntry] = &[
    KindEntry {
        group: rollout::GROUP,
        version: rollout::VERSION,
        kind: rollout::KIND,
        plural: rollout::RESOURCE,
        rules: PIPELINE_ROLLOUT_RULES,
        watch: watch::kind::<PipelineRollouts>,
        judge: judge::rollout,
    },
    KindEntry {
        group: MonoVertexRollouts::GROUP,
        version: MonoVertexRollouts::VERSION,
        kind: MonoVertexRollouts::KIND,
        plural: MonoVertexRollouts::PLURAL,
        rules: OTHER_ROLLOUT_RULES,
        watch: watch::kind::<MonoVertexRollouts>,
        judge: judge::rollout,
    },
    KindEntry {
        group: IsbServiceRollouts::GROUP,
        version: IsbServiceRollouts::VERSION,
        kind: IsbServiceRollouts::KIND,
        plural: IsbServiceRollouts::PLURAL,
        rules: OTHER_ROLLOUT_RULES,
        watch: watch::kind::<IsbServiceRollouts>,
        judge: judge::rollout,
    },
];

/// The rule names a PipelineRollout's results carry (see docs/audit.md for
/// the rule numbers each covers).
pub const PIPELINE_ROLLOUT_RULES: &[&str] = &[
    RULE_TIMEOUT_INTEGER,
    RULE_TIMEOUT_RANGE,
    RULE_TIMEOUT_OVERFLOW,
    RULE_ALLOW_DATA_LOSS_VALUE,
    RULE_FORCE_REAPPLY,
    RULE_FORCE_PROMOTE,
    RULE_TEMPLATE_FORCE_PROMOTE,
    RULE_TEMPLATE_DELETE_UNDRAINED,
    RULE_TEMPLATE_BOOKKEEPING,
];

/// The rule names a MonoVertexRollout's or an ISBServiceRollout's results
/// carry: the drain-timeout and allow-data-loss rules are a
/// PipelineRollout's only, and Numaplane ignores marked-for-deletion on
/// their children.
pub const OTHER_ROLLOUT_RULES: &[&str] = &[
    RULE_FORCE_PROMOTE,
    RULE_TEMPLATE_FORCE_PROMOTE,
    RULE_TEMPLATE_BOOKKEEPING,
];

/// Rule 2: the drain timeout is an integer (and can be reached).
pub const RULE_TIMEOUT_INTEGER: &str = "drain-timeout-integer";
/// Rule 3: the drain timeout is in the namespace's range.
pub const RULE_TIMEOUT_RANGE: &str = "drain-timeout-range";
/// Rule 4: the drain timeout times the recycle multiplier fits.
pub const RULE_TIMEOUT_OVERFLOW: &str = "drain-timeout-overflow";
/// Rule 5: allow-data-loss is a value Numaplane understands.
pub const RULE_ALLOW_DATA_LOSS_VALUE: &str = "allow-data-loss-value";
/// Rules 6 and 11: a stored forced re-apply, by state.
pub const RULE_FORCE_REAPPLY: &str = "force-reapply";
/// Rules 7 and 12: a stored forcePromote, by state.
pub const RULE_FORCE_PROMOTE: &str = "force-promote";
/// Rule 13: the force-promote label in the child template (its value,
/// and a stored one by state).
pub const RULE_TEMPLATE_FORCE_PROMOTE: &str = "template-force-promote";
/// Rule 14: marked-for-deletion in the child template, by state.
pub const RULE_TEMPLATE_DELETE_UNDRAINED: &str = "template-delete-undrained";
/// Rule 15: Numaplane's bookkeeping keys in the child template (and a
/// template metadata that is not an object).
pub const RULE_TEMPLATE_BOOKKEEPING: &str = "template-bookkeeping";
/// The object could not be judged at all.
pub const RULE_JUDGEABLE: &str = "judgeable";

/// The marker of PipelineRollouts in the table.
#[derive(Debug)]
pub struct PipelineRollouts;

impl AuditedKind for PipelineRollouts {
    const GROUP: &'static str = rollout::GROUP;
    const VERSION: &'static str = rollout::VERSION;
    const KIND: &'static str = rollout::KIND;
    const PLURAL: &'static str = rollout::RESOURCE;
    const SHAPE: &'static Shape = &PIPELINE_ROLLOUT_SHAPE;
}

/// The marker of MonoVertexRollouts in the table.
#[derive(Debug)]
pub struct MonoVertexRollouts;

impl AuditedKind for MonoVertexRollouts {
    const GROUP: &'static str = Kind::MonoVertexRollout.group();
    const VERSION: &'static str = crate::kinds::VERSION;
    const KIND: &'static str = Kind::MonoVertexRollout.kind();
    const PLURAL: &'static str = Kind::MonoVertexRollout.resource();
    const SHAPE: &'static Shape = &MONO_VERTEX_ROLLOUT_SHAPE;
}

/// The marker of ISBServiceRollouts in the table.
#[derive(Debug)]
pub struct IsbServiceRollouts;

impl AuditedKind for IsbServiceRollouts {
    const GROUP: &'static str = Kind::IsbServiceRollout.group();
    const VERSION: &'static str = crate::kinds::VERSION;
    const KIND: &'static str = Kind::IsbServiceRollout.kind();
    const PLURAL: &'static str = Kind::IsbServiceRollout.resource();
    const SHAPE: &'static Shape = &ISB_SERVICE_ROLLOUT_SHAPE;
}

/// Whether `value` (a slim object) is a stored forced re-apply.
pub fn forces_reapply(value: &Value) -> bool {
    value
        .pointer(&format!(
            "/metadata/annotations/{}",
            ALLOW_DATA_LOSS.replace('/', "~1")
        ))
        .and_then(Value::as_str)
        == Some("true")
}

mod shapes;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::background::audit::slim::prune;
    use crate::kinds::{
        BOOKKEEPING_ANNOTATIONS as ANN, BOOKKEEPING_LABELS as LAB, FORCE_PROMOTE_LABEL,
        MARKED_FOR_DELETION,
    };

    #[test]
    fn the_pipeline_rollout_shape_keeps_what_the_rules_read_and_nothing_of_the_spec() {
        let sample = include_str!("../../../tests/fixtures/numaplane-sample-pipelinerollout.yaml");
        let mut object: Value = serde_saphyr::from_str(sample).expect("sample YAML");
        object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "fieldsV1": {}}]);
        object["metadata"]["annotations"] =
            json!({ALLOW_DATA_LOSS: "true", "other": "x".repeat(5000)});
        object["spec"]["pipeline"]["spec"]["vertices"] = json!([{"name": "v".repeat(20_000)}]);
        let slim = prune(&object.to_string(), &PIPELINE_ROLLOUT_SHAPE).expect("prunes");
        let text = slim.to_string();
        assert!(text.len() < 600, "{} bytes: {text}", text.len());
        assert!(forces_reapply(&slim));
        assert!(slim["metadata"].get("managedFields").is_none());
        assert!(slim["spec"]["pipeline"]["spec"].get("vertices").is_none());
        // What the rules read is the same in the slim and the whole object.
        let whole = crate::rollout::PipelineRollout::from_json(&object.to_string()).expect("view");
        let kept = crate::rollout::PipelineRollout::from_json(&text).expect("view");
        assert_eq!(whole, kept);
    }

    #[test]
    fn each_rollout_shape_keeps_only_the_numaplane_keys_of_its_child_template() {
        let mut bookkeeping = json!({});
        for key in LAB {
            bookkeeping[key] = json!("x");
        }
        let mut annotations = json!({MARKED_FOR_DELETION: "true", "other": "y".repeat(5000)});
        for key in ANN {
            annotations[key] = json!("x");
        }
        let mut labels = bookkeeping.clone();
        labels[FORCE_PROMOTE_LABEL] = json!("true");
        labels["app.kubernetes.io/name"] = json!("z".repeat(5000));
        for entry in KINDS {
            let kind = Kind::from_kind(entry.group, entry.kind).expect("guarded");
            let template = kind.template().expect("a rollout");
            let object = json!({
                "apiVersion": entry.api_version(),
                "metadata": {"name": "r", "namespace": "n", "labels": {"big": "b".repeat(5000)}},
                "spec": {template: {
                    "metadata": {"labels": labels, "annotations": annotations, "name": "x"},
                    "spec": {"vertices": [{"name": "v".repeat(20_000)}]},
                }},
            });
            let shape = match entry.kind {
                "PipelineRollout" => &PIPELINE_ROLLOUT_SHAPE,
                "MonoVertexRollout" => MonoVertexRollouts::SHAPE,
                _ => IsbServiceRollouts::SHAPE,
            };
            let slim = prune(&object.to_string(), shape).expect("prunes");
            let meta = &slim["spec"][template]["metadata"];
            let mut want_labels = bookkeeping.clone();
            want_labels[FORCE_PROMOTE_LABEL] = json!("true");
            assert_eq!(meta["labels"], want_labels, "{}", entry.kind);
            let mut want_annotations = annotations.clone();
            if let Some(map) = want_annotations.as_object_mut() {
                map.remove("other");
            }
            assert_eq!(meta["annotations"], want_annotations, "{}", entry.kind);
            assert!(meta.get("name").is_none(), "{}", entry.kind);
            assert!(slim["metadata"].get("labels").is_none(), "{}", entry.kind);
            let text = slim.to_string();
            assert!(text.len() < 1500, "{}: {} bytes", entry.kind, text.len());
            // What rules 13 to 15 read is the same in the slim and the whole object.
            let whole =
                crate::rollout::PipelineRollout::from_json(&object.to_string()).expect("view");
            let kept = crate::rollout::PipelineRollout::from_json(&text).expect("view");
            for key in LAB.iter().chain(&[FORCE_PROMOTE_LABEL]) {
                let map = crate::rollout::Map::TemplateLabels;
                assert_eq!(
                    whole.key_in(kind, map, key),
                    kept.key_in(kind, map, key),
                    "{key}"
                );
            }
            for key in ANN.iter().chain(&[MARKED_FOR_DELETION]) {
                let map = crate::rollout::Map::TemplateAnnotations;
                assert_eq!(
                    whole.key_in(kind, map, key),
                    kept.key_in(kind, map, key),
                    "{key}"
                );
            }
        }
    }
}
