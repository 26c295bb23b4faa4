//! What the audit judges: its kinds, one table entry per kind, and each
//! stored object as it is kept ([`Audited`]). An entry names the kind's
//! API identity, the rules a report lists for it and the label selector
//! its watch lists with. The watch, the judge and the reports read the
//! table; adding a kind is a line in [`KINDS`] and its watch in
//! `watch::all`.
//!
//! A stored object is read from the API server's bytes by admission's
//! reader into the rules' view, bounded ([`GuardedObject::from_stored`]):
//! what is kept of it does not grow with what a tenant stores. Its identity
//! is a second, metadata-only read of the same bytes (the reader passes
//! over the rest): were the view to carry name, namespace and
//! resourceVersion, every admission request would read them too, for
//! nothing (+3 % instructions on a parse, bench/instructions.sh).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Lookup;
use serde::Deserialize;
use serde::de::{Deserializer, Error as _};
use serde_json::value::RawValue;

use crate::kinds::{Kind, Resource};
use crate::lenient::{Obj, Text};
use crate::namespace_config::LABELLED_SELECTOR;
use crate::policy::rules::Rule;
use crate::rollout::GuardedObject;

/// One kind in the audit's table.
#[derive(Debug)]
pub struct KindEntry {
    /// A rollout's kind, or the ConfigMap.
    pub resource: Resource,
    /// The rules every object of this kind gets a result for, in order.
    pub rules: &'static [Rule],
    /// The label selector its watch lists with (`None`: every object).
    pub label_selector: Option<&'static str>,
}

impl KindEntry {
    const fn of(guarded: Kind, rules: &'static [Rule]) -> Self {
        Self {
            resource: Resource::Guarded(guarded),
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

/// The kinds' indexes in [`KINDS`] (PipelineRollouts: the kind the sweeper
/// watches too; the ConfigMaps: Numaplane's labelled ones).
pub const PIPELINE_ROLLOUTS: usize = 0;
pub const MONO_VERTEX_ROLLOUTS: usize = 1;
pub const ISB_SERVICE_ROLLOUTS: usize = 2;
pub const NAMESPACE_CONFIGS: usize = 3;

/// The kinds audited, in report order, at the indexes named above. A watch
/// reports its kind by its index here.
pub static KINDS: [KindEntry; COUNT] = [
    KindEntry::of(Kind::PipelineRollout, PIPELINE_ROLLOUT_RULES),
    KindEntry::of(Kind::MonoVertexRollout, OTHER_ROLLOUT_RULES),
    KindEntry::of(Kind::IsbServiceRollout, OTHER_ROLLOUT_RULES),
    KindEntry {
        resource: Resource::ConfigMap,
        rules: NAMESPACE_CONFIG_RULES,
        label_selector: Some(LABELLED_SELECTOR),
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

/// One stored object of the kind at `KIND` in [`KINDS`]: its identity,
/// and the rules' view of it, bounded, shared by whoever holds the object.
#[derive(Clone)]
pub struct Audited<const KIND: usize> {
    /// Name, namespace, uid and resourceVersion only.
    pub metadata: ObjectMeta,
    pub view: Arc<GuardedObject>,
}

impl<const KIND: usize> Audited<KIND> {
    /// The kind's entry (a compile error when `KIND` is not in the table).
    const ENTRY: &'static KindEntry = {
        assert!(KIND < COUNT, "no such kind in the audit's table");
        &KINDS[KIND]
    };

    /// Reads one stored object from its JSON: its identity, and its view
    /// as [`GuardedObject::from_stored`] keeps it (the resourceVersion is
    /// not in the view, so a write that changes nothing the rules read
    /// leaves the view as it was). Only invalid JSON fails.
    pub fn from_json(json: &[u8]) -> Result<Self, serde_json::Error> {
        let Identity { metadata } = crate::skim::from_slice(json)?;
        let meta = match metadata {
            Obj::Present(meta) => meta,
            _ => IdentityMeta::default(),
        };
        Ok(Self {
            metadata: ObjectMeta {
                name: meta.name.0,
                namespace: meta.namespace.0,
                uid: meta.uid.0,
                resource_version: meta.resource_version.0,
                ..ObjectMeta::default()
            },
            view: Arc::new(GuardedObject::from_stored(json)?),
        })
    }
}

/// The identity a report names, and the version a watch resumes from.
#[derive(Default, Deserialize)]
struct Identity {
    #[serde(default)]
    metadata: Obj<IdentityMeta>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IdentityMeta {
    #[serde(default)]
    name: Text,
    #[serde(default)]
    namespace: Text,
    #[serde(default)]
    uid: Text,
    #[serde(default)]
    resource_version: Text,
}

impl<const KIND: usize> fmt::Debug for Audited<KIND> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Audited")
            .field("namespace", &self.metadata.namespace)
            .field("name", &self.metadata.name)
            .finish_non_exhaustive()
    }
}

/// Read from the bytes as the API server sent them: kube's client reads a
/// response or watch event with serde_json, which hands over the object's
/// text as found, and admission's reader reads that. (A deserializer that
/// buffers the object first, as serde does for an enum whose tag comes
/// after its content, cannot hand over its text: that is an error.)
impl<'de, const KIND: usize> Deserialize<'de> for Audited<KIND> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Self::from_json(raw.get().as_bytes()).map_err(D::Error::custom)
    }
}

impl<const KIND: usize> kube::Resource for Audited<KIND> {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Self::ENTRY.kind().into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        Self::ENTRY.resource.group().into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        Self::ENTRY.resource.version().into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Self::ENTRY.resource.resource().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One stored object, as the reflector stores hold it: its identity and
/// the rules' view of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub namespace: String,
    pub name: String,
    /// For the report's resource reference.
    pub uid: Option<String>,
    pub view: Arc<GuardedObject>,
}

/// The reflector stores know an object by its kind's index in
/// [`KINDS`], its namespace and its name.
impl Lookup for Entry {
    type DynamicType = usize;

