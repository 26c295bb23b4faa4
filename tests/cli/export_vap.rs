//! `export-vap` without an API server: the YAML parses back as the
//! Kubernetes types it was built from, every CEL expression parses with a
//! Rust CEL parser (the `cel` crate), variables are defined before they are
//! read, and the command's flags behave. The API server's own verdict (type
//! checking and every rule-table case) is in tests/apiserver/vap.rs.

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
const OVERRIDES_RBAC: &str = include_str!("../fixtures/policies/overrides-rbac.yaml");

fn policies() -> Vec<(&'static str, Policy)> {
    let parse = |yaml: &str| Policy::from_yaml(yaml).expect("test policy is valid");
    vec![
        ("built-in", Policy::built_in()),
        ("overrides and RBAC", parse(OVERRIDES_RBAC)),
        ("warn mode", parse("mode: warn\n")),
        (
            "gated rollout deletes",
            parse(
                "forceReapply:\n  rbac: {verb: force-reapply}\n  deleteUndrained:\n    gateRolloutDeletes: true\n",
            ),
        ),
        (
            "minPauseAge",
            parse(
                "forceReapply:\n  minPauseAge: 5m\n  requirePausing: false\n  gateForcePromote: false\n",
            ),
        ),
    ]
}

/// Every CEL expression of one exported policy, with where it is.
fn policy_expressions(policy: &ValidatingAdmissionPolicy) -> Vec<(String, String)> {
    let name = policy.metadata.name.clone().unwrap_or_default();
    let spec = policy.spec.as_ref().expect("spec");
    let mut out = Vec::new();
    for v in spec.variables.iter().flatten() {
        out.push((
            format!("{name}: variables.{}", v.name),
            v.expression.clone(),
        ));
    }
    for (i, v) in spec.validations.iter().flatten().enumerate() {
        out.push((
            format!("{name}: validations[{i}].expression"),
            v.expression.clone(),
        ));
        if let Some(m) = &v.message_expression {
            out.push((
                format!("{name}: validations[{i}].messageExpression"),
                m.clone(),
            ));
        }
    }
    out
}

/// Every CEL expression of an export, with where it is.
fn expressions(export: &Export) -> Vec<(String, String)> {
    export
        .policies
        .iter()
        .flat_map(|p| policy_expressions(&p.policy))
        .collect()
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
        assert_eq!(
            docs.len(),
            2 * export.policies.len(),
            "{label}: each policy with its binding"
        );
        for (pair, exported) in docs.chunks(2).zip(&export.policies) {
            let parsed: ValidatingAdmissionPolicy =
                serde_json::from_value(pair[0].clone()).expect("a ValidatingAdmissionPolicy");
            let binding: ValidatingAdmissionPolicyBinding =
                serde_json::from_value(pair[1].clone()).expect("a binding");
            assert_eq!(parsed, exported.policy, "{label}: the policy round-trips");
            assert_eq!(
                binding, exported.binding,
                "{label}: the binding round-trips"
            );
            assert_eq!(pair[0]["apiVersion"], "admissionregistration.k8s.io/v1");
            assert_eq!(pair[0]["kind"], "ValidatingAdmissionPolicy");
            assert_eq!(pair[1]["kind"], "ValidatingAdmissionPolicyBinding");
            assert_eq!(
                Some(&binding.spec.policy_name),
                parsed.metadata.name.as_ref()
            );
        }
        let names: Vec<&str> = docs
            .iter()
            .step_by(2)
            .map(|d| d["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        let mut want = vec![
            "test-name",
            "test-name-pipelines",
            "test-name-child-deletes",
            "test-name-namespace-config",
            "test-name-rollout-delete-warnings",
        ];
        if policy
            .force_reapply
            .delete_undrained
            .own
            .gate_rollout_deletes
        {
            want.push("test-name-rollout-deletes");
        }
        want.push("test-name-child-edits");
        assert_eq!(names, want, "{label}");
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
        for exported in &export.policies {
            let spec = exported.policy.spec.as_ref().expect("spec");
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
            for (at, expression) in policy_expressions(&exported.policy) {
                for name in variable_references(&expression) {
                    assert!(
                        defined.contains(&name),
                        "{label}: {at} reads undefined variables.{name}"
                    );
                }
            }
        }
    }
}

#[test]
fn validations_deny_with_403_and_messages_never_call_the_authorizer() {
    for (label, policy) in policies() {
        let export = vap::export(&policy, "p");
        for exported in &export.policies {
            let spec = exported.policy.spec.as_ref().expect("spec");
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
            assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        }
        let uses_rbac = policy.force_reapply.rbac.is_some();
        let yaml = export.to_yaml().expect("renders");
        assert_eq!(
            yaml.contains("authorizer.group('numaplane.numaproj.io')"),
            uses_rbac,
            "{label}"
        );
        // Rule 20's and 24's grants ask RBAC on the object judged.
        assert_eq!(
            yaml.contains(
                "authorizer.group(request.resource.group).resource(request.resource.resource)"
            ),
            uses_rbac,
            "{label}"
        );
        assert_eq!(
            yaml.contains("authorizer.group('').resource('configmaps')"),
            uses_rbac,
            "{label}"
        );
    }
}

