//! AdmissionReview in, decision applied, AdmissionReview out.
//!
//! The request is read with a small lenient envelope of our own (so a
//! broken object still yields the uid to answer with); the answer is built
//! with kube's admission types, in the request's apiVersion.

use std::fmt;
use std::time::Duration;

use kube_core::admission::AdmissionResponse;
use kube_core::response::StatusSummary;
use kube_core::{Status, TypeMeta};
use serde::Deserialize;
use serde_json::Value;

use crate::authz::{self, Permission, RbacAuthorizer, RbacTrace, UserInfo};
use crate::lenient::{Obj, Text};
use crate::policy::Policy;
use crate::policy::rules::{self, Decision, Operation, Review};
use crate::rollout::PipelineRollout;

/// The API group of PipelineRollouts.
pub const GROUP: &str = "numaplane.numaproj.io";
/// The resource name of PipelineRollouts.
pub const RESOURCE: &str = "pipelinerollouts";
/// The AdmissionReview apiVersions we speak.
pub const API_VERSIONS: [&str; 2] = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"];

/// Which webhook a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    /// `/validate`, a ValidatingWebhookConfiguration.
    Validate,
    /// `/mutate`, a MutatingWebhookConfiguration.
    Mutate,
}

impl Webhook {
    /// The name used in paths, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validate => "validate",
            Self::Mutate => "mutate",
        }
    }
}

