//! The ValidatingAdmissionPolicies of the base: the skipped namespaces
//! and the webhook's own account.

use crate::manifests::NAMESPACE;
use crate::manifests::install::{named, one};
use crate::manifests::pod::pod;
use crate::manifests::render::{Rendering, WITH_OPT_INS, on_every_rendering};
use crate::manifests::webhooks::webhooks;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// The ValidatingAdmissionPolicies of the base: the one for the skipped
/// namespaces names exactly the namespaces the webhooks skip (and, with the
/// opt-in component, admits creates there); the one for the
/// webhook's own account names the Deployment's service account.
pub(crate) fn skipped_namespaces_and_own_account_are_guarded(r: &Rendering) {
    let hooks = webhooks(&r.install);
    let skipped = |selector: Option<&LabelSelector>| -> Vec<String> {
        let expressions = selector
            .and_then(|s| s.match_expressions.clone())
            .unwrap_or_default();
        let expression = one(&expressions, "namespaceSelector expression");
        assert_eq!(expression.key, "kubernetes.io/metadata.name");
        let mut values = expression.values.clone().unwrap_or_default();
        values.sort();
        values
    };
    let validate_skips = skipped(hooks.validate.namespace_selector.as_ref());
    assert_eq!(
        validate_skips,
        skipped(hooks.mutate.namespace_selector.as_ref())
    );
    let policy = |name: &str| {
        let policy = named(&r.install.policies, name, "ValidatingAdmissionPolicy");
        let binding = named(
            &r.install.policy_bindings,
            name,
            "ValidatingAdmissionPolicyBinding",
        );
        let spec = binding.spec.clone();
        assert_eq!(spec.policy_name, name);
        assert_eq!(
            spec.validation_actions,
            vec!["Deny".to_owned()],
            "{name} denies"
        );
        assert!(
            spec.match_resources.is_none(),
            "{name} binds every namespace its policy matches"
        );
        policy.spec.clone().unwrap_or_default()
    };
    let spec = policy("pipelinerollout-webhook-skipped-namespaces");
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let constraints = spec.match_constraints.clone().unwrap_or_default();
    let selector = constraints.namespace_selector.as_ref();
    let expressions = selector
        .and_then(|s| s.match_expressions.clone())
        .unwrap_or_default();
    let expression = one(&expressions, "the policy's namespaceSelector expression");
    assert_eq!(
        (expression.key.as_str(), expression.operator.as_str()),
        ("kubernetes.io/metadata.name", "In")
    );
    let mut policed = expression.values.clone().unwrap_or_default();
    policed.sort();
    assert_eq!(
        policed, validate_skips,
        "the policy guards exactly what the webhooks skip"
    );
    let blanket = spec
        .validations
        .iter()
        .flatten()
        .any(|v| v.expression == "variables.isUpdate || variables.notARolloutOrChildWrite");
    assert_eq!(
        blanket,
        r.dir != WITH_OPT_INS,
        "PipelineRollouts refused there unless opted in"
    );

    let spec = policy("pipelinerollout-webhook-own-account");
    let account = pod(&r.install)
        .spec
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    let username = format!("system:serviceaccount:{NAMESPACE}:{account}");
    let conditions = spec.match_conditions.clone().unwrap_or_default();
    let condition = one(&conditions, "matchCondition");
    assert!(
        condition.expression.contains(&format!("'{username}'")),
        "the own-account policy names {username}: {}",
        condition.expression
    );
}

#[test]
fn the_skipped_namespaces_and_the_webhooks_own_account_are_guarded_in_process() {
    on_every_rendering(skipped_namespaces_and_own_account_are_guarded);
}
