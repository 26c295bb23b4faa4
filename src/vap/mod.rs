//! `export-vap`: the validation rules of a policy as Kubernetes
//! ValidatingAdmissionPolicies and their bindings, for clusters that prefer
//! in-process admission (CEL) to a webhook. The policy's values are written
//! into the expressions (no params resource), so the output is
//! deterministic and reviewable. See docs/vap.md.
//!
//! Six or seven policies, each with its binding: [`rules`] (PipelineRollouts,
//! with [`variables`]), [`children`] (a Pipeline's own writes), [`deletes`]
//! (an owned child's DELETE, and a PipelineRollout's: its warning, and its
//! gate where the policy asks for one), [`namespace_config`] (Numaplane's
//! namespace-level ConfigMap) and [`child_edits`] (an owned child's CREATE
//! and UPDATE, rule 26) build the CEL, with [`cel`]'s pieces,
//! [`validation`]'s grants and [`timeout`]'s drain-timeout checks; this
//! module wraps it in the Kubernetes objects, and says what the export
//! does not cover.

pub mod cel;
pub mod child_edits;
mod children;
mod deletes;
pub mod mutating;
mod namespace_config;
mod rules;
mod timeout;
mod validation;
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
use crate::policy::format_seconds;
use crate::policy::model::{Mode, Policy};
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

/// The rollout DELETE warning policy's suffix (rule 21's warning).
pub const ROLLOUT_DELETE_WARNINGS_SUFFIX: &str = "-rollout-delete-warnings";
/// The rollout DELETE gate policy's suffix (rule 21 under
/// `gateRolloutDeletes`).
pub const ROLLOUT_DELETES_SUFFIX: &str = "-rollout-deletes";

/// The kinds a rollout owns, whose DELETEs and edits the export judges.
const CHILDREN: [Kind; 3] = [
    Kind::Pipeline,
    Kind::MonoVertex,
    Kind::InterStepBufferService,
];

const CREATE_UPDATE: &[&str] = &["CREATE", "UPDATE"];

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
    /// The policies, each with its binding, in the order [`export`] builds
    /// them.
    pub policies: Vec<Exported>,
    /// What the exported policies do not do that the webhook does, one
    /// line each (the comment block).
    pub not_covered: Vec<String>,
    /// Validations the policy asks for that CEL cannot express (`--strict`
    /// fails on these): a `minPauseAge` above 0.
    pub inexpressible: Vec<String>,
    /// What the export leaves to the webhook by design, whatever the
    /// policy (`--strict` names these and still succeeds).
    pub left_out: Vec<String>,
}

impl Export {
    /// The PipelineRollout policy (the first).
    pub fn rollouts(&self) -> &Exported {
        &self.policies[0]
    }
}

/// The API group and resource of each of `kinds`.
fn resources(kinds: &[Kind]) -> Vec<(&'static str, String)> {
    kinds
        .iter()
        .map(|k| (k.group(), k.resource().to_owned()))
        .collect()
}

