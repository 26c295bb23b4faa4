//! Every kind the webhook guards, and the Numaplane keys it judges on them:
//! group, version, resource and kind of each, where a rollout keeps the
//! metadata it copies onto its children, and which labels and annotations
//! are switches or bookkeeping. These facts are written here and nowhere
//! else (Numaplane 75c9dd5, `internal/common/common.go`).

/// Numaplane's API group (the rollouts).
pub const NUMAPLANE_GROUP: &str = "numaplane.numaproj.io";
/// Numaflow's API group (the children).
pub const NUMAFLOW_GROUP: &str = "numaflow.numaproj.io";
/// The version of every guarded kind (each CRD's only one).
pub const VERSION: &str = "v1alpha1";

/// A kind the webhook judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `numaplane.numaproj.io` PipelineRollout.
    PipelineRollout,
    /// `numaplane.numaproj.io` MonoVertexRollout.
    MonoVertexRollout,
    /// `numaplane.numaproj.io` ISBServiceRollout.
    IsbServiceRollout,
    /// `numaflow.numaproj.io` Pipeline, a PipelineRollout's child.
    Pipeline,
    /// `numaflow.numaproj.io` MonoVertex, a MonoVertexRollout's child.
    MonoVertex,
    /// `numaflow.numaproj.io` InterStepBufferService, an ISBServiceRollout's child.
    InterStepBufferService,
}

impl Kind {
    /// Every guarded kind.
    pub const ALL: [Kind; 6] = [
        Kind::PipelineRollout,
        Kind::MonoVertexRollout,
        Kind::IsbServiceRollout,
        Kind::Pipeline,
        Kind::MonoVertex,
        Kind::InterStepBufferService,
    ];

    /// The API group.
    pub const fn group(self) -> &'static str {
        match self {
            Self::PipelineRollout | Self::MonoVertexRollout | Self::IsbServiceRollout => {
                NUMAPLANE_GROUP
            }
            Self::Pipeline | Self::MonoVertex | Self::InterStepBufferService => NUMAFLOW_GROUP,
        }
    }

    /// The resource name (plural, lowercase).
    pub const fn resource(self) -> &'static str {
        match self {
            Self::PipelineRollout => "pipelinerollouts",
            Self::MonoVertexRollout => "monovertexrollouts",
            Self::IsbServiceRollout => "isbservicerollouts",
            Self::Pipeline => "pipelines",
            Self::MonoVertex => "monovertices",
            Self::InterStepBufferService => "interstepbufferservices",
        }
    }

    /// The kind as objects name it.
    pub const fn kind(self) -> &'static str {
        match self {
            Self::PipelineRollout => "PipelineRollout",
            Self::MonoVertexRollout => "MonoVertexRollout",
            Self::IsbServiceRollout => "ISBServiceRollout",
            Self::Pipeline => "Pipeline",
            Self::MonoVertex => "MonoVertex",
            Self::InterStepBufferService => "InterStepBufferService",
        }
    }

    /// The kind a request's `resource` names, if the webhook guards it.
    pub(crate) fn from_resource(group: &str, resource: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.group() == group && k.resource() == resource)
    }

    /// The kind an object's `apiVersion` group and `kind` name, if guarded.
    pub(crate) fn from_kind(group: &str, kind: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.group() == group && k.kind() == kind)
    }

    /// Whether Numaplane makes objects of this kind (a child), rather than
    /// people and Argo CD (a rollout).
    pub const fn is_child(self) -> bool {
        matches!(
            self,
            Self::Pipeline | Self::MonoVertex | Self::InterStepBufferService
        )
    }

    /// For a rollout: the key under `spec` whose `metadata` Numaplane copies
    /// onto every child it makes (`spec.pipeline.metadata`, ...).
    pub const fn template(self) -> Option<&'static str> {
        match self {
            Self::PipelineRollout => Some("pipeline"),
            Self::MonoVertexRollout => Some("monoVertex"),
            Self::IsbServiceRollout => Some("interStepBufferService"),
            _ => None,
        }
    }

    /// The rollout kind that makes children of this kind, for a child; the
    /// kind itself for a rollout.
    pub const fn rollout(self) -> Self {
        match self {
            Self::Pipeline => Self::PipelineRollout,
            Self::MonoVertex => Self::MonoVertexRollout,
            Self::InterStepBufferService => Self::IsbServiceRollout,
            other => other,
        }
    }

    /// The kind of child a rollout of this kind makes; the kind itself for
    /// a child.
    pub(crate) const fn child(self) -> Self {
        match self {
            Self::PipelineRollout => Self::Pipeline,
            Self::MonoVertexRollout => Self::MonoVertex,
            Self::IsbServiceRollout => Self::InterStepBufferService,
            other => other,
        }
    }

    /// Whether Numaplane acts on `marked-for-deletion` for this kind (it
    /// deletes recyclable Pipelines only; through the parent, the
    /// PipelineRollout's template).
    pub(crate) const fn honours_marked_for_deletion(self) -> bool {
        matches!(self, Self::Pipeline | Self::PipelineRollout)
    }
}

