//! The request side: an AdmissionReview read leniently, with a small serde
//! envelope of our own, so a broken object still yields the uid to answer.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use super::API_VERSIONS;
use super::decide::Subject;
use crate::kinds::{
    self, CONFIG_MAP_KIND, ControllerKind, FORCE_PROMOTE_LABEL, Kind, MARKED_FOR_DELETION, Made,
    Resource,
};
use crate::lenient::{Obj, Text};
use crate::policy::UserInfo;
use crate::policy::rules::{
    Belonging, Definitions, GuardedWrite, MadeWrite, Operation, Origin, StrategyWrite, VersionWrite,
};
use crate::rollout::GuardedObject;

/// The operation of an admission request, as the API server names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestOperation {
    /// One the rules judge.
    Judged(Operation),
    Connect,
    /// Anything else, or none.
    Unknown,
}

impl RequestOperation {
    fn parse(text: Option<&str>) -> Self {
        match text {
            Some("CREATE") => Self::Judged(Operation::Create),
            Some("UPDATE") => Self::Judged(Operation::Update),
            Some("DELETE") => Self::Judged(Operation::Delete),
            Some("CONNECT") => Self::Connect,
            _ => Self::Unknown,
        }
    }

    /// The name used in logs and metrics (`""` when unknown).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Judged(operation) => operation.to_str(),
            Self::Connect => "CONNECT",
            Self::Unknown => "",
        }
    }
}

impl fmt::Display for RequestOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a body cannot be answered with an AdmissionReview (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON at all, or JSON nested too deep.
    #[error("body is not valid JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    /// JSON, but not an AdmissionReview with a request.
    #[error("body is not an AdmissionReview: {0}")]
    NotAdmissionReview(&'static str),
    /// An AdmissionReview in an apiVersion we do not speak.
    #[error(
        "unsupported AdmissionReview apiVersion {0:?}: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1"
    )]
    UnsupportedVersion(String),
}

/// The AdmissionReview envelope as [`AdmissionRequest::parse`] reads it:
/// public only so that the reader benchmark can feed the very same types to
/// another JSON reader. Turn it into a request with
/// [`AdmissionRequest::from_envelope`].
#[doc(hidden)]
#[derive(Deserialize)]
pub struct Envelope {
    #[serde(default, rename = "apiVersion")]
    api_version: Text,
    #[serde(default)]
    kind: Text,
    #[serde(default)]
    request: Obj<RequestFields>,
}

#[derive(Debug, Default, Deserialize)]
struct GroupResource {
    #[serde(default)]
    group: Text,
    #[serde(default)]
    version: Text,
    #[serde(default)]
    resource: Text,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestFields {
    #[serde(default)]
    uid: Text,
    #[serde(default)]
    resource: Obj<GroupResource>,
    #[serde(default)]
    sub_resource: Text,
    #[serde(default)]
    name: Text,
    #[serde(default)]
    namespace: Text,
    #[serde(default)]
    operation: Text,
    #[serde(default)]
    user_info: Obj<UserInfo>,
    #[serde(default)]
    object: Obj<GuardedObject>,
    #[serde(default)]
    old_object: Obj<GuardedObject>,
    #[serde(default)]
    dry_run: Option<Value>,
}

/// An admission request, read leniently: only what the rules and the
/// answer need.
#[derive(Debug)]
pub struct AdmissionRequest {
    /// The AdmissionReview apiVersion to answer in.
    pub api_version: String,
    /// The request uid, echoed in the answer.
    pub uid: String,
    pub(crate) operation: RequestOperation,
    pub(crate) namespace: String,
    /// The object's name (may be empty on CREATE with generateName).
    pub(crate) name: String,
    /// Whether this is a dry run (judged like any other request).
    pub(crate) dry_run: bool,
    pub(crate) user: UserInfo,
    resource: Obj<GroupResource>,
    sub_resource: Option<String>,
    object: Obj<GuardedObject>,
    old_object: Obj<GuardedObject>,
}

impl AdmissionRequest {
    /// Reads an AdmissionReview body. Errors only when there is no request
    /// uid to answer to.
    pub fn parse(body: &[u8]) -> Result<Self, ParseError> {
        Self::from_envelope(crate::skim::from_slice(body)?)
    }

