//! `export-vap`: the validation rules of a policy as Kubernetes
//! ValidatingAdmissionPolicies and their bindings, for clusters that prefer
//! in-process admission (CEL) to a webhook. The policy's values are written
//! into the expressions (no params resource), so the output is
//! deterministic and reviewable. See docs/vap.md.
//!
//! Six or seven policies, each with its binding: [`rules`] (PipelineRollouts,
//! with [`variables`]), [`children`] (a Pipeline's own writes), [`deletes`]
//! (an owned child's DELETE), [`namespace_config`] (Numaplane's
//! namespace-level ConfigMap), [`rollout_deletes`] (a PipelineRollout's
//! DELETE: its warning, and its gate where the policy asks for one) and
//! [`child_edits`] (an owned child's CREATE and UPDATE, rule 26) build
//! the CEL, with [`cel`]'s pieces, [`validation`]'s grants and [`timeout`]'s
//! drain-timeout checks; this module wraps it in the Kubernetes objects,
//! and [`coverage`] says what the export does not cover.

pub mod cel;
pub mod child_edits;
pub mod children;
pub mod coverage;
pub mod deletes;
pub mod mutating;
pub mod namespace_config;
pub mod rollout_deletes;
pub mod rules;
pub mod timeout;
pub mod validation;
pub mod variables;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use crate::kinds::{CONFIGMAPS, Kind};
use crate::namespace_config::{CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG};
use crate::policy::model::{Mode, Policy};
pub use coverage::left_out;
use coverage::{inexpressible, not_covered};
use validation::Assertion;
use variables::Var;

/// The name the policy and its binding get unless `--name` says otherwise.
pub const DEFAULT_NAME: &str = "pipelinerollout-policy";

/// The namespaces the webhook configurations exclude
/// (`manifests/base/webhooks.yaml`); the exported policies exclude the same.
pub const EXCLUDED_NAMESPACES: [&str; 2] = ["pipelinerollout-webhook", "kube-system"];

/// The version the policies match. Not `*`: the type checker skips
/// policies whose rules name `*` versions.
pub const API_VERSION: &str = crate::rollout::VERSION;

/// The suffixes of the policies after the first, by what they judge.
pub const CHILDREN_SUFFIX: &str = "-pipelines";
/// The child DELETE policy's suffix.
pub const DELETES_SUFFIX: &str = "-child-deletes";
/// The child edit policy's suffix (rule 26).
pub const CHILD_EDITS_SUFFIX: &str = "-child-edits";
/// The namespace-level ConfigMap policy's suffix.
pub const NAMESPACE_CONFIG_SUFFIX: &str = "-namespace-config";
/// The rollout DELETE warning policy's suffix (rule 21's warning).
pub const ROLLOUT_DELETE_WARNINGS_SUFFIX: &str = "-rollout-delete-warnings";
/// The rollout DELETE gate policy's suffix (rule 21 under
/// `gateRolloutDeletes`).
pub const ROLLOUT_DELETES_SUFFIX: &str = "-rollout-deletes";

/// One exported ValidatingAdmissionPolicy and its binding.
#[derive(Debug, Clone)]
pub struct Exported {
    /// What it judges, one line, for the comment block.
    pub covers: &'static str,
    /// The ValidatingAdmissionPolicy.
    pub policy: ValidatingAdmissionPolicy,
    /// Its binding.
    pub binding: ValidatingAdmissionPolicyBinding,
    /// What each validation checks, in order (the comment block lists them).
    pub validations: Vec<&'static str>,
}

/// What `export-vap` produced for a policy.
#[derive(Debug, Clone)]
pub struct Export {
    /// The policies, each with its binding: PipelineRollouts (named as
    /// asked), then child Pipelines' writes, owned children's DELETEs,
    /// Numaplane's namespace-level ConfigMaps, PipelineRollout DELETEs'
    /// warning and, under `gateRolloutDeletes`, their gate, then owned
    /// children's edits (the name and a suffix).
    pub policies: Vec<Exported>,
    /// What the exported policies do not do that the webhook does, one
    /// line each (the comment block).
    pub not_covered: Vec<String>,
    /// Validations the policy asks for that CEL cannot express (`--strict`
    /// fails on these): a `minPauseAge` above 0.
    pub inexpressible: Vec<String>,
    /// What the export leaves to the webhook by design, whatever the
    /// policy (`--strict` names these and still succeeds): see [`left_out`].
    pub left_out: Vec<String>,
}

impl Export {
    /// The PipelineRollout policy (the first).
    pub fn rollouts(&self) -> &Exported {
        &self.policies[0]
    }
}

/// What one policy matches.
struct Match {
    kinds: Vec<(&'static str, &'static str)>,
    operations: &'static [&'static str],
    object_selector: Option<LabelSelector>,
}

