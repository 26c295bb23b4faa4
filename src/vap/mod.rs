//! `export-vap`: the validation rules of a policy as a Kubernetes
//! ValidatingAdmissionPolicy and its binding, for clusters that prefer
//! in-process admission (CEL) to a webhook. The policy's values are written
//! into the expressions (no params resource), so the output is
//! deterministic and reviewable. See docs/vap.md.
//!
//! [`variables`] and [`rules`] build the CEL (with [`cel`]'s pieces); this
//! module wraps it
//! in the Kubernetes objects, says what the export does not cover, and runs
//! the command.

pub mod cel;
pub mod rules;
pub mod variables;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use crate::policy::format_seconds;
use crate::policy::model::{Mode, Policy};

/// The name the policy and its binding get unless `--name` says otherwise.
pub const DEFAULT_NAME: &str = "pipelinerollout-policy";

/// The namespaces the webhook configurations exclude
/// (`manifests/base/webhooks.yaml`); the exported policy excludes the same.
pub const EXCLUDED_NAMESPACES: [&str; 2] = ["pipelinerollout-webhook", "kube-system"];

/// The PipelineRollout version the policy matches. Not `*`: the type
/// checker skips policies whose rules name `*` versions.
pub const API_VERSION: &str = crate::rollout::VERSION;

/// What `export-vap` produced for a policy.
#[derive(Debug, Clone)]
pub struct Export {
    /// The ValidatingAdmissionPolicy.
    pub policy: ValidatingAdmissionPolicy,
    /// Its binding.
    pub binding: ValidatingAdmissionPolicyBinding,
    /// What the exported policy does not do that the webhook does, one
    /// line each (the comment block).
    pub not_covered: Vec<String>,
    /// Validations the policy asks for that CEL cannot express (`--strict`
    /// fails on these): today a `minPauseAge` above 0.
    pub inexpressible: Vec<String>,
    /// What the export leaves to the webhook by design, whatever the
    /// policy: the kinds other than PipelineRollout, rules 13 to 15, the
    /// deletion timeout (rules 16 to 18), a child Pipeline's lifecycle and
    /// rules 19 to 21 (`--strict` names these and still succeeds).
    pub left_out: Vec<String>,
    /// What each validation checks, in order (the comment block lists them).
    pub validations: Vec<&'static str>,
}

