//! AdmissionReview in, decision applied, AdmissionReview out.
//!
//! The request is read with a small lenient envelope of our own (so a
//! broken object still yields the uid to answer with); the answer is built
//! with kube's admission types, in the request's apiVersion.

use std::fmt;
use std::time::Duration;

use json_patch::Patch;
use kube_core::admission::AdmissionResponse;
use kube_core::response::StatusSummary;
use kube_core::{Status, TypeMeta};
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use crate::authz::{ForcePermission, RbacTrace, Target};
use crate::lenient::{Obj, Text};
use crate::policy::rules::{self, Decision, Operation, Review, Violation};
use crate::policy::{Policy, UserInfo};
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

/// The operation of an admission request, as the API server names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOperation {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
    /// CONNECT.
    Connect,
    /// Anything else, or none.
    Unknown,
}

impl RequestOperation {
    fn parse(text: Option<&str>) -> Self {
        match text {
            Some("CREATE") => Self::Create,
            Some("UPDATE") => Self::Update,
            Some("DELETE") => Self::Delete,
            Some("CONNECT") => Self::Connect,
            _ => Self::Unknown,
        }
    }

    /// The name used in logs and metrics (`""` when unknown).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
            Self::Unknown => "",
        }
    }

    /// The operation the rules judge, if they judge this one.
    fn judged(self) -> Option<Operation> {
        match self {
            Self::Create => Some(Operation::Create),
            Self::Update => Some(Operation::Update),
            _ => None,
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
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: RequestOperation,
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

    /// The object's apiVersion as the request names it (group/version).
    pub fn object_api_version(&self) -> String {
        let version = self.resource.get().and_then(|r| r.version.as_deref());
        format!("{GROUP}/{}", version.unwrap_or("v1alpha1"))
    }

    /// The object's uid: from the object, else the stored object.
    pub fn object_uid(&self) -> Option<&str> {
        self.object
            .get()
            .and_then(PipelineRollout::uid)
            .or_else(|| self.old_object.get().and_then(PipelineRollout::uid))
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
    fn review(&self, now: OffsetDateTime) -> Result<Option<Review<'_>>, Unjudgeable> {
        let Some(operation) = self.operation.judged() else {
            return Ok(None);
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
            now,
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

/// The whole outcome of one request: the decision, and the answer built
/// from it.
#[derive(Debug)]
pub struct Outcome {
    /// Which webhook answered.
    pub webhook: Webhook,
    /// The request's operation.
    pub operation: RequestOperation,
    /// Whether the request was a dry run (its side effects are skipped).
    pub dry_run: bool,
    /// The response AdmissionReview, serialised.
    pub body: Vec<u8>,
    /// Whether the rules judged it (false for DELETE, other resources, ...).
    pub judged: bool,
    /// The decision behind the answer: the only record of the outcome.
    pub decision: Decision,
    /// The RBAC check made for it, if one was.
    pub rbac: Option<RbacTrace>,
}

impl Outcome {
    /// Whether the request was allowed.
    pub fn allowed(&self) -> bool {
        self.decision.allowed()
    }

    /// The denial message, if denied.
    pub fn message(&self) -> Option<String> {
        self.decision.denial_message()
    }
}

/// What a request is judged with besides the policy: who may force (asked
/// within `limit`) and the time.
#[derive(Debug, Clone, Copy)]
pub struct Judge<'a, P> {
    /// The source of the force-reapply permission.
    pub authorizer: &'a P,
    /// How long asking it may take.
    pub limit: Duration,
    /// The time the request is judged at.
    pub now: OffsetDateTime,
}

impl<'a, P: ForcePermission> Judge<'a, P> {
    /// Judging now, by the system clock.
    pub fn now(authorizer: &'a P, limit: Duration) -> Self {
        Self {
            authorizer,
            limit,
            now: OffsetDateTime::now_utc(),
        }
    }
}

/// Parses, judges and answers one AdmissionReview body for `webhook` under
/// `policy`, asking `judge.authorizer` when a force needs permission. The
/// server, `review`, `check`, the tests and the benches all answer through
/// here.
pub async fn answer<P: ForcePermission>(
    webhook: Webhook,
    policy: &Policy,
    body: &[u8],
    judge: Judge<'_, P>,
) -> Result<(AdmissionRequest, Outcome), ReviewError> {
    let request = AdmissionRequest::parse(body)?;
    let mut rbac = None;
    let (decision, judged) = match (request.review(judge.now), webhook) {
        (Ok(None), _) => (Decision::default(), false),
        (Ok(Some(review)), Webhook::Mutate) => (rules::mutate(policy, &review), true),
        (Ok(Some(review)), Webhook::Validate) => {
            let validation = rules::validate(policy, review);
            let permission = match validation.settled_permission() {
                Some(settled) => settled,
                None => {
                    let target = Target {
                        namespace: &request.namespace,
                        name: &request.name,
                    };
                    let check = judge
                        .authorizer
                        .check(&policy.force_reapply, &request.user, target, judge.limit)
                        .await;
                    rbac = check.rbac;
                    check.permission
                }
            };
            (validation.finish(&permission), true)
        }
        (Err(Unjudgeable(message)), webhook) => {
            let mut decision = Decision::default();
            match webhook {
                // The validating webhook denies what it cannot judge.
                Webhook::Validate => decision.denials.push(Violation::Unjudgeable(message)),
                Webhook::Mutate => decision.warnings.push(format!("not defaulted: {message}")),
            }
            (decision, true)
        }
    };
    let body = wire_body(&request, &decision);
    let outcome = Outcome {
        webhook,
        operation: request.operation,
        dry_run: request.dry_run,
        body,
        judged,
        decision,
        rbac,
    };
    Ok((request, outcome))
}

/// The response AdmissionReview, serialised.
fn wire_body(request: &AdmissionRequest, decision: &Decision) -> Vec<u8> {
    let response = response(request, decision);
    serde_json::to_vec(&response.into_review()).unwrap_or_else(|e| {
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
    })
}

/// Builds the AdmissionResponse from the decision, in one place: uid
/// echoed, apiVersion kept, status 403 with the message on denial, patch,
/// warnings and audit annotations.
fn response(request: &AdmissionRequest, decision: &Decision) -> AdmissionResponse {
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
    if let Some(message) = decision.denial_message() {
        response.allowed = false;
        response.result = Status {
            status: Some(StatusSummary::Failure),
            code: 403,
            reason: "Forbidden".into(),
            message,
            ..Status::default()
        };
    } else if !decision.patch.is_empty() {
        match response.clone().with_patch(Patch(decision.patch.clone())) {
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