    /// Checks a read envelope and takes the request out of it.
    #[doc(hidden)]
    pub fn from_envelope(envelope: Envelope) -> Result<Self, ParseError> {
        let api_version = envelope
            .api_version
            .0
            .ok_or(ParseError::NotAdmissionReview("no apiVersion"))?;
        if envelope.kind.as_deref() != Some("AdmissionReview") {
            return Err(ParseError::NotAdmissionReview(
                "kind is not AdmissionReview",
            ));
        }
        if !API_VERSIONS.contains(&api_version.as_str()) {
            return Err(ParseError::UnsupportedVersion(api_version));
        }
        let Obj::Present(request) = envelope.request else {
            return Err(ParseError::NotAdmissionReview("no request object"));
        };
        let uid = match request.uid.0 {
            Some(uid) if !uid.is_empty() => uid,
            _ => return Err(ParseError::NotAdmissionReview("no request.uid")),
        };
        Ok(Self {
            api_version,
            uid,
            operation: RequestOperation::parse(request.operation.as_deref()),
            namespace: request.namespace.0.unwrap_or_default(),
            name: request.name.0.unwrap_or_default(),
            dry_run: request.dry_run.as_ref().and_then(Value::as_bool) == Some(true),
            user: match request.user_info {
                Obj::Present(user) => user,
                _ => UserInfo::default(),
            },
            resource: request.resource,
            sub_resource: request.sub_resource.0.filter(|s| !s.is_empty()),
            object: request.object,
            old_object: request.old_object,
        })
    }

    /// The guarded kind the request is for (its `resource`), if it is one.
    pub(crate) fn kind(&self) -> Option<Kind> {
        let resource = self.resource.get()?;
        Kind::from_resource(resource.group.as_deref()?, resource.resource.as_deref()?)
    }

    /// The resource the request is for, if a webhook of this project
    /// judges it (a subresource is not, but a child's or a Vertex's
    /// `/status`).
    pub(crate) fn judged(&self) -> Option<Resource> {
        match self.resource() {
            Ok(Named::Judged(resource)) => Some(resource),
            _ => None,
        }
    }

    /// The object's apiVersion as the request names it (group/version;
    /// a PipelineRollout's when the request names no guarded kind).
    pub(crate) fn object_api_version(&self) -> String {
        let version = self.resource.get().and_then(|r| r.version.as_deref());
        let group = self.kind().unwrap_or(Kind::PipelineRollout).group();
        format!("{group}/{}", version.unwrap_or(kinds::VERSION))
    }

    /// The object's uid: from the object, else the stored object.
    pub(crate) fn object_uid(&self) -> Option<&str> {
        self.object
            .get()
            .and_then(GuardedObject::uid)
            .or_else(|| self.old_object.get().and_then(GuardedObject::uid))
    }

    /// What the request's `resource` names: a subresource, a resource a
    /// webhook of this project judges, or another.
    fn resource(&self) -> Result<Named, Unjudgeable> {
        let Obj::Present(resource) = &self.resource else {
            return Err(Unjudgeable::Resource);
        };
        let group = resource.group.as_deref().unwrap_or_default();
        let name = resource.resource.as_deref().unwrap_or_default();
        let judged = Resource::from_resource(group, name);
        match (self.sub_resource.as_deref(), judged) {
            // A child's and a Vertex's status are their controllers' to
            // write (rules 26 and 29): that `/status` is judged like the object.
            (Some("status"), Some(judged)) if judged.status_judged() => Ok(Named::Judged(judged)),
            (Some(_), _) => Ok(Named::Subresource),
            (None, Some(judged)) => Ok(Named::Judged(judged)),
            (None, None) => {
                let text: String = format!("{name}.{group}").chars().take(60).collect();
                Ok(Named::Unguarded(crate::logtext::Escaped(&text).to_string()))
            }
        }
    }

    /// The rules' view of this request, judged at `now`: not judged
    /// (CONNECT, subresources), a resource the webhook does not guard, a
    /// write that cannot be judged, or a write (a DELETE judged on the
    /// stored object).
    pub fn subject(&self, now: OffsetDateTime) -> Subject<'_> {
        self.write(now)
            .unwrap_or_else(|e| Subject::Unjudgeable(e.to_string()))
    }