/// Each rule of a policy as `(group, resource, operations)`.
fn rules_of(exported: &vap::Exported) -> Vec<(String, String, Vec<String>)> {
    let constraints = exported
        .policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .expect("matchConstraints");
    constraints
        .resource_rules
        .iter()
        .flatten()
        .map(|r| {
            let one = |v: &Option<Vec<String>>| v.clone().unwrap_or_default().join(",");
            (
                one(&r.api_groups),
                one(&r.resources),
                r.operations.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn it_matches_what_the_webhook_configurations_match() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base/webhooks.yaml"),
    )
    .expect("manifests/base/webhooks.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    let export = vap::export(&Policy::built_in(), "p");
    // What the exported policies match, by (group, resource, operation).
    let mut exported = BTreeSet::new();
    for policy in &export.policies {
        let constraints = policy
            .policy
            .spec
            .as_ref()
            .and_then(|s| s.match_constraints.as_ref())
            .expect("matchConstraints");
        for rule in constraints.resource_rules.iter().flatten() {
            // The type checker skips a policy whose rules name the version `*`.
            let version = rule.api_versions.clone().unwrap_or_default();
            assert!(version == ["v1alpha1"] || version == ["v1"], "{version:?}");
        }
        for (group, resource, operations) in rules_of(policy) {
            for operation in operations {
                exported.insert((group.clone(), resource.clone(), operation));
            }
        }
    }
    let mut webhooks = BTreeSet::new();
    for doc in docs.iter().filter(|d| !d.is_null()) {
        for webhook in doc["webhooks"].as_array().expect("webhooks") {
            let name = webhook["name"].as_str().unwrap_or_default();
            for policy in &export.policies {
                let constraints = policy
                    .policy
                    .spec
                    .as_ref()
                    .and_then(|s| s.match_constraints.as_ref())
                    .expect("matchConstraints");
                let selector = serde_json::to_value(&constraints.namespace_selector).expect("JSON");
                assert_eq!(webhook["namespaceSelector"], selector, "{name}");
            }
            if name.starts_with("mutate.") {
                continue;
            }
            if name.starts_with("validate-namespace-config.") {
                let constraints = export.policies[3]
                    .policy
                    .spec
                    .as_ref()
                    .and_then(|s| s.match_constraints.as_ref())
                    .expect("matchConstraints");
                assert_eq!(
                    webhook["objectSelector"],
                    serde_json::to_value(&constraints.object_selector).expect("JSON"),
                    "the ConfigMap policy selects what the webhook selects"
                );
            }
            for rule in webhook["rules"].as_array().expect("rules") {
                for operation in rule["operations"].as_array().expect("operations") {
                    webhooks.insert((
                        rule["apiGroups"][0].as_str().unwrap_or_default().to_owned(),
                        rule["resources"][0].as_str().unwrap_or_default().to_owned(),
                        operation.as_str().unwrap_or_default().to_owned(),
                    ));
                }
            }
        }
    }
    assert!(
        exported.is_subset(&webhooks),
        "{:?}",
        exported.difference(&webhooks).collect::<Vec<_>>()
    );
    // Every validating webhook's match the export leaves out is named.
    let named = |(_, resource, operation): &(String, String, String)| match (
        resource.as_str(),
        operation.as_str(),
    ) {
        ("monovertices" | "interstepbufferservices", _) => {
            export.left_out[0].contains("writes of MonoVertices and InterStepBufferServices")
        }
        ("monovertexrollouts", _) => export.left_out[0].contains("validate-monovertexrollouts"),
        ("isbservicerollouts", _) => export.left_out[0].contains("validate-isbservicerollouts"),
        ("configmaps", "DELETE") => {
            export.left_out[2].contains("a DELETE of a namespace-level ConfigMap")
        }
        ("numaflowcontrollers" | "numaflowcontrollerrollouts", _) => {
            export.left_out[4].contains("validate-numaflow-controllers")
        }
        ("vertices" | "vertices/status" | "deployments" | "statefulsets" | "services", _) => export
            .left_out[3]
            .contains("validate-numaflow-vertices and validate-numaflow-workloads"),
        // A custom resource's /status serves get, update and patch only:
        // no request deletes it.
        (status, "DELETE") if status.ends_with("/status") => true,
        _ => false,
    };
    for missing in webhooks.difference(&exported) {
        assert!(
            named(missing),
            "{missing:?} is neither exported nor named among what the export leaves out"
        );
    }
}

#[test]
fn each_policy_matches_its_kinds_and_operations() {
    let export = vap::export(&Policy::built_in(), "p");
    let rule = |g: &str, r: &str, ops: &[&str]| {
        (
            g.to_owned(),
            r.to_owned(),
            ops.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>(),
        )
    };
    let cu: &[&str] = &["CREATE", "UPDATE"];
    let want = [
        vec![rule("numaplane.numaproj.io", "pipelinerollouts", cu)],
        vec![rule("numaflow.numaproj.io", "pipelines", cu)],
        vec![
            rule("numaflow.numaproj.io", "pipelines", &["DELETE"]),
            rule("numaflow.numaproj.io", "monovertices", &["DELETE"]),
            rule(
                "numaflow.numaproj.io",
                "interstepbufferservices",
                &["DELETE"],
            ),
        ],
        vec![rule("", "configmaps", cu)],
        vec![rule(
            "numaplane.numaproj.io",
            "pipelinerollouts",
            &["DELETE"],
        )],
        ["pipelines", "monovertices", "interstepbufferservices"]
            .into_iter()
            .flat_map(|r| {
                [
                    rule("numaflow.numaproj.io", r, cu),
                    rule("numaflow.numaproj.io", &format!("{r}/status"), cu),
                ]
            })
            .collect(),
    ];
    assert_eq!(export.policies.len(), want.len());
    for (exported, want) in export.policies.iter().zip(want) {
        assert_eq!(
            rules_of(exported),
            want,
            "{:?}",
            exported.policy.metadata.name
        );
        assert_eq!(
            exported.binding.spec.policy_name,
            exported.policy.metadata.name.clone().unwrap_or_default()
        );
        assert!(!exported.validations.is_empty());
    }
    let selector = export.policies[3]
        .policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .and_then(|c| c.object_selector.as_ref())
        .expect("the ConfigMap policy selects by label");
    assert_eq!(
        serde_json::to_value(selector).expect("JSON"),
        serde_json::json!({"matchExpressions": [{"key": "numaplane.numaproj.io/config", "operator": "In", "values": ["namespace-level-config", "numaflow-controller-definitions"]}]})
    );
    let rules: Vec<&str> = export
        .policies
        .iter()
        .flat_map(|p| p.validations.clone())
        .collect();
    for number in [
        "rule 16", "rule 17", "rule 18", "rule 19", "rule 20", "rule 21", "rule 23", "rule 24",
        "rule 26",
    ] {
        assert!(
            rules.iter().any(|r| r.starts_with(number)),
            "{number} is exported: {rules:?}"
        );
    }
    // The child lifecycle exempts Numaplane's controller; pause-timestamp
    // exempts Numaflow's only.
    let children = serde_json::to_string(&export.policies[1].policy).expect("JSON");
    assert!(children.contains("system:serviceaccount:numaplane-system:numaplane-sa"));
    assert!(children.contains("system:serviceaccount:numaflow-system:numaflow-sa"));
    let deletes = serde_json::to_string(&export.policies[2].policy).expect("JSON");
    for exempt in [
        "numaplane-sa",
        "generic-garbage-collector",
        "namespace-controller",
    ] {
        assert!(
            deletes.contains(exempt),
            "{exempt} may delete owned children"
        );
    }
}

#[test]
fn warn_mode_warns_and_audits_enforce_denies() {
    for (label, policy) in policies() {
        let want: &[&str] = match label {
            "warn mode" => &["Warn", "Audit"],
            _ => &["Deny"],
        };
        for exported in vap::export(&policy, "p").policies {
            let name = exported.policy.metadata.name.unwrap_or_default();
            // Rule 21's warning is a warning in either mode.
            let want: &[&str] = if name.ends_with("-rollout-delete-warnings") {
                &["Warn"]
            } else {
                want
            };
            assert_eq!(
                exported.binding.spec.validation_actions, want,
                "{label}: {name}"
            );
        }
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

/// Runs `export-vap ARGS`: the exit code, standard output and error.
pub(crate) fn bin(args: &[&str]) -> (i32, String, String) {
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
        stderr.contains("--strict: left to the webhook, whatever the policy: MonoVertexRollouts and ISBServiceRollouts, and the writes of MonoVertices and InterStepBufferServices")
            && stderr.contains("rules 13 to 15")
            && stderr.contains("Go's folding of non-ASCII key characters (the long s as s, the Kelvin sign as k)")
            && stderr.contains("a namespace left to Numaplane's cluster default strategy (rule 24)"),
        "--strict names what the export leaves out: {stderr}"
    );
    // And nothing the export carries.
    for carried in [
        "rules 16 to 18",
        "rule 19",
        "rule 20",
        "rule 21",
        "rules 23 and 24",
        "rule 26",
    ] {
        assert!(
            !stderr.contains(carried),
            "{carried} is exported, not left out: {stderr}"
        );
    }

    let (code, _, stderr) = bin(&["--name", "Not_A_Name"]);
    assert_eq!(code, 2, "{stderr}");
    std::fs::write(dir.path().join("bad.yaml"), "mode: maybe\n").expect("write");
    let bad = dir.path().join("bad.yaml").display().to_string();
    let (code, _, stderr) = bin(&["--policy", &bad]);
    assert_eq!(code, 2, "{stderr}");
}
