//! What admission reads from the cluster besides the request, followed in
//! every replica by watches into kube-runtime reflector stores:
//!
//! - the children (rule 29): a metadata-only watch of Pipelines,
//!   MonoVertices and InterStepBufferServices (kept without their
//!   annotations and managedFields) tells whether what Numaflow makes for
//!   a child belongs to a rollout's;
//! - the controller definitions (rule 27): a watch of the ConfigMaps
//!   labelled as Numaflow controller definitions, each kept as the
//!   versions it defines (its data, annotations and managedFields
//!   dropped), tells where Numaplane would take a version from.
//!
//! The stores hold one entry per object in the cluster, whatever requests
//! arrive; a request only reads them. Until a watch's first list is in, or
//! while a CRD is missing, the answer is "cannot be told", which the rules
//! judge as the risky case.

use std::collections::BTreeMap;

use futures_util::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::background::audit::watch::not_served;
use crate::kinds::{self, Kind, NUMAPLANE_GROUP, PARENT_ROLLOUT};
use crate::logtext::Escaped;
use crate::namespace_config::{CONFIG_LABEL, CONTROLLER_DEFINITIONS};
use crate::policy::rules::{Belonging, ChildLookup, DefinitionLookup, Definitions};

type Meta = PartialObjectMeta<DynamicObject>;

/// The three kinds of child and the controller definitions, each in a
/// store a watch keeps current.
#[derive(Clone)]
pub struct Watched {
    stores: Vec<(Kind, ApiResource, Store<Meta>)>,
    definitions: Store<ConfigMap>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("kinds", &self.stores.len())
            .field("definitions", &self.definitions.len())
            .finish()
    }
}

/// The versions a definitions ConfigMap's data define, as Numaplane reads
/// each value (`controllerDefinitions[].version`); a value that is not
/// such YAML defines none, as Numaplane skips it.
fn defined_versions(data: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    #[derive(serde::Deserialize)]
    struct Definition {
        version: String,
    }
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(rename = "controllerDefinitions", default)]
        controller_definitions: Vec<Definition>,
    }
    data.into_iter()
        .flatten()
        .filter_map(|(_, text)| serde_saphyr::from_str::<Config>(text).ok())
        .flat_map(|config| config.controller_definitions)
        .map(|definition| (definition.version, String::new()))
        .collect()
}

/// Whether the first list of `store` is in.
fn ready<K>(store: &Store<K>) -> bool
where
    K: kube::runtime::reflector::Lookup + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.wait_until_ready().now_or_never().is_some()
}

/// The rollout that owns a child, by its ownerReference to a Numaplane
/// rollout or its parent-rollout-name label (rule 26's test).
fn owning_rollout(meta: &Meta) -> Option<String> {
    let by_reference = meta.metadata.owner_references.iter().flatten().find(|r| {
        r.api_version
            .split_once('/')
            .is_some_and(|(group, _)| group == NUMAPLANE_GROUP)
    });
    if let Some(reference) = by_reference {
        return Some(reference.name.clone());
    }
    meta.metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(PARENT_ROLLOUT))
        .cloned()
}

impl Watched {
    /// Starts the watches on `client`; they run until the process ends.
    pub fn start(client: &kube::Client) -> Self {
        let mut stores = Vec::new();
        for kind in Kind::ALL.into_iter().filter(|k| k.is_child()) {
            let gvk = GroupVersionKind::gvk(kind.group(), kinds::VERSION, kind.kind());
            let resource = ApiResource::from_gvk_with_plural(&gvk, kind.resource());
            let writer = reflector::store::Writer::new(resource.clone());
            let store = writer.as_reader();
            // An Api of PartialObjectMeta asks for metadata only.
            let api: Api<Meta> = Api::all_with(client.clone(), &resource);
            let events = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|meta| {
                    // Only the labels and ownerReferences are read.
                    meta.metadata.managed_fields = None;
                    meta.metadata.annotations = None;
                })
                .reflect(writer);
            tokio::spawn(follow(events, kind.resource()));
            stores.push((kind, resource, store));
        }
        let writer = reflector::store::Writer::default();
        let definitions = writer.as_reader();
        let api: Api<ConfigMap> = Api::all(client.clone());
        let selector = format!("{CONFIG_LABEL}={CONTROLLER_DEFINITIONS}");
        let events = watcher::watcher(api, watcher::Config::default().labels(&selector))
            .default_backoff()
            .modify(|map| {
                map.data = Some(defined_versions(map.data.as_ref()));
                map.binary_data = None;
                map.metadata.annotations = None;
                map.metadata.managed_fields = None;
            })
            .reflect(writer);
        tokio::spawn(follow(events, "Numaflow controller definitions"));
        Self {
            stores,
            definitions,
        }
    }
}

