//! What an Event is about: one of the resources of [`Resource`], as the
//! request names it, as an Event's `regarding` names it, and where the
//! forgery check looks it up.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::ApiResource;

use crate::admission::AdmissionRequest;
use crate::kinds::{Kind, Resource};

/// What a verdict's Events are about: the object the request writes, and
/// its apiVersion (a PipelineRollout's when the request names nothing a
/// webhook judges).
pub fn of(request: &AdmissionRequest) -> (Resource, String) {
    match request.judged() {
        // The request's own version of a guarded kind.
        Some(Resource::Guarded(_)) | None => (
            request
                .judged()
                .unwrap_or(Resource::Guarded(Kind::PipelineRollout)),
            request.object_api_version(),
        ),
        Some(other) => (other, other.api_version()),
    }
}

/// The resource an Event's `regarding` names (its apiVersion's group and
/// its kind), if an Event may be about it.
pub fn from_reference(regarding: &ObjectReference) -> Option<Resource> {
    let api_version = regarding.api_version.as_deref().unwrap_or_default();
    let kind = regarding.kind.as_deref().unwrap_or_default();
    match api_version.split_once('/') {
        None if api_version == Resource::ConfigMap.version() => Resource::from_kind("", kind),
        None => None,
        Some(("", _)) => None,
        Some((group, _)) => Resource::from_kind(group, kind),
    }
}

/// The resource to look the object up in (the forgery check).
pub fn api_resource(resource: Resource) -> ApiResource {
    ApiResource {
        group: resource.group().to_owned(),
        version: resource.version().to_owned(),
        api_version: resource.api_version(),
        kind: resource.kind().to_owned(),
        plural: resource.resource().to_owned(),
    }
}
