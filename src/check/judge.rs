//! Judging one manifest as the API server and the webhook would: an
//! AdmissionReview built for its CREATE (or its UPDATE from the deployed
//! object), sent to `/mutate`, the patch applied, then sent to `/validate`,
//! both through [`admission::answer`], the server's own decision path.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::input::{Manifest, api_version_of};
use super::report::{Judged, Remark, Severity};
use crate::admission::{self, ParseError, Webhook};
use crate::authz::StaticLists;
use crate::kinds::Kind;
use crate::policy::rules::Decision;
use crate::policy::{Policy, format_seconds};
use crate::rollout::TIMEOUT_FIELD;

/// The group every authenticated user is in; the API server adds it.
const AUTHENTICATED: &str = "system:authenticated";

/// The deployed objects, by kind, namespace and name.
#[derive(Debug, Default)]
pub struct Deployed {
    objects: HashMap<(Kind, String, String), (Value, String)>,
}

impl Deployed {
    /// Adds a deployed object found in `file`; the first one of a name wins.
    pub fn insert(
        &mut self,
        kind: Kind,
        namespace: String,
        name: String,
        object: Value,
        file: String,
    ) {
        self.objects
            .entry((kind, namespace, name))
            .or_insert((object, file));
    }

    fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<&(Value, String)> {
        self.objects
            .get(&(kind, namespace.to_owned(), name.to_owned()))
    }
}

/// The namespace and name of a manifest: its `metadata.namespace`, else
/// `default_namespace`; its `metadata.name`, if any.
pub fn identity(object: &Value, default_namespace: &str) -> (String, Option<String>) {
    let text = |key: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    (
        text("namespace").unwrap_or_else(|| default_namespace.to_owned()),
        text("name"),
    )
}

/// Judges manifests under one policy, for one requester.
#[derive(Debug)]
pub struct ManifestJudge<'a> {
    /// The policy.
    pub policy: &'a Policy,
    /// The requester's name.
    pub user: &'a str,
    /// The requester's groups (`system:authenticated` is added).
    pub groups: &'a [String],
    /// The namespace of manifests that name none.
    pub default_namespace: &'a str,
    /// The deployed objects, for UPDATEs.
    pub deployed: &'a Deployed,
    /// The time the writes are judged at.
    pub now: time::OffsetDateTime,
}

impl ManifestJudge<'_> {
    fn user_info(&self) -> Value {
        let mut groups: Vec<&str> = self.groups.iter().map(String::as_str).collect();
        if !groups.contains(&AUTHENTICATED) {
            groups.push(AUTHENTICATED);
        }
        json!({"username": self.user, "groups": groups})
    }

    /// Judges one manifest; `n` makes the request uid unique.
    pub async fn judge(&self, manifest: Manifest, n: usize) -> Judged {
        let (namespace, name) = identity(&manifest.object, self.default_namespace);
        let deployed = name
            .as_deref()
            .and_then(|name| self.deployed.get(manifest.kind, &namespace, name));
        let mut object = manifest.object;
        let old = deployed.map(|(old, _)| old);
        prepare(&mut object, &namespace, old);
        let request = Request {
            kind: manifest.kind,
            uid: format!("pipelinerollout-webhook-check-{n}"),
            version: api_version_of(&object).to_owned(),
            namespace: &namespace,
            name: name.as_deref().unwrap_or_default(),
            user: self.user_info(),
            old,
        };
        let mut remarks = Vec::new();
        match self.answer(Webhook::Mutate, &request, &object).await {
            Ok(decision) => {
                if let Some(seconds) = decision.defaulted {
                    remarks.push(Remark {
                        severity: Severity::Info,
                        rule: None,
                        field: Some(TIMEOUT_FIELD.to_owned()),
                        message: self.default_message(seconds),
                    });
                }
                warnings(&mut remarks, &decision);
                if !decision.patch.is_empty()
                    && let Err(e) = json_patch::patch(&mut object, &decision.patch)
                {
                    remarks.push(warning(format!("the default could not be applied: {e}")));
                }
            }
            Err(e) => remarks.push(internal(e.to_string())),
        }
        match self.answer(Webhook::Validate, &request, &object).await {
            Ok(decision) => {
                for denial in &decision.denials {
                    remarks.push(Remark {
                        severity: Severity::Error,
                        rule: Some(denial.rule()),
                        field: denial.field(),
                        message: denial.to_string(),
                    });
                }
                warnings(&mut remarks, &decision);
            }
            Err(e) => remarks.push(internal(e.to_string())),
        }
        Judged {
            kind: request.kind,
            location: manifest.location,
            namespace,
            name,
            operation: if old.is_some() { "UPDATE" } else { "CREATE" },
            deployed: deployed.map(|(_, file)| file.clone()),
            remarks,
        }
    }

    fn default_message(&self, seconds: u64) -> String {
        let meaning = if seconds >= self.policy.drain_timeout.no_timeout_seconds {
            "no timeout".to_owned()
        } else {
            format_seconds(seconds)
        };
        format!("pauseGracePeriodSeconds will be set to {seconds} ({meaning})")
    }

    async fn answer(
        &self,
        webhook: Webhook,
        request: &Request<'_>,
        object: &Value,
    ) -> Result<Decision, ParseError> {
        let body = request.admission_review(object);
        let authorizer = StaticLists::new(
            "`check` runs without an API server; it judges --as and --as-group against forceReapply.users and forceReapply.groups only",
        );
        let context = admission::AnswerContext {
            authorizer: &authorizer,
            permission_timeout: Duration::from_secs(10),
            now: self.now,
        };
        admission::answer(webhook, self.policy, &body, context)
            .await
            .map(|(_, outcome)| outcome.decision)
    }
}

