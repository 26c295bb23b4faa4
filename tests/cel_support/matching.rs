//! A policy's matchConstraints as the API server reads them: its resource
//! rules, its namespaceSelector (on the namespace's name label) and its
//! objectSelector (on the object or the stored object).

use k8s_openapi::api::admissionregistration::v1::MatchResources;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::Request;

/// Whether `constraints` match `request`, as the API server reads them
/// (`matchPolicy: Equivalent` matches the same group and resource).
pub fn matched(constraints: &MatchResources, request: &Request) -> bool {
    let r = request.resource;
    let rule = constraints
        .resource_rules
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|rule| {
            let has = |list: &Option<Vec<String>>, want: &str| {
                list.as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|x| x == want || x == "*")
            };
            has(&rule.api_groups, r.group)
                && has(&rule.resources, r.resource)
                && has(&rule.operations, request.operation)
        });
    let namespace = json!({"kubernetes.io/metadata.name": request.namespace});
    let labels = |o: &Value| o["metadata"]["labels"].clone();
    let objects = constraints.object_selector.as_ref().is_none_or(|s| {
        selects(s, &labels(&request.object)) || selects(s, &labels(&request.old_object))
    });
    rule && objects
        && constraints
            .namespace_selector
            .as_ref()
            .is_none_or(|s| selects(s, &namespace))
}

/// Whether a label selector selects `labels` (a JSON map, or null).
fn selects(selector: &LabelSelector, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let exact = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| get(k) == Some(v.as_str()));
    exact
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let in_values = get(&e.key).is_some_and(|v| values.iter().any(|x| x == v));
            match e.operator.as_str() {
                "In" => in_values,
                "NotIn" => !in_values,
                "Exists" => get(&e.key).is_some(),
                "DoesNotExist" => get(&e.key).is_none(),
                other => panic!("operator {other}"),
            }
        })
}
