//! `export-vap` without an API server: the YAML parses back as the
//! Kubernetes types it was built from, every CEL expression parses with a
//! Rust CEL parser (the `cel` crate), variables are defined before they are
//! read, and the command's flags behave. The API server's own verdict (type
//! checking and every rule-table case) is in tests/apiserver_vap.rs.

use std::collections::BTreeSet;
use std::process::Command;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::vap::{self, Export};
use serde_json::Value;

/// Namespace overrides (first match wins, wildcards), RBAC, a default scale
/// factor, and no timeout refused in some namespaces.
const OVERRIDES_RBAC: &str = include_str!("fixtures/policies/overrides-rbac.yaml");

fn policies() -> Vec<(&'static str, Policy)> {
    let parse = |yaml: &str| Policy::from_yaml(yaml).expect("test policy is valid");
    vec![
        ("built-in", Policy::built_in()),
        ("overrides and RBAC", parse(OVERRIDES_RBAC)),
        ("warn mode", parse("mode: warn\n")),
        (
            "minPauseAge",
            parse(
                "forceReapply:\n  minPauseAge: 5m\n  requirePausing: false\n  gateForcePromote: false\n",
            ),
        ),
    ]
}

/// Every CEL expression of an export, with where it is.
fn expressions(export: &Export) -> Vec<(String, String)> {
    let spec = export.policy.spec.as_ref().expect("spec");
    let mut out = Vec::new();
    for v in spec.variables.iter().flatten() {
        out.push((format!("variables.{}", v.name), v.expression.clone()));
    }
    for (i, v) in spec.validations.iter().flatten().enumerate() {
        out.push((format!("validations[{i}].expression"), v.expression.clone()));
        if let Some(m) = &v.message_expression {
            out.push((format!("validations[{i}].messageExpression"), m.clone()));
        }
    }
    out
}

