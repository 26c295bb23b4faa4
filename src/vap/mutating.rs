//! `export-vap --mutating`: what `/mutate` writes, as a
//! MutatingAdmissionPolicy (`admissionregistration.k8s.io/v1`, Kubernetes
//! 1.36 or newer) and its binding: the scope's default drain timeouts
//! where a PipelineRollout sets none, and, under `forceReapply.oneShot`,
//! the reset of a forced re-apply whose pause is over. Each mutation is a
//! JSON Patch built by CEL from the same reading of the object as the
//! webhook's (`defaulting::default_timeout`,
//! `stale_force_reset::reset_stale_force`), so that the API server stores
//! the same object with either engine (tests/apiserver/mutating_policy.rs).

use k8s_openapi::api::admissionregistration::v1::{
    JSONPatch, MatchCondition, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
    MutatingAdmissionPolicyBindingSpec, MutatingAdmissionPolicySpec, Mutation,
};

use super::cel::{self, Step};
use super::timeout::{DELETION_SCOPE, PAUSE_SCOPE, scoped};
use super::variables::{ROLLOUT_LIFECYCLE, Var, Vars, pausing, scope_vars};
use super::{
    CREATE_UPDATE, RenderError, document, k8s_variables, match_resources, metadata, resources,
};
use crate::kinds::Kind;
use crate::policy::model::Policy;
use crate::rollout::{ALLOW_DATA_LOSS, ANNOTATIONS, LifecycleKey};

/// The suffix of the MutatingAdmissionPolicy's name.
pub const MUTATING_SUFFIX: &str = "-defaults";

/// What `export-vap --mutating` produced for a policy.
#[derive(Debug, Clone)]
pub struct MutatingExport {
    /// The MutatingAdmissionPolicy.
    pub policy: MutatingAdmissionPolicy,
    /// Its binding.
    pub binding: MutatingAdmissionPolicyBinding,
    /// What each mutation writes, in order (the comment block lists them).
    pub mutations: Vec<&'static str>,
    /// What the webhook's `/mutate` does that the export does not, one
    /// line each, whatever the policy (`--strict` names these and still
    /// succeeds).
    pub left_out: Vec<String>,
    /// What the policy asks of `/mutate` that the export does not write
    /// (`--strict` fails on these).
    pub inexpressible: Vec<String>,
}

/// Exports what `/mutate` writes under `policy`, as the policy
/// `{name}-defaults`.
pub fn export_mutating(policy: &Policy, name: &str) -> MutatingExport {
    let name = format!("{name}{MUTATING_SUFFIX}");
    let mut vars = Vars::request();
    scope_vars(&mut vars, &policy.drain_timeout, PAUSE_SCOPE);
    scope_vars(&mut vars, &policy.deletion_timeout, DELETION_SCOPE);
    let mut mutations = vec![json_patch(defaults(&mut vars, policy))];
    let mut what = vec![
        "drainTimeout.default where spec.pipeline.spec.lifecycle.pauseGracePeriodSeconds is absent or null, and deletionTimeout.default where deletionGracePeriodSeconds and the deprecated deleteGracePeriodSeconds both are (the objects on the way are created; nothing when one of them is not an object)",
    ];
    if policy.force_reapply.one_shot {
        mutations.push(json_patch(one_shot_reset(&mut vars)));
        what.push(
            "forceReapply.oneShot: on an UPDATE that keeps allow-data-loss \"true\" after the stored object's pause is over, allow-data-loss becomes \"false\"",
        );
    }
    let spec = MutatingAdmissionPolicySpec {
        failure_policy: Some("Fail".to_owned()),
        match_constraints: Some(match_resources(
            resources(&[Kind::PipelineRollout]),
            CREATE_UPDATE,
            None,
        )),
        // As the mutating webhook's configuration: Numaplane's controller
        // never waits for it.
        match_conditions: Some(vec![MatchCondition {
            name: "not-numaplane-controller".to_owned(),
            expression: format!(
                "request.userInfo.username != {}",
                cel::string(&policy.numaplane.controller_account)
            ),
        }]),
        mutations: Some(mutations.clone()),
        // Another mutation may remove a default after this one ran; the
        // patches are idempotent.
        reinvocation_policy: Some("IfNeeded".to_owned()),
        variables: Some(k8s_variables(used(vars, &mutations))),
        ..MutatingAdmissionPolicySpec::default()
    };
    let inexpressible = policy.force_promote.one_shot.then(|| {
        "forcePromote.oneShot: /mutate records which progressive upgrade forcePromote was set for (the force-promote-for annotation, rule 25) and resets forcePromote once it is over; this export writes neither".to_owned()
    });
    MutatingExport {
        policy: MutatingAdmissionPolicy {
            metadata: metadata(&name),
            spec: Some(spec),
        },
        binding: MutatingAdmissionPolicyBinding {
            metadata: metadata(&name),
            spec: Some(MutatingAdmissionPolicyBindingSpec {
                policy_name: Some(name),
                ..MutatingAdmissionPolicyBindingSpec::default()
            }),
        },
        mutations: what,
        // What `/mutate` does that no MutatingAdmissionPolicy can.
        left_out: [
            "warnings: a MutatingAdmissionPolicy shows none, so neither \"no default drain timeouts set\" (a value on the way is not an object) nor the one-shot reset's warning",
            "the audit annotations drain-timeout-default, deletion-timeout-default and force-reapply-reset, and the ForceReapplyReset Event",
            "the webhook's decision log and metrics",
            "validation: a MutatingAdmissionPolicy judges nothing; keep the webhook's /validate or the ValidatingAdmissionPolicies of export-vap beside it",
        ]
        .map(str::to_owned)
        .to_vec(),
        inexpressible: inexpressible.into_iter().collect(),
    }
}

