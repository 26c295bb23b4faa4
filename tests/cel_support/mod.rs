//! The exported ValidatingAdmissionPolicies evaluated in process by the
//! `cel` interpreter, as the API server evaluates them, on one request:
//! the policy's matchConstraints (resource rules, the namespaceSelector on
//! the namespace's name, the objectSelector on the object or the stored
//! object) and matchConditions decide whether it is judged, then its
//! variables in order and every validation, each with its message
//! ([`judge`]). [`webhook`] has the webhook's own decision path answer the
//! same request, for the differential tables.
//!
//! What the interpreter lacks is given here as Kubernetes has it: the
//! strings extension (`substring`, `trim`, `split`) from the crate, and
//! `matches` for the anchored wildcard patterns the export writes (the
//! crate is built without regular expressions). There is no `authorizer`:
//! a policy whose grant names an RBAC verb fails to evaluate here, so the
//! tables grant by users and groups; the real API server covers the verb
//! (tests/apiserver/vap.rs).

#![allow(dead_code)] // each test binary uses a part

mod interpreter;
mod matching;
pub mod table;
pub mod webhook;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use pipelinerollout_webhook::kinds::{self, Kind};
use pipelinerollout_webhook::vap::{self, Exported};
use serde_json::{Value, json};

use interpreter::Context;
use matching::matched;

/// A resource an exported policy may match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// The API group (`""`: the core group).
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The resource (plural).
    pub resource: &'static str,
    /// The kind.
    pub kind: &'static str,
}

impl Resource {
    /// One of the guarded kinds.
    pub const fn of(kind: Kind) -> Self {
        Self {
            group: kind.group(),
            version: kinds::VERSION,
            resource: kind.resource(),
            kind: kind.kind(),
        }
    }
}

/// Core ConfigMaps.
pub const CONFIGMAPS: Resource = Resource {
    group: "",
    version: "v1",
    resource: kinds::CONFIGMAPS,
    kind: "ConfigMap",
};

/// One admission request, as the API server hands it to a policy (and, in
/// an AdmissionReview, to the webhook).
#[derive(Debug, Clone)]
pub struct Request {
    /// `CREATE`, `UPDATE` or `DELETE`.
    pub operation: &'static str,
    /// What is written.
    pub resource: Resource,
    /// The namespace.
    pub namespace: String,
    /// The object's name (`""` for a CREATE with generateName).
    pub name: String,
    /// The requester.
    pub user: String,
    /// The requester's groups.
    pub groups: Vec<String>,
    /// The object (`null` on DELETE).
    pub object: Value,
    /// The stored object (`null` on CREATE).
    pub old_object: Value,
    /// Sent with `dryRun=All`.
    pub dry_run: bool,
}

impl Request {
    fn new(operation: &'static str, resource: Resource, object: Value, old: Value) -> Self {
        let named = if object.is_null() { &old } else { &object };
        let name = named["metadata"]["name"]
            .as_str()
            .unwrap_or("demo")
            .to_owned();
        Self {
            operation,
            resource,
            namespace: "team".to_owned(),
            name,
            user: "alice".to_owned(),
            groups: vec!["devs".to_owned(), "system:authenticated".to_owned()],
            object,
            old_object: old,
            dry_run: false,
        }
    }

    /// A CREATE of `object`, by alice in namespace `team`.
    pub fn create(resource: Resource, object: Value) -> Self {
        Self::new("CREATE", resource, object, Value::Null)
    }

    /// An UPDATE of `old` to `new`.
    pub fn update(resource: Resource, old: Value, new: Value) -> Self {
        Self::new("UPDATE", resource, new, old)
    }

    /// A DELETE of `stored`.
    pub fn delete(resource: Resource, stored: Value) -> Self {
        Self::new("DELETE", resource, Value::Null, stored)
    }

    /// Made by `user`, in `groups`.
    pub fn by(mut self, user: &str, groups: &[&str]) -> Self {
        self.user = user.to_owned();
        self.groups = groups.iter().map(|g| (*g).to_owned()).collect();
        self
    }