/// Makes the object what the API server would pass on: the namespace
/// filled in, and, on UPDATE, the stored status kept (PipelineRollouts
/// have a status subresource, so a write of the main resource cannot
/// change it).
fn prepare(object: &mut Value, namespace: &str, old: Option<&Value>) {
    let Value::Object(map) = object else {
        return;
    };
    if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
        metadata
            .entry("namespace")
            .or_insert_with(|| Value::from(namespace));
    }
    if let Some(old) = old {
        match old.get("status") {
            Some(status) => {
                map.insert("status".into(), status.clone());
            }
            None => {
                map.remove("status");
            }
        }
    }
}

/// What one AdmissionReview is built from.
struct Request<'a> {
    kind: Kind,
    uid: String,
    version: String,
    namespace: &'a str,
    name: &'a str,
    user: Value,
    old: Option<&'a Value>,
}

impl Request<'_> {
    /// The AdmissionReview (admission.k8s.io/v1) for `object`.
    fn admission_review(&self, object: &Value) -> Vec<u8> {
        let (operation, options) = match self.old {
            Some(_) => ("UPDATE", "UpdateOptions"),
            None => ("CREATE", "CreateOptions"),
        };
        let group = self.kind.group();
        let kind = json!({"group": group, "version": self.version, "kind": self.kind.kind()});
        let resource =
            json!({"group": group, "version": self.version, "resource": self.kind.resource()});
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": self.uid,
                "kind": kind,
                "resource": resource,
                "requestKind": kind,
                "requestResource": resource,
                "name": self.name,
                "namespace": self.namespace,
                "operation": operation,
                "userInfo": self.user,
                "object": object,
                "oldObject": self.old,
                "dryRun": false,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
            }
        });
        review.to_string().into_bytes()
    }
}

fn warnings(remarks: &mut Vec<Remark>, decision: &Decision) {
    remarks.extend(decision.warnings.iter().cloned().map(warning));
}

fn warning(message: String) -> Remark {
    Remark {
        severity: Severity::Warning,
        rule: None,
        field: None,
        message,
    }
}

fn internal(message: String) -> Remark {
    Remark {
        severity: Severity::Error,
        rule: None,
        field: None,
        message: format!("cannot be judged (a bug in check: please report it): {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_falls_back_to_the_default_namespace() {
        let object = json!({"metadata": {"name": "a"}});
        assert_eq!(identity(&object, "ns"), ("ns".into(), Some("a".into())));
        let object = json!({"metadata": {"name": "", "namespace": "team-a"}});
        assert_eq!(identity(&object, "ns"), ("team-a".into(), None));
    }

    #[test]
    fn violations_name_their_field() {
        use crate::lenient::JsonKind;
        use crate::policy::rules::Violation;
        use crate::rollout::{FORCE_PROMOTE_FIELD, SCALE_FACTOR_FIELD};
        let field = |v: Violation| v.field();
        let not_integer = Violation::TimeoutNotInteger {
            value: "\"1h\"".into(),
        };
        assert_eq!(field(not_integer).as_deref(), Some(TIMEOUT_FIELD));
        let unreachable = Violation::TimeoutUnreachable {
            path: "spec.pipeline",
            found: JsonKind::String,
        };
        assert_eq!(field(unreachable).as_deref(), Some("spec.pipeline"));
        let scale = Violation::ScaleFactorInvalid {
            value: "0".into(),
            default: 50,
        };
        assert_eq!(field(scale).as_deref(), Some(SCALE_FACTOR_FIELD));
        let annotation = Violation::AnnotationInvalid {
            value: "\"yes\"".into(),
        };
        assert_eq!(
            field(annotation).as_deref(),
            Some("metadata.annotations[\"numaplane.numaproj.io/allow-data-loss\"]")
        );
        let promote = Violation::ForcePromoteDenied {
            user: "alice".into(),
            refused: "not listed".into(),
        };
        assert_eq!(field(promote).as_deref(), Some(FORCE_PROMOTE_FIELD));
        assert_eq!(field(Violation::Unjudgeable("no object".into())), None);
    }

    #[test]
    fn prepare_fills_the_namespace_and_keeps_the_stored_status() {
        let mut object = json!({"metadata": {"name": "a"}, "status": {"phase": "Made up"}});
        let old = json!({"status": {"phase": "Deployed"}});
        prepare(&mut object, "team-a", Some(&old));
        assert_eq!(object["metadata"]["namespace"], "team-a");
        assert_eq!(object["status"]["phase"], "Deployed");
        prepare(&mut object, "other", Some(&json!({})));
        assert_eq!(object["metadata"]["namespace"], "team-a");
        assert!(object.get("status").is_none());
    }
}