impl fmt::Display for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a body cannot be answered with an AdmissionReview (HTTP 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
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

#[derive(Deserialize)]
struct Envelope {
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
    object: Obj<PipelineRollout>,
    #[serde(default)]
    old_object: Obj<PipelineRollout>,
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
    /// CREATE, UPDATE, DELETE or CONNECT (as sent).
    pub operation: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name (may be empty on CREATE with generateName).
    pub name: String,
    /// Whether this is a dry run (judged like any other request).
    pub dry_run: bool,
    /// Who is asking.
    pub user: UserInfo,
    resource: Obj<GroupResource>,
    sub_resource: Option<String>,
    object: Obj<PipelineRollout>,
    old_object: Obj<PipelineRollout>,
}

impl AdmissionRequest {
    /// Reads an AdmissionReview body. Errors only when there is no request
    /// uid to answer to.
    pub fn parse(body: &[u8]) -> Result<Self, ReviewError> {
        let envelope: Envelope = serde_json::from_slice(body)?;
        let api_version = envelope
            .api_version
            .0
            .ok_or(ReviewError::NotAdmissionReview("no apiVersion"))?;
        if envelope.kind.as_deref() != Some("AdmissionReview") {
            return Err(ReviewError::NotAdmissionReview(
                "kind is not AdmissionReview",
            ));
        }
        if !API_VERSIONS.contains(&api_version.as_str()) {
            return Err(ReviewError::UnsupportedVersion(api_version));
        }
        let Obj::Present(request) = envelope.request else {
            return Err(ReviewError::NotAdmissionReview("no request object"));
        };
        let uid = match request.uid.0 {
            Some(uid) if !uid.is_empty() => uid,
            _ => return Err(ReviewError::NotAdmissionReview("no request.uid")),
        };
        Ok(Self {
            api_version,
            uid,
            operation: request.operation.0.unwrap_or_default(),
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

    /// Whether this request is for the main PipelineRollout resource (not a
    /// subresource), which the rules judge. `Err` when the request does not
    /// say what it is for.
    fn targets_rollouts(&self) -> Result<bool, Unjudgeable> {
        let Obj::Present(resource) = &self.resource else {
            return Err(Unjudgeable(
                "request.resource is missing or not an object".into(),
            ));
        };
        Ok(resource.group.as_deref() == Some(GROUP)
            && resource.resource.as_deref() == Some(RESOURCE)
            && self.sub_resource.is_none())
    }

    /// The rules' view of this request, or `Ok(None)` when it is not judged
    /// (DELETE, CONNECT, other resources and subresources).
    fn review(&self) -> Result<Option<Review<'_>>, Unjudgeable> {
        let operation = match self.operation.as_str() {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            _ => return Ok(None),
        };
        if !self.targets_rollouts()? {
            return Ok(None);
        }
        let Obj::Present(object) = &self.object else {
            return Err(Unjudgeable(format!(
                "request.object is {}; a {} of a PipelineRollout must carry the object",
                describe(&self.object),
                self.operation
            )));
        };
        let old_object = match (&self.old_object, operation) {
            (Obj::Present(old), _) => Some(old),
            (_, Operation::Create) => None,
            (other, Operation::Update) => {
                return Err(Unjudgeable(format!(
                    "request.oldObject is {}; an UPDATE of a PipelineRollout must carry the stored object",
                    describe(other)
                )));
            }
        };
        Ok(Some(Review {
            operation,
            namespace: &self.namespace,
            user: &self.user,
            object,
            old_object,
        }))
    }
}

/// A request that cannot be judged: the text of its denial.
struct Unjudgeable(String);

fn describe<T>(obj: &Obj<T>) -> String {
    match obj {
        Obj::Missing => "missing".into(),
        Obj::Null => "null".into(),
        Obj::Wrong(kind) => kind.to_string(),
        Obj::Present(_) => "an object".into(),
    }
}

/// The whole outcome of one request: the answer, and what to log.
#[derive(Debug)]
pub struct Outcome {
    /// The response AdmissionReview, serialised.
    pub body: Vec<u8>,
    /// Whether the request was allowed.
    pub allowed: bool,
    /// Whether the rules judged it (false for DELETE, other resources, ...).
    pub judged: bool,
    /// The denial message, if denied.
    pub message: Option<String>,
    /// The decision behind the answer.
    pub decision: Decision,
}

impl AdmissionRequest {
    /// Whether deciding this request needs the force-reapply permission
    /// (rules 6 and 7 of `/validate`).
    pub fn needs_permission(&self, webhook: Webhook, policy: &Policy) -> bool {
        webhook == Webhook::Validate
            && matches!(self.review(), Ok(Some(review)) if rules::needs_permission(policy, &review))
    }
}

/// Decides one parsed request for `webhook` under `policy`. `permission`
/// answers whether the requester may force a re-apply; it is read only when
/// [`AdmissionRequest::needs_permission`] says so.
pub fn decide(
    webhook: Webhook,
    policy: &Policy,
    request: &AdmissionRequest,
    permission: &Permission,
) -> Outcome {
    let (decision, judged) = match request.review() {
        Ok(None) => (Decision::default(), false),
        Ok(Some(review)) => {
            let decision = match webhook {
                Webhook::Mutate => rules::mutate(policy, &review),
                Webhook::Validate => rules::validate(policy, &review, permission),
            };
            (decision, true)
        }
        Err(Unjudgeable(message)) => {
            let mut decision = Decision::default();
            match webhook {
                // The validating webhook denies what it cannot judge.
                Webhook::Validate => {
                    return outcome(request, decision, true, Some(message));
                }
                Webhook::Mutate => decision.warnings.push(format!("not defaulted: {message}")),
            }
            (decision, true)
        }
    };
    let message = decision.denial_message();
    outcome(request, decision, judged, message)
}

fn outcome(
    request: &AdmissionRequest,
    decision: Decision,
    judged: bool,
    message: Option<String>,
) -> Outcome {
    let response = response(request, &decision, message.as_deref());
    let body = serde_json::to_vec(&response.into_review()).unwrap_or_else(|e| {
        // Serialising plain strings and maps cannot fail; answer with a
        // denial rather than nothing if it ever does.
        serde_json::json!({
            "apiVersion": request.api_version,
            "kind": "AdmissionReview",
            "response": {
                "uid": request.uid,
                "allowed": false,
                "status": {"code": 500, "message": format!("cannot serialise the answer: {e}")},
            },
        })
        .to_string()
        .into_bytes()
    });
    Outcome {
        body,
        allowed: message.is_none(),
        judged,
        message,
        decision,
    }
}

/// Builds the AdmissionResponse: uid echoed, apiVersion kept, status 403
/// with the message on denial, patch, warnings and audit annotations.
fn response(
    request: &AdmissionRequest,
    decision: &Decision,
    message: Option<&str>,
) -> AdmissionResponse {
    // kube's constructors start from a typed request; ours is lenient, so
    // start from an empty answer and fill in the request's identity.
    let mut response = AdmissionResponse::invalid("");
    response.types = TypeMeta {
        api_version: request.api_version.clone(),
        kind: "AdmissionReview".into(),
    };
    response.uid = request.uid.clone();
    response.allowed = true;
    response.result = Status::default();
    if let Some(message) = message {
        response.allowed = false;
        response.result = Status {
            status: Some(StatusSummary::Failure),
            code: 403,
            reason: "Forbidden".into(),
            message: message.to_owned(),
            ..Status::default()
        };
    } else if let Some(patch) = &decision.patch {
        match response.clone().with_patch(patch.clone()) {
            Ok(with_patch) => response = with_patch,
            Err(e) => {
                response.warnings = Some(vec![format!("default not applied: {e}")]);
            }
        }
    }
    if !decision.warnings.is_empty() {
        response
            .warnings
            .get_or_insert_with(Vec::new)
            .extend(decision.warnings.iter().cloned());
    }
    response.audit_annotations = decision
        .audit
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    response
}

/// Parses and decides in one step, with the policy's static lists as the
/// only source of permission: when the policy also names RBAC, what only
/// RBAC could allow is denied, saying that RBAC could not be asked.
pub fn handle(
    webhook: Webhook,
    policy: &Policy,
    body: &[u8],
) -> Result<(AdmissionRequest, Outcome), ReviewError> {
    let request = AdmissionRequest::parse(body)?;
    let permission = if request.needs_permission(webhook, policy) {
        authz::permission_without_api(&policy.force_reapply, &request.user)
    } else {
        Permission::NotNeeded
    };
    let outcome = decide(webhook, policy, &request, &permission);
    Ok((request, outcome))
}

/// Parses and decides in one step, asking RBAC through `rbac` (within
/// `limit`) when the static lists do not grant a needed permission.
pub async fn handle_with_rbac(
    webhook: Webhook,
    policy: &Policy,
    body: &[u8],
    rbac: &RbacAuthorizer,
    limit: Duration,
) -> Result<(AdmissionRequest, Outcome, Option<RbacTrace>), ReviewError> {
    let request = AdmissionRequest::parse(body)?;
    let (permission, trace) = if request.needs_permission(webhook, policy) {
        authz::permission(
            &policy.force_reapply,
            &request.user,
            &request.namespace,
            &request.name,
            rbac,
            limit,
        )
        .await
    } else {
        (Permission::NotNeeded, None)
    };
    let outcome = decide(webhook, policy, &request, &permission);
    Ok((request, outcome, trace))
}