    fn write(&self, now: OffsetDateTime) -> Result<Subject<'_>, Unjudgeable> {
        let RequestOperation::Judged(operation) = self.operation else {
            return Ok(Subject::Skipped);
        };
        let kind = match self.resource()? {
            Named::Subresource => return Ok(Subject::Skipped),
            Named::Unguarded(name) => return Ok(Subject::Unguarded(self.unknown_reason(&name))),
            Named::Judged(Resource::ConfigMap) => return self.namespace_config_write(operation),
            Named::Judged(Resource::Made(kind)) => return self.made_write(kind, operation),
            Named::Judged(Resource::Controller(kind)) => {
                return self.version_write(kind, operation);
            }
            Named::Judged(Resource::Guarded(kind)) => kind,
        };
        let what = kind.kind();
        let (object, old_object) = if operation == Operation::Delete {
            // The API server sends a DELETE with `object: null` and the
            // stored object in `oldObject`: that is what is judged.
            let Obj::Present(stored) = &self.old_object else {
                return Err(Unjudgeable::DeletedObject {
                    found: describe(&self.old_object),
                    kind: what,
                });
            };
            (stored, None)
        } else {
            let Obj::Present(object) = &self.object else {
                return Err(Unjudgeable::Object {
                    found: describe(&self.object),
                    operation: self.operation,
                    kind: what,
                });
            };
            let old_object = match (&self.old_object, operation) {
                (Obj::Present(old), _) => Some(old),
                (_, Operation::Create | Operation::Delete) => None,
                (other, Operation::Update) => {
                    return Err(Unjudgeable::OldObject {
                        found: describe(other),
                        kind: what,
                    });
                }
            };
            (object, old_object)
        };
        Ok(Subject::Write {
            write: GuardedWrite {
                kind,
                operation,
                namespace: &self.namespace,
                user: &self.user,
                object,
                old_object,
                now,
                origin: Origin::Request,
            },
            name: &self.name,
        })
    }
}

