//! Type checking of the exported policy, by the API server's own checker:
//! kube-controller-manager's ValidatingAdmissionPolicy status controller
//! writes `status.typeChecking.expressionWarnings` on each policy, having
//! checked its validations and message expressions against the schema of
//! the kinds its `matchConstraints` name (here the PipelineRollout CRD).
//!
//! The checker compiles the variables only to learn their types and
//! reports nothing about them: an ill-typed variable runs as `dyn`. So each
//! policy is checked through an unbound copy (another name, no binding, so
//! it judges nothing) in which every variable's expression is also a
//! validation, `[EXPR].size() >= 0`: true whatever EXPR is, and ill-typed
//! exactly when EXPR is. A canary copy, whose one variable is known to be
//! ill-typed, must draw a warning, or the check proves nothing.

use std::time::{Duration, Instant};

use hyper::Method;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicySpec, Validation, Variable,
};
use serde_json::Value;

use super::Api;
use envtest::User;

/// The path of the ValidatingAdmissionPolicy `name`.
fn policy_path(name: &str) -> String {
    format!("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/{name}")
}

/// The validation that type-checks a variable's expression.
fn variable_check(variable: &Variable) -> Validation {
    Validation {
        expression: format!("[{}].size() >= 0", variable.expression),
        message: Some(format!("type check of variables.{}", variable.name)),
        ..Validation::default()
    }
}

/// An unbound copy of `policy` named `name`, in which every variable is
/// also checked as a validation (after the policy's own), with what each
/// validation is, by index, for the warnings.
pub fn unbound_copy(policy: &ValidatingAdmissionPolicy, name: &str) -> (Value, Vec<String>) {
    let mut copy = policy.clone();
    copy.metadata.name = Some(name.to_owned());
    let spec = copy
        .spec
        .get_or_insert_with(ValidatingAdmissionPolicySpec::default);
    let variables = spec.variables.clone().unwrap_or_default();
    let validations = spec.validations.get_or_insert_with(Vec::new);
    let mut labels: Vec<String> = (0..validations.len())
        .map(|i| format!("validation {i}"))
        .collect();
    for variable in &variables {
        validations.push(variable_check(variable));
        labels.push(format!("variables.{}", variable.name));
    }
    let json = serde_json::to_value(&copy).expect("a ValidatingAdmissionPolicy serializes");
    (json, labels)
}

/// A copy of `policy`'s match constraints whose one variable compares
/// `map(string, string)` with `null`, which the checker must report.
fn canary(policy: &ValidatingAdmissionPolicy, name: &str) -> (Value, Vec<String>) {
    let mut copy = policy.clone();
    if let Some(spec) = copy.spec.as_mut() {
        spec.variables = Some(vec![Variable {
            name: "canary".to_owned(),
            expression: "object.metadata.annotations == null".to_owned(),
        }]);
        spec.validations = Some(Vec::new());
    }
    unbound_copy(&copy, name)
}

/// One warning of the checker, as the test prints it.
#[derive(Debug, Clone)]
pub struct Warning {
    /// The policy checked.
    pub policy: String,
    /// What the expression is (`variables.NAME`, `validation N`).
    pub what: String,
    /// The field the checker names, e.g. `spec.validations[3].expression`.
    pub field: String,
    /// The checker's text.
    pub text: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ({}): {}",
            self.policy, self.what, self.field, self.text
        )
    }
}

/// Waits until the status controller has type-checked the policy `name`
/// (its `observedGeneration` is the policy's generation) and returns its
/// warnings, labelled by `labels` (what each validation is, by index;
/// `validation N` past its end).
pub async fn warnings(api: &Api, name: &str, labels: &[String]) -> Result<Vec<Warning>, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stored = api
            .must(User::Admin, Method::GET, &policy_path(name), None)
            .await?;
        let status = &stored["status"];
        if status["observedGeneration"] == stored["metadata"]["generation"]
            && status.get("typeChecking").is_some()
        {
            let found = status["typeChecking"]["expressionWarnings"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            return Ok(found
                .iter()
                .map(|w| {
                    let field = w["fieldRef"].as_str().unwrap_or_default().to_owned();
                    let index = validation_index(&field);
                    Warning {
                        policy: name.to_owned(),
                        what: match index.and_then(|i| labels.get(i)) {
                            Some(label) => label.clone(),
                            None => index.map_or("?".to_owned(), |i| format!("validation {i}")),
                        },
                        field,
                        text: w["warning"].as_str().unwrap_or_default().to_owned(),
                    }
                })
                .collect());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the policy {name} was not type-checked within 60s: {status}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// N in `spec.validations[N].…`.
fn validation_index(field: &str) -> Option<usize> {
    let rest = field.strip_prefix("spec.validations[")?;
    rest.split(']').next()?.parse().ok()
}

/// Type-checks every expression of each `(label, policy)`: creates the
/// canary and each policy's unbound copy (named `vap-typecheck-LABEL`),
/// waits for the checker, deletes them, and returns every warning on the copies. Fails
/// when the canary draws no warning.
pub async fn check_all(
    api: &Api,
    policies: &[(&str, &ValidatingAdmissionPolicy)],
) -> Result<Vec<Warning>, String> {
    let Some((_, first)) = policies.first() else {
        return Ok(Vec::new());
    };
    let mut copies = vec![("vap-typecheck-canary".to_owned(), true)];
    let (json, labels) = canary(first, &copies[0].0);
    let mut created = vec![(json, labels)];
    for (label, policy) in policies {
        let name = format!("vap-typecheck-{label}");
        created.push(unbound_copy(policy, &name));
        copies.push((name, false));
    }
    let collection = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
    for (json, _) in &created {
        api.must(User::Admin, Method::POST, collection, Some(json))
            .await?;
    }
    let mut found = Vec::new();
    for ((name, is_canary), (_, labels)) in copies.iter().zip(&created) {
        let warned = warnings(api, name, labels).await?;
        if *is_canary {
            if !warned.iter().any(|w| w.what == "variables.canary") {
                return Err(format!(
                    "the type checker reports nothing about a variable that compares map(string, string) with null, so it would not report an ill-typed variable either: {warned:?}"
                ));
            }
        } else {
            found.extend(warned);
        }
    }
    // The copies served their purpose; every policy left installed is one
    // more the API server recompiles on each change.
    for (name, _) in &copies {
        api.must(User::Admin, Method::DELETE, &policy_path(name), None)
            .await?;
    }
    Ok(found)
}