/// Exports `policy` under `name`.
pub fn export(policy: &Policy, name: &str) -> Export {
    let built = rules::rules(policy);
    let resource = |k: Kind| (k.group(), k.resource());
    let create_update: &[&str] = &["CREATE", "UPDATE"];
    let (child_vars, child_checks) = children::rules(policy);
    let (delete_vars, delete_checks) = deletes::rules(policy);
    let (edit_vars, edit_checks) = child_edits::rules(policy);
    let (config_vars, config_checks) = namespace_config::rules(policy);
    let (warning_vars, warning_checks) = rollout_deletes::warnings(policy);
    let rollout_deletes = Match {
        kinds: vec![resource(Kind::PipelineRollout)],
        operations: &["DELETE"],
        object_selector: None,
    };
    let mut policies = vec![
        wrap(
            policy.mode,
            name,
            "PipelineRollouts, CREATE and UPDATE: rules 2 to 8, 16 to 18, and 19 in spec.pipeline.metadata",
            &Match {
                kinds: vec![resource(Kind::PipelineRollout)],
                operations: create_update,
                object_selector: None,
            },
            built.variables,
            built.checks,
        ),
        wrap(
            policy.mode,
            &format!("{name}{CHILDREN_SUFFIX}"),
            "Pipelines, CREATE and UPDATE: their own lifecycle (rules 2 to 4 and 16 to 18, by anyone but numaplane.controllerAccount) and pause-timestamp (rule 19)",
            &Match {
                kinds: vec![resource(Kind::Pipeline)],
                operations: create_update,
                object_selector: None,
            },
            child_vars,
            child_checks,
        ),
        wrap(
            policy.mode,
            &format!("{name}{DELETES_SUFFIX}"),
            "Pipelines, MonoVertices and InterStepBufferServices, DELETE: an owned child's deletion needs forceReapply.deleteUndrained (rule 20)",
            &Match {
                kinds: deletes::KINDS.iter().map(|k| resource(*k)).collect(),
                operations: &["DELETE"],
                object_selector: None,
            },
            delete_vars,
            delete_checks,
        ),
        wrap(
            policy.mode,
            &format!("{name}{NAMESPACE_CONFIG_SUFFIX}"),
            "Numaplane's namespace-level ConfigMaps and Numaflow controller definitions, CREATE and UPDATE: data.upgradeStrategy (rules 23 and 24), definitions outside numaplane.namespace (rule 27)",
            &Match {
                kinds: vec![("", CONFIGMAPS)],
                operations: create_update,
                object_selector: Some(LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: CONFIG_LABEL.to_owned(),
                        operator: "In".to_owned(),
                        values: Some(vec![
                            NAMESPACE_CONFIG.to_owned(),
                            CONTROLLER_DEFINITIONS.to_owned(),
                        ]),
                    }]),
                    ..LabelSelector::default()
                }),
            },
            config_vars,
            config_checks,
        ),
        // Warns whatever the mode: the webhook's warning is no denial.
        warning_only(wrap(
            policy.mode,
            &format!("{name}{ROLLOUT_DELETE_WARNINGS_SUFFIX}"),
            "PipelineRollouts, DELETE: the warning naming the deletion timeout its Pipelines are drained for (rule 21), bound with validationActions [Warn]",
            &rollout_deletes,
            warning_vars,
            warning_checks,
        )),
    ];
    if let Some((gate_vars, gate_checks)) = rollout_deletes::gate(policy) {
        policies.push(wrap(
            policy.mode,
            &format!("{name}{ROLLOUT_DELETES_SUFFIX}"),
            "PipelineRollouts, DELETE: forceReapply.deleteUndrained.gateRolloutDeletes, the deleteUndrained permission (rule 21)",
            &rollout_deletes,
            gate_vars,
            gate_checks,
        ));
    }
    policies.push(wrap(
        policy.mode,
        &format!("{name}{CHILD_EDITS_SUFFIX}"),
        "Pipelines, MonoVertices and InterStepBufferServices, CREATE and UPDATE (and their /status): an owned child's spec but scaling and pausing, status, ownerReferences, finalizers and Numaplane's and Numaflow's keys are changed by anyone but numaplane.controllerAccount and numaflow.controllerAccount only with forceReapply.editChildren (rule 26)",
        &Match {
            kinds: child_edits::KINDS
                .iter()
                .flat_map(|k| [resource(*k), (k.group(), child_edits::status_of(*k))])
                .collect(),
            operations: create_update,
            object_selector: None,
        },
        edit_vars,
        edit_checks,
    ));
    Export {
        policies,
        not_covered: not_covered(policy),
        inexpressible: inexpressible(policy),
        left_out: left_out(),
    }
}

/// `exported` with a binding that only warns (never audits or denies).
fn warning_only(mut exported: Exported) -> Exported {
    exported.binding.spec.validation_actions = vec!["Warn".to_owned()];
    exported
}

