//! The kinds the audit judges: one table entry per kind, depending on
//! nothing else in the audit. An entry names the kind's API identity, the
//! parts of a stored object its rules read (the [`Shape`] its watch
//! keeps), and the rules a report lists for it. The watch, the slim reader
//! and the judge read the table; adding a kind is a line in [`KINDS`] and
//! its watch in `watch::all`.

use self::shapes::{
    ISB_SERVICE_ROLLOUT_SHAPE, MONO_VERTEX_ROLLOUT_SHAPE, NAMESPACE_CONFIG_SHAPE,
    PIPELINE_ROLLOUT_SHAPE,
};
use crate::kinds::{Kind, Resource};
use crate::policy::rules::Rule;

/// Which parts of an object to keep.
#[derive(Debug)]
pub enum Shape {
    /// Keep the value as it is.
    Leaf,
    /// An object: keep these keys (each with its own shape), drop the rest.
    Fields(&'static [(&'static str, Shape)]),
    /// An object a consumer decodes with Go's `encoding/json`: keep every
    /// key that matches one of these fields as Go matches it (in any case,
    /// [`crate::go_keys`]), each with the field's shape.
    GoFields(&'static [(&'static str, Shape)]),
    /// A list: keep every item, each with this shape.
    Items(&'static Shape),
}

/// One kind in the audit's table.
#[derive(Debug)]
pub struct KindEntry {
    /// What it is: a rollout's kind, or the ConfigMap.
    pub resource: Resource,
    /// What a stored object keeps.
    pub shape: &'static Shape,
    /// The rules every object of this kind gets a result for, in order.
    pub rules: &'static [Rule],
    /// The label selector its watch lists with (`None`: every object).
    pub label_selector: Option<&'static str>,
}

impl KindEntry {
    const fn of(guarded: Kind, shape: &'static Shape, rules: &'static [Rule]) -> Self {
        Self {
            resource: Resource::Guarded(guarded),
            shape,
            rules,
            label_selector: None,
        }
    }

    /// The kind, as objects name it.
    pub const fn kind(&self) -> &'static str {
        self.resource.kind()
    }

    /// `group/version`, as `apiVersion` writes it (`v1` for the core group).
    pub fn api_version(&self) -> String {
        self.resource.api_version()
    }
}

/// How many kinds the audit judges.
pub const COUNT: usize = 4;

/// The label selector of the labelled ConfigMaps' watch (`CONFIG_LABEL
/// in (NAMESPACE_CONFIG, CONTROLLER_DEFINITIONS)`, which a test checks):
/// only those ConfigMaps are listed.
const NAMESPACE_CONFIG_SELECTOR: &str =
    "numaplane.numaproj.io/config in (namespace-level-config,numaflow-controller-definitions)";

/// The kinds audited, in report order. A watch reports its kind by its
/// index here.
pub static KINDS: [KindEntry; COUNT] = [
    KindEntry::of(
        Kind::PipelineRollout,
        &PIPELINE_ROLLOUT_SHAPE,
        PIPELINE_ROLLOUT_RULES,
    ),
    KindEntry::of(
        Kind::MonoVertexRollout,
        &MONO_VERTEX_ROLLOUT_SHAPE,
        OTHER_ROLLOUT_RULES,
    ),
    KindEntry::of(
        Kind::IsbServiceRollout,
        &ISB_SERVICE_ROLLOUT_SHAPE,
        OTHER_ROLLOUT_RULES,
    ),
    KindEntry {
        resource: Resource::ConfigMap,
        shape: &NAMESPACE_CONFIG_SHAPE,
        rules: NAMESPACE_CONFIG_RULES,
        label_selector: Some(NAMESPACE_CONFIG_SELECTOR),
    },
];

/// The rules a labelled ConfigMap's results are filed under: its
/// strategy's value, whether it makes the namespace skip draining, and
/// whether it holds controller definitions outside Numaplane's namespace.
pub const NAMESPACE_CONFIG_RULES: &[Rule] = &[
    Rule::NamespaceStrategyValue,
    Rule::NamespaceStrategy,
    Rule::ControllerDefinitions,
];

/// The rules a PipelineRollout's results are filed under. A stored force
/// is filed under the rule that gates setting it (6 and 7), its state
/// under the rule that warns of it being left on (11 and 12) included.
pub const PIPELINE_ROLLOUT_RULES: &[Rule] = &[
    Rule::TimeoutInteger,
    Rule::TimeoutRange,
    Rule::TimeoutOverflow,
    Rule::AllowDataLossValue,
    Rule::ForceReapply,
    Rule::ForcePromote,
    Rule::ForcePromoteLabel,
    Rule::DeleteUndrained,
    Rule::Bookkeeping,
    Rule::DeletionTimeoutInteger,
    Rule::DeletionTimeoutRange,
    Rule::DeletionTimeoutOverflow,
    Rule::HpaRider,
    Rule::AccessRider,
];

