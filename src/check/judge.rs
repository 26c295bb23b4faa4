//! Judging one manifest as the API server and the webhook would: its
//! CREATE (or its UPDATE from the deployed object) given to
//! [`admission::decide`] for `/mutate`, the patch applied, then for
//! `/validate`, the policy's static lists answering the permissions the
//! judgement asks for (no API server is asked).

use std::collections::HashMap;

use serde::Deserialize as _;
use serde_json::Value;

use super::input::Manifest;
use super::report::{JudgedManifest, Remark, Severity};
use crate::admission::{self, Input, Subject, Webhook};
use crate::authz::StaticLists;
use crate::kinds::{Kind, Resource};
use crate::policy::rules::{GuardedWrite, Operation, Origin, StrategyWrite, Verdict};
use crate::policy::{Policy, UserInfo, format_seconds};
use crate::rollout::{GuardedObject, TIMEOUT_FIELD};

/// The group every authenticated user is in; the API server adds it.
const AUTHENTICATED: &str = "system:authenticated";

/// Why `check` can grant a force only from the policy's lists.
const OFFLINE_PERMISSION: &str = "`check` runs without an API server; it judges --as and --as-group against the policy's users and groups lists only";

/// The deployed objects by kind, namespace and name, each with the file
/// it came from.
pub type Deployed = HashMap<(Resource, String, String), (Value, String)>;

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
    pub policy: &'a Policy,
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
    fn user_info(&self) -> UserInfo {
        let mut groups: Vec<&str> = self.groups.iter().map(String::as_str).collect();
        if !groups.contains(&AUTHENTICATED) {
            groups.push(AUTHENTICATED);
        }
        UserInfo::new(self.user, &groups)
    }

    pub fn judge(&self, manifest: Manifest) -> JudgedManifest {
        let (namespace, name) = identity(&manifest.object, self.default_namespace);
        let deployed = name.as_ref().and_then(|name| {
            let key = (manifest.kind, namespace.clone(), name.clone());
            self.deployed.get(&key)
        });
        let mut object = manifest.object;
        let old = deployed.map(|(old, _)| old);
        prepare(&mut object, &namespace, old);
        let name_or_none = name.as_deref().unwrap_or_default();
        let remarks = match manifest.kind {
            Resource::Guarded(kind) => self.remarks(kind, &namespace, name_or_none, old, object),
            Resource::ConfigMap => {
                self.namespace_config_remarks(&namespace, name_or_none, old, &object)
            }
            // `checked_kind` reads none of these.
            Resource::Made(_) | Resource::Controller(_) => Default::default(),
        };
        JudgedManifest {
            kind: manifest.kind,
            location: manifest.location,
            namespace,
            name,
            operation: if old.is_some() { "UPDATE" } else { "CREATE" },
            deployed: deployed.map(|(_, file)| file.clone()),
            remarks,
        }
    }

    /// What the webhook would say of the write of `object` (over `old`):
    /// `/mutate`'s default and warnings, then `/validate`'s denials and
    /// warnings on the patched object.
    fn remarks(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        old: Option<&Value>,
        mut object: Value,
    ) -> Vec<Remark> {
        let old = match old.map(view).transpose() {
            Ok(old) => old,
            Err(e) => return vec![internal(&e)],
        };
        let user = self.user_info();
        let decide = |webhook, object: &GuardedObject| {
            let write = GuardedWrite {
                kind,
                operation: operation(old.is_some()),
                namespace,
                user: &user,
                object,
                old_object: old.as_ref(),
                now: self.now,
                origin: Origin::Request,
            };
            let subject = Subject::Write { write, name };
            decide_offline(self.policy, Input { webhook, subject })
        };
        let mut remarks = Vec::new();
        match view(&object) {
            Ok(view) => {
                let verdict = decide(Webhook::Mutate, &view);
                if let Some(seconds) = verdict.defaulted {
                    remarks.push(Remark {
                        severity: Severity::Info,
                        rule: None,
                        field: Some(TIMEOUT_FIELD.to_string()),
                        message: self.default_message(seconds),
                    });
                }
                warnings(&mut remarks, &verdict);
                if !verdict.patch.is_empty()
                    && let Err(e) = json_patch::patch(&mut object, &verdict.patch)
                {
                    remarks.push(warning(format!("the default could not be applied: {e}")));
                }
            }
            Err(e) => remarks.push(internal(&e)),
        }
        match view(&object) {
            Ok(view) => {
                remarks.extend(validated(&decide(Webhook::Validate, &view)));
            }
            Err(e) => remarks.push(internal(&e)),
        }
        remarks
    }

    /// What `/validate` would say of the write of a namespace-level
    /// ConfigMap (over `old`): rules 23 and 24; nothing is defaulted.
    fn namespace_config_remarks(
        &self,
        namespace: &str,
        name: &str,
        old: Option<&Value>,
        object: &Value,
    ) -> Vec<Remark> {
        let (object, old) = match (view(object), old.map(view).transpose()) {
            (Ok(object), Ok(old)) => (object, old),
            (Err(e), _) | (_, Err(e)) => return vec![internal(&e)],
        };
        let user = self.user_info();
        let write = StrategyWrite {
            operation: operation(old.is_some()),
            namespace,
            user: &user,
            object: object.config_read(),
            old_object: old.as_ref().map(GuardedObject::config_read),
            fallback: None,
            origin: Origin::Request,
        };
        let input = Input {
            webhook: Webhook::Validate,
            subject: Subject::NamespaceConfig { write, name },
        };
        validated(&decide_offline(self.policy, input))
    }

    fn default_message(&self, seconds: u64) -> String {
        let meaning = if seconds >= self.policy.drain_timeout.no_timeout_seconds {
            "no timeout".to_owned()
        } else {
            format_seconds(seconds)
        };
        format!(
            "{} will be set to {seconds} ({meaning})",
            TIMEOUT_FIELD.name()
        )
    }
}