/// Exports `policy` under `name`: the PipelineRollout policy named as
/// asked, then the others, named with their suffixes: child Pipelines'
/// writes, owned children's DELETEs, Numaplane's namespace-level
/// ConfigMaps, PipelineRollout DELETEs' warning and, under
/// `gateRolloutDeletes`, their gate, then owned children's edits.
pub fn export(policy: &Policy, name: &str) -> Export {
    let wrap = |suffix: &str, covers, matches, rules| {
        wrap(
            policy.mode,
            &format!("{name}{suffix}"),
            covers,
            matches,
            rules,
        )
    };
    let rollouts = || resources(&[Kind::PipelineRollout]);
    let config_maps = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: CONFIG_LABEL.to_owned(),
            operator: "In".to_owned(),
            values: Some(vec![
                NAMESPACE_CONFIG.to_owned(),
                CONTROLLER_DEFINITIONS.to_owned(),
            ]),
        }]),
        ..LabelSelector::default()
    };
    let mut policies = vec![
        wrap(
            "",
            "PipelineRollouts, CREATE and UPDATE: rules 2 to 8, 16 to 18, and 19 in spec.pipeline.metadata",
            match_resources(rollouts(), CREATE_UPDATE, None),
            rules::rules(policy),
        ),
        wrap(
            "-pipelines",
            "Pipelines, CREATE and UPDATE: their own lifecycle (rules 2 to 4 and 16 to 18, by anyone but numaplane.controllerAccount) and pause-timestamp (rule 19)",
            match_resources(resources(&[Kind::Pipeline]), CREATE_UPDATE, None),
            children::rules(policy),
        ),
        wrap(
            "-child-deletes",
            "Pipelines, MonoVertices and InterStepBufferServices, DELETE: an owned child's deletion needs forceReapply.deleteUndrained (rule 20)",
            match_resources(resources(&CHILDREN), &["DELETE"], None),
            deletes::children(policy),
        ),
        wrap(
            "-namespace-config",
            "Numaplane's namespace-level ConfigMaps and Numaflow controller definitions, CREATE and UPDATE: data.upgradeStrategy (rules 23 and 24), definitions outside numaplane.namespace (rule 27)",
            match_resources(
                vec![("", CONFIGMAPS.to_owned())],
                CREATE_UPDATE,
                Some(config_maps),
            ),
            namespace_config::rules(policy),
        ),
        // Warns whatever the mode: the webhook's warning is no denial.
        warning_only(wrap(
            ROLLOUT_DELETE_WARNINGS_SUFFIX,
            "PipelineRollouts, DELETE: the warning naming the deletion timeout its Pipelines are drained for (rule 21), bound with validationActions [Warn]",
            match_resources(rollouts(), &["DELETE"], None),
            deletes::rollout_warnings(policy),
        )),
    ];
    if let Some(gate) = deletes::rollout_gate(policy) {
        policies.push(wrap(
            ROLLOUT_DELETES_SUFFIX,
            "PipelineRollouts, DELETE: forceReapply.deleteUndrained.gateRolloutDeletes, the deleteUndrained permission (rule 21)",
            match_resources(rollouts(), &["DELETE"], None),
            gate,
        ));
    }
    let status = |k: &Kind| [k.resource().to_owned(), format!("{}/status", k.resource())];
    policies.push(wrap(
        "-child-edits",
        "Pipelines, MonoVertices and InterStepBufferServices, CREATE and UPDATE (and their /status): an owned child's spec but scaling and pausing, status, ownerReferences, finalizers and Numaplane's and Numaflow's keys are changed by anyone but numaplane.controllerAccount and numaflow.controllerAccount only with forceReapply.editChildren (rule 26)",
        match_resources(
            CHILDREN
                .iter()
                .flat_map(|k| status(k).map(|resource| (k.group(), resource)))
                .collect(),
            CREATE_UPDATE,
            None,
        ),
        child_edits::rules(policy),
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
    matches: MatchResources,
    (variables, checks): (Vec<Var>, Vec<Assertion>),
) -> Exported {
    let validations = checks.iter().map(|c| c.rule).collect();
    let spec = ValidatingAdmissionPolicySpec {
        failure_policy: Some("Fail".to_owned()),
        match_constraints: Some(matches),
        variables: Some(k8s_variables(variables)),
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
            metadata: metadata(name),
            spec: Some(spec),
            status: None,
        },
        binding: ValidatingAdmissionPolicyBinding {
            metadata: metadata(name),
            spec: ValidatingAdmissionPolicyBindingSpec {
                policy_name: name.to_owned(),
                validation_actions: actions,
                ..ValidatingAdmissionPolicyBindingSpec::default()
            },
        },
        validations,
    }
}

fn k8s_variables(vars: Vec<Var>) -> Vec<Variable> {
    vars.into_iter()
        .map(|v| Variable {
            name: v.name.to_owned(),
            expression: v.expression,
        })
        .collect()
}