impl AdmissionRequest {
    /// A write of a ConfigMap (the validating webhook's objectSelector sends
    /// only those that carry, or carried, Numaplane's config label): what it
    /// and the stored ConfigMap say of the namespace's upgrade strategy.
    fn namespace_config_write(&self, operation: Operation) -> Result<Subject<'_>, Unjudgeable> {
        // A DELETE carries the ConfigMap deleted in `oldObject` only: it
        // is judged for where it leaves the namespace (Numaplane's default).
        let object = match (operation, &self.old_object) {
            (Operation::Delete, Obj::Present(_)) => &self.old_object,
            (Operation::Delete, other) => {
                return Err(Unjudgeable::DeletedObject {
                    found: describe(other),
                    kind: CONFIG_MAP_KIND,
                });
            }
            _ => &self.object,
        };
        let Obj::Present(object) = object else {
            return Err(Unjudgeable::Object {
                found: describe(&self.object),
                operation: self.operation,
                kind: CONFIG_MAP_KIND,
            });
        };
        let old_object = match (&self.old_object, operation) {
            (Obj::Present(old), _) => Some(old.config_read()),
            (_, Operation::Create) => None,
            (other, Operation::Update | Operation::Delete) => {
                return Err(Unjudgeable::OldObject {
                    found: describe(other),
                    kind: CONFIG_MAP_KIND,
                });
            }
        };
        Ok(Subject::NamespaceConfig {
            write: StrategyWrite {
                operation,
                namespace: &self.namespace,
                user: &self.user,
                object: object.config_read(),
                old_object,
                fallback: None,
                origin: Origin::Request,
            },
            name: &self.name,
        })
    }

    /// A write of a kind Numaflow makes for a child: rule 29 judges a
    /// CREATE or UPDATE; a DELETE needs nothing (Numaflow makes the object
    /// again). Whether it belongs to a guarded child is looked up later.
    fn made_write(&self, kind: Made, operation: Operation) -> Result<Subject<'_>, Unjudgeable> {
        if operation == Operation::Delete {
            return Ok(Subject::Skipped);
        }
        let (object, old_object) = self.written(kind.kind(), operation)?;
        Ok(Subject::Made {
            write: MadeWrite {
                kind,
                operation,
                namespace: &self.namespace,
                user: &self.user,
                object,
                old_object,
                belonging: Belonging::Unknown("not looked up".to_owned()),
            },
            name: &self.name,
        })
    }

    /// A write of a NumaflowController or NumaflowControllerRollout: rule
    /// 27 judges the version a CREATE or UPDATE names; a DELETE needs
    /// nothing. Where the version is defined is looked up later.
    fn version_write(
        &self,
        kind: ControllerKind,
        operation: Operation,
    ) -> Result<Subject<'_>, Unjudgeable> {
        if operation == Operation::Delete {
            return Ok(Subject::Skipped);
        }
        let (object, old_object) = self.written(kind.kind(), operation)?;
        Ok(Subject::ControllerVersion {
            write: VersionWrite {
                kind,
                operation,
                namespace: &self.namespace,
                user: &self.user,
                object,
                old_object,
                definitions: Definitions::Unknown("not looked up".to_owned()),
            },
            name: &self.name,
        })
    }

    /// The object of a CREATE or UPDATE, and the stored one of an UPDATE.
    fn written(
        &self,
        kind: &'static str,
        operation: Operation,
    ) -> Result<(&GuardedObject, Option<&GuardedObject>), Unjudgeable> {
        let Obj::Present(object) = &self.object else {
            return Err(Unjudgeable::Object {
                found: describe(&self.object),
                operation: self.operation,
                kind,
            });
        };
        let old_object = match (&self.old_object, operation) {
            (Obj::Present(old), Operation::Update) => Some(old),
            (_, Operation::Create | Operation::Delete) => None,
            (other, Operation::Update) => {
                return Err(Unjudgeable::OldObject {
                    found: describe(other),
                    kind,
                });
            }
        };
        Ok((object, old_object))
    }

    /// Why a write of an unknown resource is allowed unjudged: the warning,
    /// naming any of Numaplane's switches it carries, so that no force goes
    /// through silently.
    fn unknown_reason(&self, resource: &str) -> String {
        let object = self.object.get();
        let carried: Vec<&str> = [FORCE_PROMOTE_LABEL, MARKED_FOR_DELETION]
            .into_iter()
            .filter(|key| {
                object.is_some_and(|o| o.label(key).is_some() || o.annotation(key).is_some())
            })
            .filter_map(|key| key.strip_prefix("numaplane.numaproj.io/"))
            .collect();
        let mut reason = format!("not judged: {resource} is no kind this webhook guards");
        if !carried.is_empty() {
            reason.push_str(&format!("; its {} went unchecked", carried.join(" and ")));
        }
        reason
    }
}

/// What a request's `resource` names.
enum Named {
    /// A subresource (`scale`, a rollout's `status`, ...): not judged.
    Subresource,
    /// A resource a webhook of this project judges.
    Judged(Resource),
    /// Another resource: its name, escaped for the warning.
    Unguarded(String),
}

/// Why a CREATE, UPDATE or DELETE cannot be judged: the text of its denial.
#[derive(Debug, thiserror::Error)]
enum Unjudgeable {
    /// No `request.resource` to say what the request is for.
    #[error("request.resource is missing or not an object")]
    Resource,
    #[error("request.object is {found}; a {operation} of a {kind} must carry the object")]
    Object {
        found: String,
        operation: RequestOperation,
        kind: &'static str,
    },
    /// A DELETE without the stored object (the API server always sends
    /// it): whether it deletes an owned child cannot be told, so it is
    /// refused rather than let through.
    #[error(
        "request.oldObject is {found}; a DELETE of a {kind} is judged on the stored object, which the API server sends in oldObject: retry the delete, and if it persists check the webhook configuration"
    )]
    DeletedObject { found: String, kind: &'static str },
    /// An UPDATE without the stored object.
    #[error("request.oldObject is {found}; an UPDATE of a {kind} must carry the stored object")]
    OldObject { found: String, kind: &'static str },
}

fn describe<T>(obj: &Obj<T>) -> String {
    match obj {
        Obj::Missing => "missing".into(),
        Obj::Null => "null".into(),
        Obj::Wrong(kind) => kind.to_string(),
        Obj::Present(_) => "an object".into(),
    }
}
