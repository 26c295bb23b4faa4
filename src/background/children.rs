//! The webhook's view of the children, for rule 29: in every replica, a
//! metadata-only watch of Pipelines, MonoVertices and
//! InterStepBufferServices, kept in kube-runtime reflector stores, tells
//! whether what Numaflow makes for a child belongs to a rollout's. The
//! stores hold one entry per child in the cluster (managedFields dropped),
//! whatever requests arrive; a request only reads them. Until a kind's
//! first list is in, or while its CRD is missing, the answer for it is
//! "cannot be told", which the rule judges as a rollout's.

use futures_util::{FutureExt as _, StreamExt as _};
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::kinds::{self, Kind, NUMAPLANE_GROUP, PARENT_ROLLOUT};
use crate::logtext::Escaped;
use crate::policy::rules::{Belonging, ChildLookup};

type Meta = PartialObjectMeta<DynamicObject>;

/// The three kinds of child, each in a store a watch keeps current.
#[derive(Clone)]
pub struct ChildrenView {
    stores: Vec<(Kind, ApiResource, Store<Meta>)>,
}

impl std::fmt::Debug for ChildrenView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildrenView")
            .field("kinds", &self.stores.len())
            .finish()
    }
}

/// The API resource of a child kind.
fn api_resource(kind: Kind) -> ApiResource {
    let api_version = format!("{}/{}", kind.group(), kinds::VERSION);
    ApiResource {
        group: kind.group().to_owned(),
        version: kinds::VERSION.to_owned(),
        api_version,
        kind: kind.kind().to_owned(),
        plural: kind.resource().to_owned(),
    }
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

impl ChildrenView {
    /// Starts the watches on `client`; they run until the process ends.
    pub fn start(client: &kube::Client) -> Self {
        let mut stores = Vec::new();
        for kind in Kind::ALL.into_iter().filter(|k| k.is_child()) {
            let resource = api_resource(kind);
            let writer = reflector::store::Writer::new(resource.clone());
            let store = writer.as_reader();
            // An Api of PartialObjectMeta asks for metadata only.
            let api: Api<Meta> = Api::all_with(client.clone(), &resource);
            let events = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|meta| meta.metadata.managed_fields = None)
                .reflect(writer);
            tokio::spawn(events.for_each(move |event| {
                if let Err(e) = event {
                    tracing::warn!(kind = kind.kind(), error = %Escaped(&e.to_string()), "cannot watch the children; what Numaflow makes for them is judged as a rollout's until the watch recovers");
                }
                std::future::ready(())
            }));
            stores.push((kind, resource, store));
        }
        Self { stores }
    }
}

impl ChildLookup for ChildrenView {
    fn belonging(&self, namespace: &str, parents: &[(Kind, String)]) -> Belonging {
        let mut unknown = None;
        for (kind, name) in parents {
            let Some((_, resource, store)) = self.stores.iter().find(|(k, ..)| k == kind) else {
                continue;
            };
            if store.wait_until_ready().now_or_never().is_none() {
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