    /// In namespace `ns`.
    pub fn in_namespace(mut self, ns: &str) -> Self {
        self.namespace = ns.to_owned();
        self
    }

    /// Sent with `dryRun=All`.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// The `request` variable of CEL.
    fn cel_request(&self) -> Value {
        let r = self.resource;
        json!({"namespace": self.namespace, "name": self.name, "operation": self.operation,
            "kind": {"group": r.group, "version": r.version, "kind": r.kind},
            "resource": {"group": r.group, "version": r.version, "resource": r.resource},
            "userInfo": {"username": self.user, "groups": self.groups},
            "dryRun": self.dry_run})
    }
}

/// One validation's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Which rule it expresses (the export's label).
    pub rule: &'static str,
    /// Whether its expression holds.
    pub holds: bool,
    /// Its messageExpression's value (evaluated, as the API server does,
    /// only when it fails; empty when it holds).
    pub message: String,
    /// Why its expression could not be evaluated, if it could not.
    pub error: Option<String>,
}

/// What one exported policy makes of a request: `None` when its
/// matchConstraints or matchConditions leave the request alone, else every
/// validation's verdict, in order.
pub fn judge(exported: &Exported, request: &Request) -> Option<Vec<Verdict>> {
    let spec = exported.policy.spec.as_ref().expect("a spec");
    if !matched(
        spec.match_constraints.as_ref().expect("matchConstraints"),
        request,
    ) {
        return None;
    }
    let mut context = Context::new(request);
    for condition in spec.match_conditions.as_deref().unwrap_or_default() {
        let matches = context.boolean(&condition.expression, &condition.name);
        if !matches.unwrap_or_else(|e| panic!("matchCondition {}: {e}", condition.name)) {
            return None;
        }
    }
    for var in spec.variables.as_deref().unwrap_or_default() {
        context.variable(&var.name, &var.expression);
    }
    let verdicts = spec
        .validations
        .as_deref()
        .unwrap_or_default()
        .iter()
        .zip(&exported.validations)
        .map(|(v, rule)| {
            // An expression that fails fails the validation (failurePolicy
            // Fail); the messageExpression is evaluated, as the API server
            // does, only for a failing validation.
            let (holds, error) = match context.boolean(&v.expression, rule) {
                Ok(holds) => (holds, None),
                Err(e) => (false, Some(e)),
            };
            let text = v
                .message_expression
                .as_deref()
                .expect("a messageExpression");
            let message = match (holds, &error) {
                (true, _) => String::new(),
                (false, Some(e)) => format!("expression failed: {e}"),
                (false, None) => match context.run(text, rule) {
                    Ok(cel::Value::String(s)) => s.to_string(),
                    other => panic!("{rule}: messageExpression is not a string: {other:?}"),
                },
            };
            Verdict {
                rule,
                holds,
                message,
                error,
            }
        })
        .collect();
    Some(verdicts)
}

/// The verdicts of `exported` on `request`, which it must judge.
pub fn judged(exported: &Exported, request: &Request) -> Vec<Verdict> {
    judge(exported, request).unwrap_or_else(|| {
        panic!(
            "{} does not judge a {} of {}",
            name(&exported.policy),
            request.operation,
            request.resource.resource
        )
    })
}

/// The validations of `exported` that fail on `request` (none when it is
/// not judged).
pub fn failing(exported: &Exported, request: &Request) -> Vec<Verdict> {
    judge(exported, request)
        .unwrap_or_default()
        .into_iter()
        .filter(|v| !v.holds)
        .collect()
}

fn name(policy: &ValidatingAdmissionPolicy) -> &str {
    policy.metadata.name.as_deref().unwrap_or_default()
}

/// The exported policy whose name ends in `suffix` (`""`: the first, the
/// PipelineRollout policy).
pub fn policy_named<'a>(export: &'a vap::Export, suffix: &str) -> &'a Exported {
    if suffix.is_empty() {
        return export.rollouts();
    }
    export
        .policies
        .iter()
        .find(|p| name(&p.policy).ends_with(suffix))
        .unwrap_or_else(|| panic!("no policy {suffix}"))
}