/// A kind Numaflow's controller makes for a child (rule 29): what it reads
/// back to decide a drain or an assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Made {
    /// `numaflow.numaproj.io` Vertex, one per vertex of a Pipeline.
    Vertex,
    /// `apps` Deployment: a Pipeline's daemon, a vertex's or a MonoVertex's pods.
    Deployment,
    /// `apps` StatefulSet: a vertex's or an InterStepBufferService's pods.
    StatefulSet,
    /// Core Service: a Pipeline's daemon, a vertex's headless Service.
    Service,
}

impl Made {
    /// Every kind Numaflow makes that the webhook judges.
    pub(crate) const ALL: [Made; 4] = [
        Made::Vertex,
        Made::Deployment,
        Made::StatefulSet,
        Made::Service,
    ];

    /// The API group (`""`: core).
    pub const fn group(self) -> &'static str {
        match self {
            Self::Vertex => NUMAFLOW_GROUP,
            Self::Deployment | Self::StatefulSet => "apps",
            Self::Service => "",
        }
    }

    const fn version(self) -> &'static str {
        match self {
            Self::Vertex => VERSION,
            Self::Deployment | Self::StatefulSet | Self::Service => "v1",
        }
    }

    /// The resource name (plural, lowercase).
    pub const fn resource(self) -> &'static str {
        match self {
            Self::Vertex => "vertices",
            Self::Deployment => "deployments",
            Self::StatefulSet => "statefulsets",
            Self::Service => "services",
        }
    }

    pub(crate) const fn kind(self) -> &'static str {
        match self {
            Self::Vertex => "Vertex",
            Self::Deployment => "Deployment",
            Self::StatefulSet => "StatefulSet",
            Self::Service => "Service",
        }
    }
}

/// A Numaplane kind that names a Numaflow controller version, which
/// Numaplane installs from the controller definitions (rule 27).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    /// `numaplane.numaproj.io` NumaflowController (`spec.version`).
    NumaflowController,
    /// `numaplane.numaproj.io` NumaflowControllerRollout
    /// (`spec.controller.version`), which Numaplane turns into a
    /// NumaflowController of that version.
    NumaflowControllerRollout,
}

impl ControllerKind {
    pub(crate) const ALL: [ControllerKind; 2] = [
        ControllerKind::NumaflowController,
        ControllerKind::NumaflowControllerRollout,
    ];

    const fn resource(self) -> &'static str {
        match self {
            Self::NumaflowController => "numaflowcontrollers",
            Self::NumaflowControllerRollout => "numaflowcontrollerrollouts",
        }
    }

    pub(crate) const fn kind(self) -> &'static str {
        match self {
            Self::NumaflowController => "NumaflowController",
            Self::NumaflowControllerRollout => "NumaflowControllerRollout",
        }
    }

    /// Where under `spec` the version is.
    pub(crate) const fn version_path(self) -> &'static [&'static str] {
        match self {
            Self::NumaflowController => &["version"],
            Self::NumaflowControllerRollout => &["controller", "version"],
        }
    }
}

pub(crate) const CONFIG_MAP_KIND: &str = "ConfigMap";

/// Every resource a webhook of this project is sent: the six guarded
/// kinds, what Numaflow makes for a child, the kinds that name a Numaflow
/// controller version, and the core ConfigMap (Numaplane's configuration).
/// Requests, Events, the forgery check and `check` read their group,
/// version, resource and kind from here only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Resource {
    /// A rollout or a child.
    Guarded(Kind),
    /// What Numaflow makes for a child (rule 29).
    Made(Made),
    /// A NumaflowController or NumaflowControllerRollout (rule 27).
    Controller(ControllerKind),
    /// A core/v1 ConfigMap: Numaplane's namespace-level configuration or
    /// controller definitions (rules 23, 24 and 27).
    ConfigMap,
}