/// What a policy matches, as the webhook configurations match it: the
/// `resources` (API group and resource) and `operations`, never in
/// [`EXCLUDED_NAMESPACES`].
fn match_resources(
    resources: Vec<(&str, String)>,
    operations: &[&str],
    object_selector: Option<LabelSelector>,
) -> MatchResources {
    let resource_rules = resources
        .into_iter()
        .map(|(group, resource)| NamedRuleWithOperations {
            api_groups: Some(vec![group.to_owned()]),
            api_versions: Some(vec![
                if group.is_empty() { "v1" } else { API_VERSION }.to_owned(),
            ]),
            operations: Some(operations.iter().map(|o| (*o).to_owned()).collect()),
            resources: Some(vec![resource]),
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
        object_selector,
        resource_rules: Some(resource_rules),
        ..MatchResources::default()
    }
}

/// The metadata of every exported object: its name, and the labels all
/// carry.
fn metadata(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(
            [(
                "app.kubernetes.io/name".to_owned(),
                "pipelinerollout-webhook".to_owned(),
            )]
            .into(),
        ),
        ..ObjectMeta::default()
    }
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

/// `object` as a YAML document, after its `---`.
fn document(what: &'static str, object: &impl serde::Serialize) -> Result<String, RenderError> {
    match serde_saphyr::to_string(object) {
        Ok(yaml) => Ok(format!("---\n{yaml}")),
        Err(e) => Err(RenderError {
            what,
            reason: e.to_string(),
        }),
    }
}

impl Export {
    /// The YAML: the comment block, then each policy and its binding as
    /// two documents.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let mut out = format!(
            "# Exported by `pipelinerollout-webhook export-vap` ({}): the validations of\n\
             # the webhook's validating webhooks under the policy, as ValidatingAdmissionPolicies\n\
             # and their bindings (see docs/vap.md). The policy's values are written into the\n\
             # expressions. failurePolicy Fail: an expression that fails, or runs past the CEL\n\
             # cost budget, refuses the request (as the webhook's configurations do when it is down).\n\
             #\n\
             # Not covered by this export (the webhook does these):\n",
            env!("CARGO_PKG_VERSION")
        );
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
            out.push_str(&document("a ValidatingAdmissionPolicy", &exported.policy)?);
            out.push_str(&document("a binding", &exported.binding)?);
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

/// The `minPauseAge` settings above 0, by key.
pub fn inexpressible(policy: &Policy) -> Vec<String> {
    let top = (
        "forceReapply".to_owned(),
        policy.force_reapply.min_pause_age_seconds,
    );
    let namespaces = policy.drain_timeout.namespaces.iter().enumerate();
    let per = namespaces.filter_map(|(i, ns)| {
        Some((
            format!("drainTimeout.namespaces[{i}]"),
            ns.min_pause_age_seconds?,
        ))
    });
    std::iter::once(top)
        .chain(per)
        .filter(|(_, age)| *age > 0)
        .map(|(key, age)| format!("{key}.minPauseAge is {}", format_seconds(age)))
        .collect()
}

/// What the export never covers, whatever the policy: the kinds it does
/// not match, and the rules on the kinds it matches that it leaves to the
/// webhook.
pub fn left_out() -> Vec<String> {
    vec![
        "MonoVertexRollouts and ISBServiceRollouts, and the writes of MonoVertices and InterStepBufferServices but an owned one's edits (which the child edit policy judges): no exported policy matches them; keep the webhook's validate-monovertexrollouts, validate-isbservicerollouts and validate-children webhooks for them".to_owned(),
        "rules 13 to 15: the force-promote label, marked-for-deletion and Numaplane's bookkeeping keys (in spec.pipeline.metadata and on the children): they need the rollout's or child's upgrade state and several gates' permissions; keep the webhooks for them".to_owned(),
        "a namespace left to Numaplane's cluster default strategy (rule 24): a DELETE of a namespace-level ConfigMap, its label removed, or no upgradeStrategy in it; that default is in Numaplane's own ConfigMap, which CEL cannot read; keep the webhook's validate-namespace-config for them".to_owned(),
        "what Numaflow makes for a rollout's child (rule 29: its Vertices, the daemon Service and Deployment, the vertices' and the buffer service's workloads): whether their Pipeline, MonoVertex or InterStepBufferService is a rollout's is on that object, which CEL cannot read; keep the webhook's validate-numaflow-vertices and validate-numaflow-workloads for them".to_owned(),
        "the Numaflow controller version a NumaflowController or NumaflowControllerRollout names (rule 27): where Numaplane would take it from is in the controller definitions' ConfigMaps, which CEL cannot read; keep the webhook's validate-numaflow-controllers for them".to_owned(),
        "Go's folding of non-ASCII key characters (the long s as s, the Kelvin sign as k), which Numaplane's encoding/json decoding applies: CEL folds keys with lowerAscii() only; the keys the export folds, a ConfigMap's data, can only be ASCII, so its upgradeStrategy is read as Numaplane reads it, but no exported rule reads another object Numaplane decodes that way".to_owned(),
    ]
}

/// What the comment block lists as not covered: [`left_out`], then what
/// the webhook does besides validating, for `policy`.
pub fn not_covered(policy: &Policy) -> Vec<String> {
    let mut lines = left_out();
    lines.extend([
        "warnings without a violation: the deprecated or ignored deleteGracePeriodSeconds (rules 16 to 18) and the notes on a namespace-level ConfigMap without data or upgradeStrategy (rule 23)".to_owned(),
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
        "warnings: a violation whose inputs are unchanged on UPDATE (rule 8) and allow-data-loss left at \"true\" while nothing pauses (rule 11) and forcePromote kept on (rule 12) and an HPA rider (rule 22) and a rider that grants access (rule 28) are allowed silently".to_owned(),
        "messages: the API server shows the first failing validation's message; the webhook lists every violation".to_owned(),
    ]);
    let ages = inexpressible(policy);
    lines.push(format!(
        "forceReapply.minPauseAge (CEL in admission has no clock): {}",
        if ages.is_empty() {
            "not used by this policy".to_owned()
        } else {
            format!("NOT ENFORCED here, although {}", ages.join(", "))
        }
    ));
    lines
}