/// Exports `policy` under `name`.
pub fn export(policy: &Policy, name: &str) -> Export {
    let built = rules::rules(policy);
    let validations = built.checks.iter().map(|c| c.rule).collect();
    let meta = ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(
            [(
                "app.kubernetes.io/name".to_owned(),
                "pipelinerollout-webhook".to_owned(),
            )]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    let rule = NamedRuleWithOperations {
        api_groups: Some(vec![crate::rollout::GROUP.to_owned()]),
        api_versions: Some(vec![API_VERSION.to_owned()]),
        operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
        resources: Some(vec![crate::rollout::RESOURCE.to_owned()]),
        scope: Some("Namespaced".to_owned()),
        ..NamedRuleWithOperations::default()
    };
    let namespace_selector = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".to_owned(),
            operator: "NotIn".to_owned(),
            values: Some(EXCLUDED_NAMESPACES.map(str::to_owned).to_vec()),
        }]),
        ..LabelSelector::default()
    };
    let spec = ValidatingAdmissionPolicySpec {
        failure_policy: Some("Fail".to_owned()),
        match_constraints: Some(MatchResources {
            match_policy: Some("Equivalent".to_owned()),
            namespace_selector: Some(namespace_selector),
            resource_rules: Some(vec![rule]),
            ..MatchResources::default()
        }),
        variables: Some(
            built
                .variables
                .into_iter()
                .map(|v| Variable {
                    name: v.name.to_owned(),
                    expression: v.expression,
                })
                .collect(),
        ),
        validations: Some(
            built
                .checks
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
    let actions = match policy.mode {
        Mode::Enforce => vec!["Deny".to_owned()],
        Mode::Warn => vec!["Warn".to_owned(), "Audit".to_owned()],
    };
    Export {
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
        not_covered: not_covered(policy),
        inexpressible: inexpressible(policy),
        left_out: left_out(),
        validations,
    }
}

/// The `minPauseAge` settings above 0, by key.
fn inexpressible(policy: &Policy) -> Vec<String> {
    let mut found = Vec::new();
    let top = policy.force_reapply.min_pause_age_seconds;
    if top > 0 {
        found.push(format!(
            "forceReapply.minPauseAge is {}",
            format_seconds(top)
        ));
    }
    for (i, ns) in policy.drain_timeout.namespaces.iter().enumerate() {
        if let Some(age) = ns.min_pause_age_seconds.filter(|a| *a > 0) {
            found.push(format!(
                "drainTimeout.namespaces[{i}].minPauseAge is {}",
                format_seconds(age)
            ));
        }
    }
    found
}

/// What the export never covers: it matches PipelineRollouts only, and
/// judges their drain timeout and the allow-data-loss and forcePromote
/// switches (rules 2 to 7); the other kinds and Numaplane's namespace-level
/// ConfigMap (rules 23 and 24) are left to the webhook.
pub fn left_out() -> Vec<String> {
    vec![
        "MonoVertexRollouts, ISBServiceRollouts, Pipelines, MonoVertices, InterStepBufferServices and Numaplane's namespace-level ConfigMaps (rules 23 and 24): this policy matches PipelineRollouts only; keep the webhook's validate-children, validate-monovertexrollouts, validate-isbservicerollouts and validate-namespace-config webhooks for them".to_owned(),
        "rules 13 to 15 on PipelineRollouts: the force-promote label and marked-for-deletion in spec.pipeline.metadata, and Numaplane's bookkeeping keys there".to_owned(),
        "rules 16 to 18 on PipelineRollouts: the deletion timeout (spec.pipeline.spec.lifecycle.deletionGracePeriodSeconds, or the deprecated deleteGracePeriodSeconds) against deletionTimeout, and the warnings about the field Numaflow does not read".to_owned(),
        "a child Pipeline's own lifecycle (spec.lifecycle's pauseGracePeriodSeconds, deletionGracePeriodSeconds, deleteGracePeriodSeconds, rules 2 to 4 and 16 to 18): the validate-children webhook judges it".to_owned(),
        "rules 19 to 21: pause-timestamp (on Pipelines and in spec.pipeline.metadata), and every DELETE (a rollout's child, and a PipelineRollout's warning and forceReapply.deleteUndrained.gateRolloutDeletes): this policy matches CREATE and UPDATE only; keep the webhooks' DELETE rules".to_owned(),
    ]
}

fn not_covered(policy: &Policy) -> Vec<String> {
    let mut lines = left_out();
    lines.extend([
        "defaulting: /mutate writes drainTimeout.default where a rollout sets no timeout, and deletionTimeout.default where it sets no deletion timeout; a ValidatingAdmissionPolicy cannot change objects".to_owned(),
    ]);
    if policy.force_reapply.one_shot {
        lines.push("the one-shot reset (forceReapply.oneShot): /mutate and the sweeper set allow-data-loss back to \"false\" once the pause is over".to_owned());
    }
    if policy.force_promote.one_shot {
        lines.push("the one-shot forcePromote (forcePromote.oneShot): /mutate records the upgrade it is for and resets it once that upgrade is over".to_owned());
    }
    lines.extend([
        "Events (ForceReapplyAllowed, ForceReapplyDenied, ForcePromoteAllowed) and the force-reapply and force-promote audit annotations".to_owned(),
        "warnings: a violation whose inputs are unchanged on UPDATE (rule 8) and allow-data-loss left at \"true\" while nothing pauses (rule 11) and forcePromote kept on (rule 12) and an HPA rider (rule 22) are allowed silently".to_owned(),
        "messages: the API server shows the first failing validation's message; the webhook lists every violation".to_owned(),
    ]);
    let ages = inexpressible(policy);
    if ages.is_empty() {
        lines.push(
            "forceReapply.minPauseAge (CEL in admission has no clock): not used by this policy"
                .to_owned(),
        );
    } else {
        lines.push(format!(
            "forceReapply.minPauseAge (CEL in admission has no clock): NOT ENFORCED here, although {}",
            ages.join(", ")
        ));
    }
    lines
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
    /// The YAML: the comment block, then the policy and the binding as two
    /// documents.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let policy = serde_saphyr::to_string(&self.policy).map_err(|e| RenderError {
            what: "the ValidatingAdmissionPolicy",
            reason: e.to_string(),
        })?;
        let binding = serde_saphyr::to_string(&self.binding).map_err(|e| RenderError {
            what: "the binding",
            reason: e.to_string(),
        })?;
        let mut out = String::new();
        out.push_str(&format!(
            "# Exported by `pipelinerollout-webhook export-vap` ({}): the validations of\n\
             # /validate under the policy, as a ValidatingAdmissionPolicy and its binding\n\
             # (see docs/vap.md). The policy's values are written into the expressions.\n\
             # failurePolicy Fail: an expression that fails, or runs past the CEL cost\n\
             # budget, refuses the request (as the webhook's configurations do when it is down).\n\
             #\n\
             # Not covered by this export (the webhook does these):\n",
            env!("CARGO_PKG_VERSION")
        ));
        for line in &self.not_covered {
            out.push_str(&format!("# - {line}\n"));
        }
        out.push_str("#\n# The validations, in order (a denial shows the first that fails):\n");
        for (i, rule) in self.validations.iter().enumerate() {
            out.push_str(&format!("# {i:>2}. {rule}\n"));
        }
        out.push_str("---\n");
        out.push_str(&policy);
        out.push_str("---\n");
        out.push_str(&binding);
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