impl Resource {
    pub(crate) const fn group(self) -> &'static str {
        match self {
            Self::Guarded(kind) => kind.group(),
            Self::Made(kind) => kind.group(),
            Self::Controller(_) => NUMAPLANE_GROUP,
            Self::ConfigMap => "",
        }
    }

    pub(crate) const fn version(self) -> &'static str {
        match self {
            Self::Guarded(_) | Self::Controller(_) => VERSION,
            Self::Made(kind) => kind.version(),
            Self::ConfigMap => "v1",
        }
    }

    pub(crate) const fn resource(self) -> &'static str {
        match self {
            Self::Guarded(kind) => kind.resource(),
            Self::Made(kind) => kind.resource(),
            Self::Controller(kind) => kind.resource(),
            Self::ConfigMap => CONFIGMAPS,
        }
    }

    pub(crate) const fn kind(self) -> &'static str {
        match self {
            Self::Guarded(kind) => kind.kind(),
            Self::Made(kind) => kind.kind(),
            Self::Controller(kind) => kind.kind(),
            Self::ConfigMap => CONFIG_MAP_KIND,
        }
    }

    /// `group/version`, or the version alone for the core group.
    pub(crate) fn api_version(self) -> String {
        match self.group() {
            "" => self.version().to_owned(),
            group => format!("{group}/{}", self.version()),
        }
    }

    /// Every resource (no two share a group and a resource, or a group and
    /// a kind).
    fn all() -> impl Iterator<Item = Self> {
        let made = Made::ALL.into_iter().map(Self::Made);
        let controllers = ControllerKind::ALL.into_iter().map(Self::Controller);
        let guarded = Kind::ALL.into_iter().map(Self::Guarded);
        guarded
            .chain(made)
            .chain(controllers)
            .chain([Self::ConfigMap])
    }

    /// The resource a request's `resource` names: the guarded kinds first,
    /// by their own table (every request's look-up: the chain of all costs
    /// it some 80 instructions more, bench/instructions.sh).
    pub(crate) fn from_resource(group: &str, resource: &str) -> Option<Self> {
        Kind::from_resource(group, resource)
            .map(Self::Guarded)
            .or_else(|| Self::all().find(|r| r.group() == group && r.resource() == resource))
    }

    /// The resource an object's `apiVersion` group and `kind` name, the
    /// guarded kinds first as in [`from_resource`](Self::from_resource).
    pub(crate) fn from_kind(group: &str, kind: &str) -> Option<Self> {
        Kind::from_kind(group, kind)
            .map(Self::Guarded)
            .or_else(|| Self::all().find(|r| r.group() == group && r.kind() == kind))
    }

    #[cfg(test)]
    pub(crate) const fn guarded(self) -> Option<Kind> {
        match self {
            Self::Guarded(kind) => Some(kind),
            _ => None,
        }
    }

    /// Whether its `/status` is judged like the object: a child's (rule 26)
    /// and a Vertex's (rule 29).
    pub(crate) fn status_judged(self) -> bool {
        matches!(self, Self::Made(Made::Vertex)) || matches!(self, Self::Guarded(k) if k.is_child())
    }
}

/// The labels Numaflow's controller puts on what it makes for a child,
/// naming the child: a Pipeline's, a MonoVertex's, an
/// InterStepBufferService's (Numaflow v1.8, `const.go`).
pub(crate) const NUMAFLOW_PARENT_LABELS: [(&str, Kind); 3] = [
    ("numaflow.numaproj.io/pipeline-name", Kind::Pipeline),
    ("numaflow.numaproj.io/mono-vertex-name", Kind::MonoVertex),
    (
        "numaflow.numaproj.io/isbsvc-name",
        Kind::InterStepBufferService,
    ),
];
/// The label every object Numaflow's controller makes carries, with the
/// value [`NUMAFLOW_PART_OF`]: the registration's objectSelector.
pub const PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
/// The value of [`PART_OF_LABEL`] on what Numaflow makes.
pub const NUMAFLOW_PART_OF: &str = "numaflow";

/// The annotation on a PipelineRollout that tells Numaplane to force a
/// re-apply without draining, when it is exactly `"true"`.
pub const ALLOW_DATA_LOSS: &str = "numaplane.numaproj.io/allow-data-loss";
/// The label that force-promotes an upgrading child: Numaplane checks only
/// that it is present (`progressive.go`), so any value acts.
pub const FORCE_PROMOTE_LABEL: &str = "numaplane.numaproj.io/force-promote";
/// The annotation that makes Numaplane delete a recyclable Pipeline at
/// once, without draining, when it is exactly `"true"`.
pub const MARKED_FOR_DELETION: &str = "numaplane.numaproj.io/marked-for-deletion";
/// The label Numaplane keeps a child's upgrade state in.
pub const UPGRADE_STATE: &str = "numaplane.numaproj.io/upgrade-state";
/// The label naming the rollout a child belongs to.
pub const PARENT_ROLLOUT: &str = "numaplane.numaproj.io/parent-rollout-name";

/// The annotation Numaflow's controller sets on a Pipeline when it starts
/// pausing it (RFC 3339) and removes when it resumes it; Numaflow ends the
/// pause at this time plus `spec.lifecycle.pauseGracePeriodSeconds`, drained
/// or not (Numaflow v1.8, `pkg/reconciler/pipeline/controller.go`).
pub const PAUSE_TIMESTAMP: &str = "numaflow.numaproj.io/pause-timestamp";