/// The variables the mutations read, directly or through a later
/// variable (the shared builders add some these mutations do not need).
fn used(vars: Vars, mutations: &[Mutation]) -> Vec<Var> {
    let mut texts: Vec<String> = mutations
        .iter()
        .filter_map(|m| m.json_patch.as_ref()?.expression.clone())
        .collect();
    let mut kept = Vec::new();
    for var in vars.0.into_iter().rev() {
        let read = format!("variables.{}", var.name);
        if texts.iter().any(|t| {
            t.match_indices(&read).any(|(at, _)| {
                !t[at + read.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
        }) {
            texts.push(var.expression.clone());
            kept.push(var);
        }
    }
    kept.reverse();
    kept
}

fn json_patch(expression: String) -> Mutation {
    Mutation {
        patch_type: "JSONPatch".to_owned(),
        json_patch: Some(JSONPatch {
            expression: Some(expression),
        }),
        apply_configuration: None,
    }
}

/// A JSON Patch `add` of `value` (CEL text) at `pointer`.
fn add(pointer: &str, value: &str) -> String {
    format!(
        "JSONPatch{{op: 'add', path: {}, value: {value}}}",
        cel::string(pointer)
    )
}

/// The defaults' variables and their JSON Patch: where the lifecycle's
/// objects stop (`lBlock`, `lDepth`), which timeouts are set, and the
/// scope's values.
fn defaults(vars: &mut Vars, policy: &Policy) -> String {
    let steps = cel::steps("object", ROLLOUT_LIFECYCLE, Some(3));
    vars.add("lBlock", cel::first_non_map(&steps));
    vars.add("lDepth", depth(&steps));
    let lifecycle = &steps[3].select;
    let set = |key: LifecycleKey| {
        let field = format!("{lifecycle}.{}", key.rollout_field().name());
        format!("(has({field}) && type({field}) != null_type)")
    };
    vars.add(
        "pauseSet",
        format!("variables.lDepth == 4 && {}", set(LifecycleKey::Pause)),
    );
    vars.add(
        "deletionSet",
        format!(
            "variables.lDepth == 4 && ({} || {})",
            set(LifecycleKey::Deletion),
            set(LifecycleKey::DeprecatedDeletion)
        ),
    );
    // The defaults in the request's namespace, in seconds.
    for (name, dt, scope) in [
        ("pauseDefault", &policy.drain_timeout, PAUSE_SCOPE),
        ("deletionDefault", &policy.deletion_timeout, DELETION_SCOPE),
    ] {
        vars.add(
            name,
            scoped(dt, scope, |r| dt.default_seconds(r.default).to_string()),
        );
    }
    let (pause, deletion) = (
        LifecycleKey::Pause.rollout_field().name(),
        LifecycleKey::Deletion.rollout_field().name(),
    );
    // A missing lifecycle (or what holds it) is created with both.
    let mut value =
        format!("{{'{pause}': variables.pauseDefault, '{deletion}': variables.deletionDefault}}");
    let mut created = Vec::new();
    for level in (0..4).rev() {
        let pointer = crate::rollout::TIMEOUT_FIELD.prefix(level + 1).pointer();
        created.push(format!(
            "variables.lDepth == {level} ? [{}] :",
            add(&pointer, &value)
        ));
        value = format!("{{'{}': {value}}}", ROLLOUT_LIFECYCLE[level]);
    }
    created.reverse();
    let lifecycle_pointer = crate::rollout::TIMEOUT_FIELD.parent().pointer();
    let default = |key: &str, value| add(&format!("{lifecycle_pointer}/{key}"), value);
    format!(
        "variables.lBlock != '' ? [] :\n{}\n(variables.pauseSet ? [] : [{}]) +\n(variables.deletionSet ? [] : [{}])",
        created.join("\n"),
        default(pause, "variables.pauseDefault"),
        default(deletion, "variables.deletionDefault"),
    )
}

/// The index of the first level of `steps` that is absent or null (4:
/// none), read only once `lBlock` says every present level is a map.
fn depth(steps: &[Step]) -> String {
    steps
        .iter()
        .enumerate()
        .rev()
        .fold("4".to_owned(), |rest, (i, step)| {
            let s = &step.select;
            format!("(!has({s}) || type({s}) == null_type) ? {i} :\n  {rest}")
        })
}

/// The one-shot reset's variables and its JSON Patch.
fn one_shot_reset(vars: &mut Vars) -> String {
    vars.optional_key("a", "oldA", ANNOTATIONS.keys(), ALLOW_DATA_LOSS);
    // The stored status shows no pause: no pause-and-drain upgrade, and no
    // PipelinePausingOrPaused condition that is True.
    vars.add(
        "oldPauseOver",
        format!("oldObject != null && !({})", pausing("")),
    );
    // Escaped as the webhook's own reset escapes it (`stale_force_reset`).
    let pointer =
        json_patch::jsonptr::PointerBuf::from_tokens(ANNOTATIONS.entry_keys(ALLOW_DATA_LOSS))
            .to_string();
    format!(
        "request.operation == 'UPDATE' && variables.a.orValue('') == 'true' &&\n  \
         variables.oldA.orValue('') == 'true' && variables.oldPauseOver ?\n  \
         [JSONPatch{{op: 'replace', path: {}, value: 'false'}}] : []",
        cel::string(&pointer)
    )
}

impl MutatingExport {
    /// The YAML: the comment block, then the policy and its binding.
    pub fn to_yaml(&self) -> Result<String, RenderError> {
        let name = self.policy.metadata.name.as_deref().unwrap_or_default();
        let mut out = format!(
            "# Exported by `pipelinerollout-webhook export-vap --mutating` ({}): what the\n\
             # webhook's /mutate writes under the policy, as a MutatingAdmissionPolicy and its\n\
             # binding (admissionregistration.k8s.io/v1, Kubernetes 1.36 or newer; see\n\
             # docs/vap.md). The policy's values are written into the expressions.\n\
             #\n\
             # {name}: PipelineRollouts, CREATE and UPDATE. Its mutations, in order:\n",
            env!("CARGO_PKG_VERSION")
        );
        for (i, what) in self.mutations.iter().enumerate() {
            out.push_str(&format!("# {i:>2}. {what}\n"));
        }
        out.push_str("#\n# Not covered by this export (the webhook does these):\n");
        for line in self.left_out.iter().chain(&self.inexpressible) {
            out.push_str(&format!("# - {line}\n"));
        }
        out.push_str(&document("a MutatingAdmissionPolicy", &self.policy)?);
        out.push_str(&document(
            "a MutatingAdmissionPolicyBinding",
            &self.binding,
        )?);
        Ok(out)
    }
}
