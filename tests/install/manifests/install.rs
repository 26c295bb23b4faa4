//! A rendering parsed into k8s-openapi types, by kind, with nothing lost
//! on the way; and the small look-ups the invariants share.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;

/// The rendered objects, by kind.
#[derive(Default)]
pub(crate) struct Install {
    pub(crate) namespaces: Vec<Namespace>,
    pub(crate) service_accounts: Vec<ServiceAccount>,
    pub(crate) cluster_roles: Vec<ClusterRole>,
    pub(crate) cluster_role_bindings: Vec<ClusterRoleBinding>,
    pub(crate) roles: Vec<Role>,
    pub(crate) role_bindings: Vec<RoleBinding>,
    pub(crate) config_maps: Vec<ConfigMap>,
    pub(crate) secrets: Vec<Secret>,
    pub(crate) deployments: Vec<Deployment>,
    pub(crate) pdbs: Vec<PodDisruptionBudget>,
    pub(crate) services: Vec<Service>,
    pub(crate) network_policies: Vec<NetworkPolicy>,
    pub(crate) mutating: Vec<MutatingWebhookConfiguration>,
    pub(crate) validating: Vec<ValidatingWebhookConfiguration>,
    pub(crate) policies: Vec<ValidatingAdmissionPolicy>,
    pub(crate) policy_bindings: Vec<ValidatingAdmissionPolicyBinding>,
    /// cert-manager.io objects, kept as JSON.
    pub(crate) cert_manager: Vec<Value>,
}

/// Parses `doc` as `T` and checks that nothing was dropped on the way: a
/// misspelt or misplaced field would parse (k8s-openapi ignores unknown
/// keys) but not survive the round trip.
fn typed<T: DeserializeOwned + serde::Serialize>(doc: &Value, what: &str) -> T {
    let parsed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{what} does not parse as its k8s-openapi type: {e}"));
    let back = serde_json::to_value(&parsed).expect("serialize");
    let mut lost = Vec::new();
    diff(doc, &back, String::new(), &mut lost);
    assert!(
        lost.is_empty(),
        "{what}: fields unknown to the Kubernetes API (misspelt or misplaced?): {lost:?}"
    );
    parsed
}

/// Paths in `original` that `round_trip` lacks or changed.
fn diff(original: &Value, round_trip: &Value, path: String, out: &mut Vec<String>) {
    match (original, round_trip) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                let sub = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => diff(value, other, sub, out),
                    None => out.push(sub),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a == b => {}
        _ => out.push(format!("{path}: {original} became {round_trip}")),
    }
}

pub(crate) fn parse(docs: &[Value]) -> Install {
    let mut install = Install::default();
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let kind = doc["kind"].as_str().unwrap_or_default();
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        let what = format!("{kind} {name} ({api_version})");
        match (api_version, kind) {
            ("v1", "Namespace") => install.namespaces.push(typed(doc, &what)),
            ("v1", "ServiceAccount") => install.service_accounts.push(typed(doc, &what)),
            ("v1", "ConfigMap") => install.config_maps.push(typed(doc, &what)),
            ("v1", "Secret") => {
                // kustomize folds long base64 over several lines; the API
                // server's decoder skips the line breaks, k8s-openapi's
                // does not.
                let mut doc = doc.clone();
                if let Some(data) = doc.get_mut("data").and_then(Value::as_object_mut) {
                    for value in data.values_mut() {
                        if let Some(text) = value.as_str() {
                            *value = Value::String(text.replace(['\n', '\r'], ""));
                        }
                    }
                }
                install.secrets.push(typed(&doc, &what));
            }
            ("v1", "Service") => install.services.push(typed(doc, &what)),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
                install.cluster_roles.push(typed(doc, &what));
            }
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
                install.cluster_role_bindings.push(typed(doc, &what));
            }
            ("rbac.authorization.k8s.io/v1", "Role") => install.roles.push(typed(doc, &what)),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                install.role_bindings.push(typed(doc, &what));
            }
            ("apps/v1", "Deployment") => install.deployments.push(typed(doc, &what)),
            ("policy/v1", "PodDisruptionBudget") => install.pdbs.push(typed(doc, &what)),
            ("networking.k8s.io/v1", "NetworkPolicy") => {
                install.network_policies.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                install.mutating.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                install.validating.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
                install.policies.push(typed(doc, &what));
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
                install.policy_bindings.push(typed(doc, &what));
            }
            ("cert-manager.io/v1", "Issuer" | "Certificate") => {
                install.cert_manager.push(doc.clone());
            }
            _ => panic!("unexpected object in the install: {what}"),
        }
    }
    install
}

pub(crate) fn one<'a, T>(items: &'a [T], what: &str) -> &'a T {
    assert_eq!(items.len(), 1, "expected exactly one {what}");
    &items[0]
}

pub(crate) fn named<
    'a,
    T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
>(
    items: &'a [T],
    name: &str,
    what: &str,
) -> &'a T {
    let found: Vec<&T> = items
        .iter()
        .filter(|i| i.metadata().name.as_deref() == Some(name))
        .collect();
    assert_eq!(found.len(), 1, "expected exactly one {what} named {name}");
    found[0]
}

/// Whether `selector` (matchLabels only) selects `labels`.
pub(crate) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    assert!(
        selector.match_expressions.is_none(),
        "selectors here use matchLabels only"
    );
    let wanted = selector.match_labels.clone().unwrap_or_default();
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

pub(crate) fn sorted(items: Option<&Vec<String>>) -> Vec<String> {
    let mut items = items.cloned().unwrap_or_default();
    items.sort();
    items
}