/// One policy and its binding.
fn wrap(
    mode: Mode,
    name: &str,
    covers: &'static str,
    matches: &Match,
    variables: Vec<Var>,
    checks: Vec<Assertion>,
) -> Exported {
    let validations = checks.iter().map(|c| c.rule).collect();
    let meta = ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(labels()),
        ..ObjectMeta::default()
    };
    let spec = ValidatingAdmissionPolicySpec {
        failure_policy: Some("Fail".to_owned()),
        match_constraints: Some(match_resources(matches)),
        variables: Some(
            variables
                .into_iter()
                .map(|v| Variable {
                    name: v.name.to_owned(),
                    expression: v.expression,
                })
                .collect(),
        ),
        validations: Some(
            checks
                .into_iter()
                .map(|c| Validation {
                    expression: c.expression,
                    message: Some(c.message),
                    message_expression: Some(c.message_expression),
                    // 403 like the webhook's denials, not 422.
                    reason: Some("Forbidden".to_owned()),
                })
                .collect(),
        ),
        ..ValidatingAdmissionPolicySpec::default()
    };
    let actions = match mode {
        Mode::Enforce => vec!["Deny".to_owned()],
        Mode::Warn => vec!["Warn".to_owned(), "Audit".to_owned()],
    };
    Exported {
        covers,
        policy: ValidatingAdmissionPolicy {
            metadata: meta.clone(),
            spec: Some(spec),
            status: None,
        },
        binding: ValidatingAdmissionPolicyBinding {
            metadata: meta,
            spec: ValidatingAdmissionPolicyBindingSpec {
                policy_name: name.to_owned(),
                validation_actions: actions,
                ..ValidatingAdmissionPolicyBindingSpec::default()
            },
        },
        validations,
    }
}

/// What a policy matches, as the webhook configurations match it: the
/// kinds and operations in `matches`, never in [`EXCLUDED_NAMESPACES`].
fn match_resources(matches: &Match) -> MatchResources {
    let resource_rules = matches
        .kinds
        .iter()
        .map(|(group, resource)| NamedRuleWithOperations {
            api_groups: Some(vec![(*group).to_owned()]),
            api_versions: Some(vec![
                if group.is_empty() { "v1" } else { API_VERSION }.to_owned(),
            ]),
            operations: Some(matches.operations.iter().map(|o| (*o).to_owned()).collect()),
            resources: Some(vec![(*resource).to_owned()]),
            scope: Some("Namespaced".to_owned()),
            ..NamedRuleWithOperations::default()
        })
        .collect();
    let namespace_selector = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".to_owned(),
            operator: "NotIn".to_owned(),
            values: Some(EXCLUDED_NAMESPACES.map(str::to_owned).to_vec()),
        }]),
        ..LabelSelector::default()
    };
    MatchResources {
        match_policy: Some("Equivalent".to_owned()),
        namespace_selector: Some(namespace_selector),
        object_selector: matches.object_selector.clone(),
        resource_rules: Some(resource_rules),
        ..MatchResources::default()
    }
}

/// The labels every exported object carries.
fn labels() -> std::collections::BTreeMap<String, String> {
    [(
        "app.kubernetes.io/name".to_owned(),
        "pipelinerollout-webhook".to_owned(),
    )]
    .into()
}

/// The export could not be written as YAML.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot render {what}: {reason}")]
pub struct RenderError {
    /// Which object.
    pub what: &'static str,
    /// What the YAML writer said.
    pub reason: String,
}

impl Export {
    /// The YAML: the comment block, then each policy and its binding as
    /// two documents.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let mut out = String::new();
        out.push_str(&format!(
            "# Exported by `pipelinerollout-webhook export-vap` ({}): the validations of\n\
             # the webhook's validating webhooks under the policy, as ValidatingAdmissionPolicies\n\
             # and their bindings (see docs/vap.md). The policy's values are written into the\n\
             # expressions. failurePolicy Fail: an expression that fails, or runs past the CEL\n\
             # cost budget, refuses the request (as the webhook's configurations do when it is down).\n\
             #\n\
             # Not covered by this export (the webhook does these):\n",
            env!("CARGO_PKG_VERSION")
        ));
        for line in &self.not_covered {
            out.push_str(&format!("# - {line}\n"));
        }
        for exported in &self.policies {
            out.push_str(&format!(
                "#\n# {}: {}.\n# Its validations, in order (a denial shows the first that fails):\n",
                exported.policy.metadata.name.as_deref().unwrap_or_default(),
                exported.covers
            ));
            for (i, rule) in exported.validations.iter().enumerate() {
                out.push_str(&format!("# {i:>2}. {rule}\n"));
            }
        }
        for exported in &self.policies {
            let policy = serde_saphyr::to_string(&exported.policy).map_err(|e| RenderError {
                what: "a ValidatingAdmissionPolicy",
                reason: e.to_string(),
            })?;
            let binding = serde_saphyr::to_string(&exported.binding).map_err(|e| RenderError {
                what: "a binding",
                reason: e.to_string(),
            })?;
            out.push_str("---\n");
            out.push_str(&policy);
            out.push_str("---\n");
            out.push_str(&binding);
        }
        Ok(out)
    }
}

/// A DNS subdomain name, as Kubernetes requires of object names.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}