/// The rules a MonoVertexRollout's or an ISBServiceRollout's results are
/// filed under: the drain-timeout and allow-data-loss rules are a
/// PipelineRollout's only, and Numaplane ignores marked-for-deletion on
/// their children.
pub const OTHER_ROLLOUT_RULES: &[Rule] = &[
    Rule::ForcePromote,
    Rule::ForcePromoteLabel,
    Rule::Bookkeeping,
];

mod shapes;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use serde_json::Value;

    use super::*;
    use crate::background::audit::slim::prune;
    use crate::kinds::{
        BOOKKEEPING_ANNOTATIONS as ANN, BOOKKEEPING_LABELS as LAB, CONFIG_LABEL,
        CONTROLLER_DEFINITIONS, FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION, NAMESPACE_CONFIG,
    };
    use crate::rollout::ALLOW_DATA_LOSS;

    #[test]
    fn the_namespace_config_watch_selects_numaplanes_label_and_keeps_its_strategy() {
        assert_eq!(
            NAMESPACE_CONFIG_SELECTOR,
            format!("{CONFIG_LABEL} in ({NAMESPACE_CONFIG},{CONTROLLER_DEFINITIONS})")
        );
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "uid": "u",
                "labels": {CONFIG_LABEL: NAMESPACE_CONFIG, "big": "b".repeat(5000)}},
            "data": {"upgradeStrategy": "no-strategy", "other": "x".repeat(5000)},
        });
        let slim = prune(&object.to_string(), &NAMESPACE_CONFIG_SHAPE).expect("prunes");
        assert!(slim.to_string().len() < 300, "{slim}");
        let kept = crate::rollout::GuardedObject::from_json(&slim.to_string()).expect("view");
        assert!(crate::namespace_config::ConfigRead::of(&kept).skips_draining());
        // Every key Numaplane reads as upgradeStrategy is kept, up to the two
        // greatest in byte order: the one it reads and one to name.
        let object = json!({
            "metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}},
            "data": {"UPGRADESTRATEGY": "", "upgradeStrategy": "pause-and-drain",
                "upgradestrategy": "", "UpgradeStrategy": "x", "other": "y"},
        });
        let slim = prune(&object.to_string(), &NAMESPACE_CONFIG_SHAPE).expect("prunes");
        assert_eq!(
            slim["data"],
            json!({"upgradeStrategy": "pause-and-drain", "upgradestrategy": ""})
        );
        let kept = crate::rollout::GuardedObject::from_json(&slim.to_string()).expect("view");
        let read = crate::namespace_config::ConfigRead::of(&kept);
        assert!(read.skips_draining());
        assert_eq!(
            read.clash,
            Some(("upgradestrategy".to_owned(), "upgradeStrategy".to_owned()))
        );
        assert_eq!(KINDS[3].api_version(), "v1");
    }

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
        let kept = crate::rollout::GuardedObject::from_json(&text).expect("view");
        assert!(kept.forces_reapply());
        assert!(slim["metadata"].get("managedFields").is_none());
        assert!(slim["spec"]["pipeline"]["spec"].get("vertices").is_none());
        // What the rules read is the same in the slim and the whole object.
        let whole = crate::rollout::GuardedObject::from_json(&object.to_string()).expect("view");
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
        for entry in &KINDS {
            let Some(kind) = entry.resource.guarded() else {
                continue;
            };
            let template = kind.template().expect("a rollout");
            let object = json!({
                "apiVersion": entry.api_version(),
                "metadata": {"name": "r", "namespace": "n", "labels": {"big": "b".repeat(5000)}},
                "spec": {template: {
                    "metadata": {"labels": labels, "annotations": annotations, "name": "x"},
                    "spec": {"vertices": [{"name": "v".repeat(20_000)}]},
                }},
            });
            let slim = prune(&object.to_string(), entry.shape).expect("prunes");
            let meta = &slim["spec"][template]["metadata"];
            let mut want_labels = bookkeeping.clone();
            want_labels[FORCE_PROMOTE_LABEL] = json!("true");
            assert_eq!(meta["labels"], want_labels, "{}", entry.kind());
            let mut want_annotations = annotations.clone();
            if let Some(map) = want_annotations.as_object_mut() {
                map.remove("other");
            }
            assert_eq!(meta["annotations"], want_annotations, "{}", entry.kind());
            assert!(meta.get("name").is_none(), "{}", entry.kind());
            assert!(slim["metadata"].get("labels").is_none(), "{}", entry.kind());
            let text = slim.to_string();
            assert!(text.len() < 1500, "{}: {} bytes", entry.kind(), text.len());
            // What rules 13 to 15 read is the same in the slim and the whole object.
            let whole =
                crate::rollout::GuardedObject::from_json(&object.to_string()).expect("view");
            let kept = crate::rollout::GuardedObject::from_json(&text).expect("view");
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