/// Numaflow's controller account in a default install: the only writer of
/// [`PAUSE_TIMESTAMP`] (the policy's `numaflow.controllerAccount` default).
pub const NUMAFLOW_CONTROLLER: &str = "system:serviceaccount:numaflow-system:numaflow-sa";
/// Numaplane's controller account in a default install (the policy's
/// `numaplane.controllerAccount` default).
pub const NUMAPLANE_CONTROLLER: &str = "system:serviceaccount:numaplane-system:numaplane-sa";
/// The Kubernetes accounts that delete children as part of deleting their
/// owner or their namespace: the garbage collector and the namespace
/// controller (the policy's `forceReapply.deleteUndrained.systemDeleters`
/// default).
pub const SYSTEM_DELETERS: [&str; 2] = [
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:namespace-controller",
];
/// The core resource the namespace-level configuration is written as.
pub const CONFIGMAPS: &str = "configmaps";

/// The upgrade states in which a force-promote can act.
pub(crate) const PROMOTABLE_STATES: [&str; 2] = ["in-progress", "trial"];
/// The upgrade states in which marked-for-deletion can act.
pub(crate) const RECYCLABLE_STATES: [&str; 2] = ["recyclable", "recyclable-expired"];

/// The labels Numaplane keeps its bookkeeping in on a child: only its
/// controller may change them (a user who relabels a promoted Pipeline
/// `recyclable` could then delete it undrained).
pub const BOOKKEEPING_LABELS: [&str; 6] = [
    UPGRADE_STATE,
    "numaplane.numaproj.io/upgrade-state-reason",
    "numaplane.numaproj.io/progressive-result-state",
    PARENT_ROLLOUT,
    "numaplane.numaproj.io/isbsvc-name",
    "numaplane.numaproj.io/isbsvc-child-name",
];

/// The annotations Numaplane keeps its bookkeeping in on a child (removing
/// `requires-drain` makes a recyclable Pipeline deleted undrained; moving
/// `recyclable-start-time` back makes it expire).
pub const BOOKKEEPING_ANNOTATIONS: [&str; 5] = [
    "numaplane.numaproj.io/requires-drain",
    "numaplane.numaproj.io/force-drain-specs-started",
    "numaplane.numaproj.io/force-drain-specs-completed",
    "numaplane.numaproj.io/drain-failure-start-time",
    "numaplane.numaproj.io/recyclable-start-time",
];

/// Whether the lenient views keep `key` of a label or annotation map:
/// every key under Numaplane's and Numaflow's prefixes (the switches, the
/// bookkeeping, and what rule 26 keeps for their controllers), and the
/// webhook's own.
pub(crate) fn watched(key: &str) -> bool {
    key.starts_with("numaplane.numaproj.io/")
        || key.starts_with("numaflow.numaproj.io/")
        || key.starts_with("pipelinerollout-webhook.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_found_by_its_resource_and_its_kind() {
        for kind in Kind::ALL {
            assert_eq!(
                Kind::from_resource(kind.group(), kind.resource()),
                Some(kind)
            );
            assert_eq!(Kind::from_kind(kind.group(), kind.kind()), Some(kind));
            assert!(kind.rollout().template().is_some(), "{kind:?}");
            assert_eq!(kind.is_child(), kind.template().is_none(), "{kind:?}");
        }
        assert_eq!(
            Kind::from_resource(NUMAFLOW_GROUP, "pipelinerollouts"),
            None
        );
        assert_eq!(
            Kind::from_resource(NUMAPLANE_GROUP, "numaflowcontrollerrollouts"),
            None
        );
    }

    #[test]
    fn each_resource_is_found_by_its_resource_and_its_kind() {
        let all = Kind::ALL
            .into_iter()
            .map(Resource::Guarded)
            .chain(Made::ALL.into_iter().map(Resource::Made))
            .chain(ControllerKind::ALL.into_iter().map(Resource::Controller))
            .chain([Resource::ConfigMap]);
        for resource in all {
            let (group, plural, kind) = (resource.group(), resource.resource(), resource.kind());
            assert_eq!(Resource::from_resource(group, plural), Some(resource));
            assert_eq!(Resource::from_kind(group, kind), Some(resource));
        }
        assert_eq!(Resource::ConfigMap.api_version(), "v1");
        assert_eq!(Resource::Made(Made::Deployment).api_version(), "apps/v1");
        assert_eq!(Resource::from_resource("", "secrets"), None);
    }

    #[test]
    fn every_key_judged_is_watched() {
        for key in BOOKKEEPING_LABELS.iter().chain(&BOOKKEEPING_ANNOTATIONS) {
            assert!(watched(key), "{key}");
        }
        assert!(watched(FORCE_PROMOTE_LABEL) && watched(MARKED_FOR_DELETION));
        assert!(watched(PAUSE_TIMESTAMP));
        assert!(!watched("app.kubernetes.io/name"));
    }
}