/// Drives a watch for as long as it yields, saying once when it starts
/// failing (a kind not served, as where its CRD is not installed, or
/// another error; kube-runtime's backoff spaces the retries) and once when
/// it recovers, never once per retry.
async fn follow<K>(
    events: impl futures_util::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    what: &'static str,
) {
    let mut failing = false;
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Err(e) if !failing => {
                failing = true;
                if not_served(&e) {
                    tracing::info!(
                        what,
                        "not served (its CRD is not installed): a write that names one is judged as the risky case until it is"
                    );
                } else {
                    tracing::warn!(what, error = %Escaped(&e.to_string()), "cannot watch; a write that names one is judged as the risky case until the watch recovers");
                }
            }
            Err(_) => {}
            Ok(_) if failing => {
                failing = false;
                tracing::info!(what, "watching again");
            }
            Ok(_) => {}
        }
    }
}

impl DefinitionLookup for Watched {
    fn definitions(
        &self,
        namespace: &str,
        numaplane_namespace: &str,
        version: &str,
    ) -> Definitions {
        if !ready(&self.definitions) {
            return Definitions::Unknown(
                "the webhook has not yet listed the controller definitions; retry in a moment"
                    .to_owned(),
            );
        }
        let (mut own, mut numaplane, mut elsewhere) = (false, false, None);
        for map in self.definitions.state() {
            let defines = map.data.as_ref().is_some_and(|d| d.contains_key(version));
            match map.metadata.namespace.as_deref() {
                Some(ns) if defines && ns == numaplane_namespace => numaplane = true,
                Some(ns) if defines && ns == namespace => own = true,
                Some(ns) if defines => elsewhere = Some(ns.to_owned()),
                _ => {}
            }
        }
        Definitions::Found {
            own,
            numaplane,
            elsewhere,
        }
    }
}

impl ChildLookup for Watched {
    fn belonging(&self, namespace: &str, parents: &[(Kind, String)]) -> Belonging {
        let mut unknown = None;
        for (kind, name) in parents {
            let Some((_, resource, store)) = self.stores.iter().find(|(k, ..)| k == kind) else {
                continue;
            };
            if !ready(store) {
                unknown = Some(format!(
                    "the webhook has not yet listed the {} (their CRD may be missing); retry in a moment",
                    kind.resource()
                ));
                continue;
            }
            let key = ObjectRef::new_with(name, resource.clone()).within(namespace);
            if let Some(rollout) = store.get(&key).as_deref().and_then(owning_rollout) {
                return Belonging::Guarded {
                    kind: *kind,
                    child: name.clone(),
                    rollout,
                };
            }
        }
        unknown.map_or(Belonging::Free, Belonging::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definitions_value_defines_the_versions_numaplane_reads_and_garbage_none() {
        let data = BTreeMap::from([
            (
                "a.yaml".to_owned(),
                "controllerDefinitions:\n- version: \"1.8.1\"\n  fullSpec: |\n    kind: List\n- version: 9.9.9\n".to_owned(),
            ),
            ("b.yaml".to_owned(), "{{{ not yaml".to_owned()),
            ("c.yaml".to_owned(), "controllerDefinitions: 7\n".to_owned()),
            ("d.yaml".to_owned(), "other: x\n".to_owned()),
        ]);
        let versions: Vec<String> = defined_versions(Some(&data)).into_keys().collect();
        assert_eq!(versions, ["1.8.1", "9.9.9"]);
        assert!(defined_versions(None).is_empty());
    }

    #[test]
    fn a_child_is_a_rollouts_by_its_owner_reference_or_its_label() {
        let meta = |labels: &[(&str, &str)], owner: Option<&str>| {
            let mut meta = Meta {
                types: None,
                metadata: Default::default(),
                _phantom: Default::default(),
            };
            meta.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
            meta.metadata.owner_references = owner.map(|api_version| {
                vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: api_version.to_owned(),
                        kind: "PipelineRollout".to_owned(),
                        name: "by-reference".to_owned(),
                        ..Default::default()
                    },
                ]
            });
            meta
        };
        assert_eq!(
            owning_rollout(&meta(&[], Some("numaplane.numaproj.io/v1alpha1"))).as_deref(),
            Some("by-reference")
        );
        assert_eq!(
            owning_rollout(&meta(&[(PARENT_ROLLOUT, "by-label")], None)).as_deref(),
            Some("by-label")
        );
        // An owner of another group, such as a kind that does not exist.
        assert_eq!(owning_rollout(&meta(&[], Some("example.com/v1"))), None);
    }
}