/// CREATE, or UPDATE from the deployed object.
fn operation(update: bool) -> Operation {
    if update {
        Operation::Update
    } else {
        Operation::Create
    }
}

/// The verdict on `input`, the policy's static lists answering every
/// permission it asks for.
fn decide_offline(policy: &Policy, input: Input<'_>) -> Verdict {
    let lists = StaticLists::new(OFFLINE_PERMISSION);
    admission::decide(policy, input).finish(|question| lists.answer(question.grant, question.user))
}

/// The rules' view of a manifest.
fn view(object: &Value) -> Result<GuardedObject, serde_json::Error> {
    GuardedObject::deserialize(object)
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
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
    }
}

/// What `/validate` says: its denials, then its warnings.
fn validated(verdict: &Verdict) -> Vec<Remark> {
    let mut remarks: Vec<Remark> = verdict
        .denials
        .iter()
        .map(|denial| Remark {
            severity: Severity::Error,
            rule: Some(denial.rule()),
            field: denial.field(),
            message: denial.to_string(),
        })
        .collect();
    warnings(&mut remarks, verdict);
    remarks
}

fn warnings(remarks: &mut Vec<Remark>, verdict: &Verdict) {
    remarks.extend(verdict.warnings.iter().cloned().map(warning));
}

fn warning(message: String) -> Remark {
    Remark {
        severity: Severity::Warning,
        rule: None,
        field: None,
        message,
    }
}

fn internal(error: &serde_json::Error) -> Remark {
    Remark {
        severity: Severity::Error,
        rule: None,
        field: None,
        message: format!("cannot be judged (a bug in check: please report it): {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

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
            field: crate::policy::rules::TimeoutField::ROLLOUT_PAUSE,
            value: "\"1h\"".into(),
        };
        assert_eq!(field(not_integer).as_deref(), Some(TIMEOUT_FIELD.dotted()));
        let unreachable = Violation::TimeoutUnreachable {
            field: crate::policy::rules::TimeoutField::ROLLOUT_PAUSE,
            path: "spec.pipeline",
            found: JsonKind::String,
        };
        assert_eq!(field(unreachable).as_deref(), Some("spec.pipeline"));
        let scale = Violation::ScaleFactorInvalid {
            value: "0".into(),
            default: 50,
        };
        assert_eq!(field(scale).as_deref(), Some(SCALE_FACTOR_FIELD.dotted()));
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
        assert_eq!(
            field(promote).as_deref(),
            Some(FORCE_PROMOTE_FIELD.dotted())
        );
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
