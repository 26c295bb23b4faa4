//! What an Event can be about: an object of a kind the webhook guards,
//! Numaplane's namespace-level ConfigMap (rules 23 and 24), what Numaflow
//! makes for a child (rule 29), or a NumaflowController or
//! NumaflowControllerRollout (rule 27). A ConfigMap is
//! no guarded kind ([`Kind`] lists the six the rules judge as rollouts and
//! children), so it is a case of its own here, known only to the Events.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::ApiResource;

use crate::admission::AdmissionRequest;
use crate::kinds::{self, CONFIGMAPS, ControllerKind, Kind, Made};

/// The core group's ConfigMap, as an Event's `regarding` names it.
const CONFIG_MAP: &str = "ConfigMap";
/// The core group's only version.
const CORE_VERSION: &str = "v1";

/// The kind of object an Event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regarded {
    /// A rollout or a child.
    Guarded(Kind),
    /// A core/v1 ConfigMap: Numaplane's namespace-level configuration.
    NamespaceConfig,
    /// What Numaflow makes for a child (rule 29).
    Made(Made),
    /// A NumaflowController or NumaflowControllerRollout (rule 27).
    Controller(ControllerKind),
}

impl Regarded {
    /// What a decision's Events are about: the object the request writes,
    /// and its apiVersion (a PipelineRollout's when the request names no
    /// kind the webhook knows).
    pub fn of(request: &AdmissionRequest) -> (Self, String) {
        if request.is_config_map() {
            return (Self::NamespaceConfig, CORE_VERSION.to_owned());
        }
        if let Some(kind) = request.made_kind() {
            let version = match kind.group() {
                "" => kind.version().to_owned(),
                group => format!("{group}/{}", kind.version()),
            };
            return (Self::Made(kind), version);
        }
        if let Some(kind) = request.controller_kind() {
            return (Self::Controller(kind), request.object_api_version());
        }
        let kind = request.kind().unwrap_or(Kind::PipelineRollout);
        (Self::Guarded(kind), request.object_api_version())
    }

    /// The kind as the object names it.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Guarded(kind) => kind.kind(),
            Self::NamespaceConfig => CONFIG_MAP,
            Self::Made(kind) => kind.kind(),
            Self::Controller(kind) => kind.kind(),
        }
    }

    /// The kind an Event's `regarding` names (its apiVersion's group and
    /// its kind), if an Event may be about it.
    pub fn from_reference(regarding: &ObjectReference) -> Option<Self> {
        let api_version = regarding.api_version.as_deref().unwrap_or_default();
        let kind = regarding.kind.as_deref().unwrap_or_default();
        match api_version.split_once('/') {
            None if api_version == CORE_VERSION && kind == CONFIG_MAP => {
                Some(Self::NamespaceConfig)
            }
            None if api_version == CORE_VERSION => Made::from_kind("", kind).map(Self::Made),
            None => None,
            Some((group, _)) => Kind::from_kind(group, kind)
                .map(Self::Guarded)
                .or_else(|| Made::from_kind(group, kind).map(Self::Made))
                .or_else(|| ControllerKind::from_kind(group, kind).map(Self::Controller)),
        }
    }

    /// The resource to look the object up in (the forgery check).
    pub fn api_resource(self) -> ApiResource {
        let (group, version, plural) = match self {
            Self::Guarded(kind) => (kind.group(), kinds::VERSION, kind.resource()),
            Self::NamespaceConfig => ("", CORE_VERSION, CONFIGMAPS),
            Self::Made(kind) => (kind.group(), kind.version(), kind.resource()),
            Self::Controller(kind) => (kinds::NUMAPLANE_GROUP, kinds::VERSION, kind.resource()),
        };
        ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version: if group.is_empty() {
                version.to_owned()
            } else {
                format!("{group}/{version}")
            },
            kind: self.kind().to_owned(),
            plural: plural.to_owned(),
        }
    }
}

impl From<Kind> for Regarded {
    fn from(kind: Kind) -> Self {
        Self::Guarded(kind)
    }
}