    fn kind(kind: &usize) -> Cow<'_, str> {
        KINDS[*kind].kind().into()
    }

    fn group(kind: &usize) -> Cow<'_, str> {
        KINDS[*kind].resource.group().into()
    }

    fn version(kind: &usize) -> Cow<'_, str> {
        KINDS[*kind].resource.version().into()
    }

    fn plural(kind: &usize) -> Cow<'_, str> {
        KINDS[*kind].resource.resource().into()
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(self.name.as_str().into())
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(self.namespace.as_str().into())
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::background::audit::judge::{Judge, ObjectResults, enforcing};
    use crate::kinds::{
        BOOKKEEPING_ANNOTATIONS as ANN, BOOKKEEPING_LABELS as LAB, FORCE_PROMOTE_LABEL,
        MARKED_FOR_DELETION,
    };
    use crate::namespace_config::{CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG};
    use crate::policy::Policy;
    use crate::rollout::{ALLOW_DATA_LOSS, Map};

    /// `object` as the audit keeps it.
    fn stored<const KIND: usize>(object: &Value) -> Audited<KIND> {
        Audited::<KIND>::from_json(object.to_string().as_bytes()).expect("JSON")
    }

    /// What is kept of a view, near enough: its debug text.
    fn size(view: &GuardedObject) -> usize {
        format!("{view:?}").len()
    }

    /// The results of `view` as the kind at `kind`, under the default policy.
    fn judged(kind: usize, view: &GuardedObject) -> ObjectResults {
        let (policy, warn_only) = enforcing(&Policy::built_in());
        let judge = Judge::new(&policy, warn_only, time::OffsetDateTime::UNIX_EPOCH);
        judge.object(&KINDS[kind], "n", "r", view)
    }

    #[test]
    fn the_namespace_config_watch_selects_numaplanes_label_and_keeps_its_strategy() {
        assert_eq!(
            LABELLED_SELECTOR,
            format!("{CONFIG_LABEL} in ({NAMESPACE_CONFIG},{CONTROLLER_DEFINITIONS})")
        );
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n", "uid": "u", "resourceVersion": "7",
                "labels": {CONFIG_LABEL: NAMESPACE_CONFIG, "big": "b".repeat(5000)}},
            "data": {"upgradeStrategy": "no-strategy", "other": "x".repeat(5000)},
        });
        let kept = stored::<NAMESPACE_CONFIGS>(&object);
        // As kube's client reads it, from the event's text (the API server
        // writes `type` first).
        let event = format!(r#"{{"type":"ADDED","object":{object}}}"#);
        let read: kube::core::WatchEvent<Audited<NAMESPACE_CONFIGS>> =
            serde_json::from_str(&event).expect("event");
        let kube::core::WatchEvent::Added(read) = read else {
            panic!("an added object")
        };
        assert_eq!((&read.metadata, &read.view), (&kept.metadata, &kept.view));
        assert_eq!(kept.metadata.name.as_deref(), Some("c"));
        assert_eq!(kept.metadata.resource_version.as_deref(), Some("7"));
        assert!(size(&kept.view) < 600, "{:?}", kept.view);
        assert!(kept.view.config_read().skips_draining());
        // Of the keys Numaplane reads as upgradeStrategy, the one it reads
        // and one to name.
        let object = json!({
            "metadata": {"labels": {CONFIG_LABEL: NAMESPACE_CONFIG}},
            "data": {"UPGRADESTRATEGY": "", "upgradeStrategy": "pause-and-drain",
                "upgradestrategy": "", "UpgradeStrategy": "x", "other": "y"},
        });
        let read = stored::<NAMESPACE_CONFIGS>(&object).view.config_read();
        assert!(read.skips_draining());
        assert_eq!(
            read.clash,
            Some(("upgradestrategy".to_owned(), "upgradeStrategy".to_owned()))
        );
        assert_eq!(KINDS[NAMESPACE_CONFIGS].api_version(), "v1");
    }

    #[test]
    fn a_stored_rollout_keeps_what_the_rules_read_and_nothing_of_the_spec() {
        let sample = include_str!("../../../tests/fixtures/numaplane-sample-pipelinerollout.yaml");
        let mut object: Value = serde_saphyr::from_str(sample).expect("sample YAML");
        object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "fieldsV1": {}}]);
        object["metadata"]["annotations"] =
            json!({ALLOW_DATA_LOSS: "true", "other": "x".repeat(5000)});
        object["spec"]["pipeline"]["spec"]["vertices"] = json!([{"name": "v".repeat(20_000)}]);
        let kept = stored::<PIPELINE_ROLLOUTS>(&object);
        assert!(
            size(&kept.view) < 1500,
            "{} bytes: {:?}",
            size(&kept.view),
            kept.view
        );
        assert!(kept.view.forces_reapply());
        // What the rules read is the same in what is kept and the whole object.
        let whole = GuardedObject::from_json(&object.to_string()).expect("view");
        assert_eq!(judged(0, &whole), judged(0, &kept.view));
    }

    #[test]
    fn each_stored_rollout_keeps_only_the_numaplane_keys_of_its_child_template() {
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
        labels["numaplane.numaproj.io/unread"] = json!("z".repeat(5000));
        for (index, entry) in KINDS.iter().enumerate() {
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
            let kept = Audited::<PIPELINE_ROLLOUTS>::from_json(object.to_string().as_bytes())
                .expect("JSON");
            let whole = GuardedObject::from_json(&object.to_string()).expect("view");
            let unread = "numaplane.numaproj.io/unread";
            assert!(whole.key_in(kind, Map::TemplateLabels, unread).is_some());
            assert_eq!(kept.view.key_in(kind, Map::TemplateLabels, unread), None);
            assert!(
                size(&kept.view) < 2500,
                "{}: {} bytes",
                entry.kind(),
                size(&kept.view)
            );
            // What rules 13 to 15 read is the same in what is kept and the whole object.
            for key in LAB.iter().chain(&[FORCE_PROMOTE_LABEL]) {
                let map = Map::TemplateLabels;
                assert_eq!(
                    whole.key_in(kind, map, key),
                    kept.view.key_in(kind, map, key),
                    "{key}"
                );
            }
            for key in ANN.iter().chain(&[MARKED_FOR_DELETION]) {
                let map = Map::TemplateAnnotations;
                assert_eq!(
                    whole.key_in(kind, map, key),
                    kept.view.key_in(kind, map, key),
                    "{key}"
                );
            }
            assert_eq!(judged(index, &whole), judged(index, &kept.view));
        }
    }
}