fn variable_references(expression: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = expression;
    while let Some(at) = rest.find("variables.") {
        rest = &rest[at + "variables.".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        found.insert(name);
    }
    found
}

#[test]
fn the_yaml_parses_back_as_the_kubernetes_types() {
    for (label, policy) in policies() {
        let export = vap::export(&policy, "test-name");
        let yaml = export.to_yaml().expect("renders");
        assert!(
            yaml.starts_with("# "),
            "{label}: the comment block comes first"
        );
        let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("YAML");
        let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
        assert_eq!(docs.len(), 2, "{label}: a policy and a binding");
        let parsed: ValidatingAdmissionPolicy =
            serde_json::from_value(docs[0].clone()).expect("a ValidatingAdmissionPolicy");
        let binding: ValidatingAdmissionPolicyBinding =
            serde_json::from_value(docs[1].clone()).expect("a binding");
        assert_eq!(parsed, export.policy, "{label}: the policy round-trips");
        assert_eq!(binding, export.binding, "{label}: the binding round-trips");
        assert_eq!(docs[0]["apiVersion"], "admissionregistration.k8s.io/v1");
        assert_eq!(docs[0]["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(docs[1]["kind"], "ValidatingAdmissionPolicyBinding");
        assert_eq!(binding.spec.policy_name, "test-name");
        // Deterministic: the same policy gives the same text.
        assert_eq!(
            vap::export(&policy, "test-name")
                .to_yaml()
                .expect("renders"),
            yaml
        );
    }
}

#[test]
fn every_expression_parses_as_cel() {
    for (label, policy) in policies() {
        let export = vap::export(&policy, "p");
        let all = expressions(&export);
        // The parser does refuse what is not CEL.
        assert!(cel::Program::compile("has(object.spec").is_err());
        assert!(all.len() > 20, "{label}: {} expressions", all.len());
        for (at, expression) in all {
            if let Err(e) = cel::Program::compile(&expression) {
                panic!("{label}: {at} does not parse as CEL: {e}\n{expression}");
            }
        }
    }
}

#[test]
fn variables_are_defined_before_they_are_read() {
    // The API server does not type-check variables: a misspelt name would
    // only fail at run time, and fall to failurePolicy.
    for (label, policy) in policies() {
        let export = vap::export(&policy, "p");
        let spec = export.policy.spec.as_ref().expect("spec");
        let mut defined = BTreeSet::new();
        for v in spec.variables.iter().flatten() {
            for name in variable_references(&v.expression) {
                assert!(
                    defined.contains(&name),
                    "{label}: variable {} reads variables.{name} before it is defined",
                    v.name
                );
            }
            assert!(defined.insert(v.name.clone()), "{label}: {} twice", v.name);
        }
        for (at, expression) in expressions(&export) {
            for name in variable_references(&expression) {
                assert!(
                    defined.contains(&name),
                    "{label}: {at} reads undefined variables.{name}"
                );
            }
        }
    }
}

#[test]
fn validations_deny_with_403_and_messages_never_call_the_authorizer() {
    for (label, policy) in policies() {
        let export = vap::export(&policy, "p");
        let spec = export.policy.spec.as_ref().expect("spec");
        for (i, v) in spec.validations.iter().flatten().enumerate() {
            assert_eq!(
                v.reason.as_deref(),
                Some("Forbidden"),
                "{label}: validations[{i}]"
            );
            let message = v.message.as_deref().unwrap_or_default();
            assert!(
                !message.is_empty() && !message.contains('\n'),
                "{label}: [{i}] {message}"
            );
            let m = v.message_expression.as_deref().unwrap_or_default();
            assert!(!m.contains("authorizer"), "{label}: validations[{i}]: {m}");
        }
        for v in spec.variables.iter().flatten() {
            assert!(!v.expression.contains("authorizer"), "{label}: {}", v.name);
        }
        let uses_rbac = policy.force_reapply.rbac.is_some();
        let yaml = export.to_yaml().expect("renders");
        assert_eq!(
            yaml.contains("authorizer.group('numaplane.numaproj.io')"),
            uses_rbac,
            "{label}"
        );
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    }
}

#[test]
fn it_matches_what_the_webhook_configurations_match() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/webhooks.yaml"),
    )
    .expect("manifests/base/webhooks.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let export = vap::export(&Policy::built_in(), "p");
    let constraints = export
        .policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .expect("matchConstraints");
    let selector = serde_json::to_value(&constraints.namespace_selector).expect("JSON");
    let rule = &constraints.resource_rules.as_ref().expect("rules")[0];
    for doc in docs.iter().filter(|d| !d.is_null()) {
        for webhook in doc["webhooks"].as_array().expect("webhooks") {
            assert_eq!(
                webhook["namespaceSelector"], selector,
                "{}",
                webhook["name"]
            );
            // The policy matches what the PipelineRollout webhooks match;
            // the other kinds' webhooks are what it leaves out.
            if webhook["rules"][0]["resources"] != serde_json::json!(["pipelinerollouts"]) {
                assert!(
                    webhook["name"].as_str().is_some_and(
                        |n| export.left_out[0].contains(n.split('.').next().unwrap_or(n))
                    ),
                    "{} is named among what the export leaves out",
                    webhook["name"]
                );
                continue;
            }
            let wr = &webhook["rules"][0];
            assert_eq!(wr["apiGroups"], serde_json::json!(rule.api_groups));
            assert_eq!(wr["resources"], serde_json::json!(rule.resources));
            // The validating webhook's DELETE (rule 21) is left out, by name.
            let mut operations: Vec<serde_json::Value> =
                wr["operations"].as_array().cloned().unwrap_or_default();
            if operations.iter().any(|o| o == "DELETE") {
                operations.retain(|o| o != "DELETE");
                assert!(
                    export.left_out.iter().any(|l| l.contains("every DELETE")),
                    "{:?}",
                    export.left_out
                );
            }
            assert_eq!(
                serde_json::Value::Array(operations),
                serde_json::json!(rule.operations)
            );
        }
    }
    // The type checker skips a policy whose rules name the version `*`.
    assert_eq!(rule.api_versions, Some(vec!["v1alpha1".to_owned()]));
}

#[test]
fn warn_mode_warns_and_audits_enforce_denies() {
    for (label, policy) in policies() {
        let actions = vap::export(&policy, "p").binding.spec.validation_actions;
        let want: &[&str] = match label {
            "warn mode" => &["Warn", "Audit"],
            _ => &["Deny"],
        };
        assert_eq!(actions, want, "{label}");
    }
}

#[test]
fn the_comment_block_says_what_is_not_covered() {
    let built_in = vap::export(&Policy::built_in(), "p")
        .to_yaml()
        .expect("renders");
    let comments: String = built_in
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect();
    for part in [
        "defaulting",
        "one-shot",
        "Events",
        "rule 8",
        "minPauseAge",
        "first failing",
    ] {
        assert!(comments.contains(part), "no {part:?} in {comments}");
    }
    assert!(comments.contains("not used by this policy"), "{comments}");
    let aged = policies().pop().expect("minPauseAge policy").1;
    let export = vap::export(&aged, "p");
    assert_eq!(export.inexpressible, ["forceReapply.minPauseAge is 5m"]);
    assert!(
        export
            .to_yaml()
            .expect("renders")
            .contains("NOT ENFORCED here")
    );
    let overridden =
        Policy::from_yaml("drainTimeout:\n  namespaces:\n  - match: [a]\n    minPauseAge: 1m\n")
            .expect("valid");
    assert_eq!(
        vap::export(&overridden, "p").inexpressible,
        ["drainTimeout.namespaces[0].minPauseAge is 1m"]
    );
}

fn bin(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pipelinerollout-webhook"))
        .arg("export-vap")
        .args(args)
        .output()
        .expect("run export-vap");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_command_prints_writes_and_refuses() {
    let (code, stdout, _) = bin(&[]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        vap::export(&Policy::built_in(), vap::DEFAULT_NAME)
            .to_yaml()
            .expect("renders")
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "forceReapply:\n  minPauseAge: 10m\n").expect("write");
    let policy = policy.display().to_string();
    let output = dir.path().join("vap.yaml");
    let output_arg = output.display().to_string();
    let (code, stdout, _) = bin(&["--policy", &policy, "--name", "x", "--output", &output_arg]);
    assert_eq!((code, stdout.as_str()), (0, ""));
    let written = std::fs::read_to_string(&output).expect("written");
    assert!(
        written.contains("name: x\n") && written.contains("NOT ENFORCED"),
        "{written}"
    );

    let (code, stdout, stderr) = bin(&["--policy", &policy, "--strict"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.contains("forceReapply.minPauseAge is 10m"),
        "{stderr}"
    );
    let (code, _, stderr) = bin(&["--strict"]);
    assert_eq!(code, 0, "the built-in policy has no minPauseAge");
    assert!(
        stderr.contains("--strict: left to the webhook, whatever the policy: MonoVertexRollouts, ISBServiceRollouts, Pipelines, MonoVertices, InterStepBufferServices and Numaplane's namespace-level ConfigMaps (rules 23 and 24)")
            && stderr.contains("validate-namespace-config")
            && stderr.contains("rules 13 to 15")
            && stderr.contains("rules 16 to 18 on PipelineRollouts: the deletion timeout")
            && stderr.contains("a child Pipeline's own lifecycle")
            && stderr.contains("rules 19 to 21"),
        "--strict names what the export leaves out: {stderr}"
    );

    let (code, _, stderr) = bin(&["--name", "Not_A_Name"]);
    assert_eq!(code, 2, "{stderr}");
    std::fs::write(dir.path().join("bad.yaml"), "mode: maybe\n").expect("write");
    let bad = dir.path().join("bad.yaml").display().to_string();
    let (code, _, stderr) = bin(&["--policy", &bad]);
    assert_eq!(code, 2, "{stderr}");
}
