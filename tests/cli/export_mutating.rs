//! `export-vap --mutating` without an API server: the YAML parses back as
//! the Kubernetes types it was built from, every CEL expression parses
//! (the `cel` crate), variables are defined before they are read, the
//! namespaces' defaults are the policy's, and the flags behave. What the
//! API server stores under the policy, against the webhook's `/mutate`, is
//! in tests/apiserver/mutating_policy.rs.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};
use pipelinerollout_webhook::policy::Policy;
use pipelinerollout_webhook::vap::mutating::{MutatingExport, export_mutating};
use serde_json::Value;

const DEFAULTS: &str = include_str!("../fixtures/policies/defaults.yaml");

fn policies() -> Vec<(&'static str, Policy)> {
    let parse = |yaml: &str| Policy::from_yaml(yaml).expect("test policy is valid");
    vec![
        ("built-in", Policy::built_in()),
        ("defaults", parse(DEFAULTS)),
        ("no one-shot", parse("forceReapply:\n  oneShot: false\n")),
    ]
}

/// Every CEL expression, with where it is.
fn expressions(export: &MutatingExport) -> Vec<(String, String)> {
    let spec = export.policy.spec.as_ref().expect("spec");
    let variables = spec
        .variables
        .iter()
        .flatten()
        .map(|v| (format!("variables.{}", v.name), v.expression.clone()));
    let mutations = spec.mutations.iter().flatten().enumerate().map(|(i, m)| {
        let patch = m.json_patch.as_ref().expect("a JSON Patch mutation");
        (
            format!("mutations[{i}]"),
            patch.expression.clone().unwrap_or_default(),
        )
    });
    let conditions = spec
        .match_conditions
        .iter()
        .flatten()
        .map(|c| (format!("matchConditions.{}", c.name), c.expression.clone()));
    variables.chain(mutations).chain(conditions).collect()
}

fn reads(expression: &str) -> BTreeSet<String> {
    expression
        .split("variables.")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn the_yaml_parses_back_and_every_expression_parses() {
    for (label, policy) in policies() {
        let export = export_mutating(&policy, "test-name");
        let yaml = export.to_yaml().expect("renders");
        assert!(yaml.starts_with("# "), "{label}: the comment block first");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).expect("YAML");
        let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
        assert_eq!(docs.len(), 2, "{label}: the policy and its binding");
        assert_eq!(docs[0]["apiVersion"], "admissionregistration.k8s.io/v1");
        assert_eq!(docs[0]["kind"], "MutatingAdmissionPolicy");
        assert_eq!(docs[1]["kind"], "MutatingAdmissionPolicyBinding");
        let parsed: MutatingAdmissionPolicy =
            serde_json::from_value(docs[0].clone()).expect("a MutatingAdmissionPolicy");
        let binding: MutatingAdmissionPolicyBinding =
            serde_json::from_value(docs[1].clone()).expect("a binding");
        assert_eq!(parsed, export.policy, "{label}: the policy round-trips");
        assert_eq!(binding, export.binding, "{label}: the binding round-trips");
        assert_eq!(parsed.metadata.name.as_deref(), Some("test-name-defaults"));
        assert_eq!(
            binding.spec.and_then(|s| s.policy_name).as_deref(),
            Some("test-name-defaults")
        );
        let mutations = parsed.spec.and_then(|s| s.mutations).unwrap_or_default();
        assert_eq!(
            mutations.len(),
            if policy.force_reapply.one_shot { 2 } else { 1 },
            "{label}: the defaults, and the one-shot reset where the policy asks for it"
        );
        assert_eq!(mutations.len(), export.mutations.len());

        let mut defined = BTreeSet::new();
        for (at, expression) in expressions(&export) {
            if let Err(e) = cel::Program::compile(&expression) {
                panic!("{label}: {at} does not parse: {e}\n{expression}");
            }
            for read in reads(&expression) {
                assert!(
                    defined.contains(&read),
                    "{label}: {at} reads variables.{read} before it is defined"
                );
            }
            if let Some(name) = at.strip_prefix("variables.") {
                defined.insert(name.to_owned());
            }
        }
        // Nothing defined that no mutation reads.
        let all: String = expressions(&export).into_iter().map(|(_, e)| e).collect();
        for name in &defined {
            assert!(
                all.contains(&format!("variables.{name}")),
                "{label}: variables.{name} is never read"
            );
        }
    }
}

#[test]
fn each_namespace_gets_its_scopes_defaults() {
    let policy = Policy::from_yaml(DEFAULTS).expect("valid");
    let export = export_mutating(&policy, "p");
    let spec = export.policy.spec.expect("spec");
    let variable = |name: &str| {
        spec.variables
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .map(|v| v.expression.clone())
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    // First match wins: payments-* and ledger (0) before pay* (1); no
    // timeout (noTimeoutSeconds) at the top level.
    assert_eq!(
        variable("pauseDefault"),
        "(variables.scope == 0 ? 300 : (variables.scope == 1 ? 600 : 31536000))"
    );
    assert_eq!(
        variable("deletionDefault"),
        "(variables.dScope == 0 ? 31536000 : 60)"
    );
    // The built-in policy has no overrides: literals, and no scope variables.
    let built_in = export_mutating(&Policy::built_in(), "p");
    let spec = built_in.policy.spec.expect("spec");
    let names: Vec<&str> = spec
        .variables
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert!(
        !names.contains(&"scope") && !names.contains(&"ns"),
        "{names:?}"
    );
}

fn bin(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--mutating"];
    all.extend_from_slice(args);
    crate::export_vap::bin(&all)
}

#[test]
fn the_command_prints_and_strict_names_what_it_leaves_out() {
    let (code, stdout, _) = bin(&[]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        export_mutating(&Policy::built_in(), "pipelinerollout-policy")
            .to_yaml()
            .expect("renders")
    );
    let (code, stdout, stderr) = bin(&["--strict", "--name", "x"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("name: x-defaults\n"), "{stdout}");
    assert!(
        stderr.contains("left to the webhook, whatever the policy: warnings")
            && stderr.contains("the audit annotations drain-timeout-default"),
        "{stderr}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "forcePromote:\n  oneShot: true\n").expect("write");
    let policy = policy.display().to_string();
    let (code, stdout, stderr) = bin(&["--policy", &policy, "--strict"]);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(stderr.contains("forcePromote.oneShot"), "{stderr}");
    // Without --strict it is written, and the comment block says so.
    let (code, stdout, _) = bin(&["--policy", &policy]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("# - forcePromote.oneShot: /mutate records"),
        "{stdout}"
    );
}
