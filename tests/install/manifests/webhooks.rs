//! The webhook configurations: the Service they call, their rules, their
//! namespaceSelector and failurePolicy, and the CEL matchConditions of the
//! webhooks for the children and the other rollouts.

use crate::manifests::install::{Install, named, one, sorted};
use crate::manifests::pod::{pod, ports, service_port};
use crate::manifests::render::{Rendering, on_every_rendering};
use crate::manifests::{MUTATE_NAME, NAMESPACE, VALIDATE_NAME, WEBHOOK_CONFIG};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeSet;

/// The webhook configurations and their one webhook each.
pub(crate) struct Webhooks<'a> {
    pub(crate) mutating: &'a MutatingWebhookConfiguration,
    pub(crate) validating: &'a ValidatingWebhookConfiguration,
    pub(crate) mutate: MutatingWebhook,
    pub(crate) validate: ValidatingWebhook,
}

pub(crate) fn webhooks(install: &Install) -> Webhooks<'_> {
    let mutating = named(
        &install.mutating,
        WEBHOOK_CONFIG,
        "MutatingWebhookConfiguration",
    );
    let validating = named(
        &install.validating,
        WEBHOOK_CONFIG,
        "ValidatingWebhookConfiguration",
    );
    let mutate = one(
        &mutating.webhooks.clone().unwrap_or_default(),
        "mutating webhook",
    )
    .clone();
    let validate = validating
        .webhooks
        .iter()
        .flatten()
        .find(|w| w.name == VALIDATE_NAME)
        .unwrap_or_else(|| panic!("no validating webhook {VALIDATE_NAME}"))
        .clone();
    Webhooks {
        mutating,
        validating,
        mutate,
        validate,
    }
}

pub(crate) fn service_name(service: &Service) -> String {
    service.metadata.name.clone().expect("the Service's name")
}

/// Webhook configurations.
pub(crate) fn webhook_configurations_match_the_server(r: &Rendering) {
    let expect = &r.expect;
    let container = pod(&r.install).container;
    let (listen, _) = ports(container);
    let service = one(&r.install.services, "Service");
    let Webhooks {
        mutate, validate, ..
    } = webhooks(&r.install);
    assert_eq!(mutate.name, MUTATE_NAME);
    assert_eq!(validate.name, VALIDATE_NAME);
    assert_eq!(mutate.reinvocation_policy.as_deref(), Some("IfNeeded"));
    let service_name = service_name(service);
    let check_client = |client: &WebhookClientConfig, path: &str| {
        assert!(
            client.url.is_none(),
            "called through the Service, not a URL"
        );
        let svc = client.service.as_ref().expect("clientConfig.service");
        assert_eq!(svc.name, service_name);
        assert_eq!(svc.namespace, NAMESPACE);
        assert_eq!(svc.path.as_deref(), Some(path));
        assert_eq!(
            service_port(service, container, svc.port.unwrap_or(443)),
            listen
        );
    };
    check_client(&mutate.client_config, "/mutate");
    check_client(&validate.client_config, "/validate");
    let check_common = |name: &str,
                        operations: &[&str],
                        rules: Option<&Vec<RuleWithOperations>>,
                        selector: Option<&LabelSelector>,
                        side_effects: &str,
                        versions: &[String],
                        timeout: Option<i32>,
                        match_policy: Option<&str>,
                        failure_policy: Option<&str>| {
        let rules = rules.cloned().unwrap_or_default();
        let rule = one(&rules, "rule");
        assert_eq!(
            sorted(rule.api_groups.as_ref()),
            ["numaplane.numaproj.io"],
            "{name}"
        );
        assert_eq!(sorted(rule.api_versions.as_ref()), ["*"], "{name}");
        assert_eq!(
            sorted(rule.resources.as_ref()),
            ["pipelinerollouts"],
            "{name}"
        );
        assert_eq!(
            sorted(rule.operations.as_ref()),
            operations,
            "{name}: its operations"
        );
        assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{name}");
        assert_eq!(
            side_effects, "NoneOnDryRun",
            "{name}: Events are recorded, never for a dry run"
        );
        assert_eq!(versions, ["v1"], "{name}");
        let timeout = timeout.expect("timeoutSeconds");
        assert!(
            (1..=5).contains(&timeout),
            "{name}: timeoutSeconds {timeout} is at most 5"
        );
        assert_eq!(match_policy, Some("Equivalent"), "{name}");
        assert_eq!(
            failure_policy,
            Some(expect.failure_policy),
            "{name}: failurePolicy"
        );
        let selector = selector.expect("namespaceSelector");
        assert!(selector.match_labels.is_none(), "{name}");
        let expressions = selector.match_expressions.clone().unwrap_or_default();
        let excluded = one(&expressions, "namespaceSelector expression");
        assert_eq!(excluded.key, "kubernetes.io/metadata.name", "{name}");
        assert_eq!(excluded.operator, "NotIn", "{name}");
        assert_eq!(
            sorted(excluded.values.as_ref()),
            ["kube-system", NAMESPACE],
            "{name}: the webhook's own namespace and kube-system are excluded"
        );
    };
    // MutatingWebhook and ValidatingWebhook have these fields in common but
    // no trait over them: the macro reads them from either. /mutate
    // defaults CREATE and UPDATE; /validate also warns of (and may gate) a
    // DELETE (rule 21).
    macro_rules! check_common_of {
        ($name:expr, $operations:expr, $hook:expr) => {
            check_common(
                $name,
                $operations,
                $hook.rules.as_ref(),
                $hook.namespace_selector.as_ref(),
                &$hook.side_effects,
                &$hook.admission_review_versions,
                $hook.timeout_seconds,
                $hook.match_policy.as_deref(),
                $hook.failure_policy.as_deref(),
            )
        };
    }
    check_common_of!(MUTATE_NAME, &["CREATE", "UPDATE"], mutate);
    check_common_of!(VALIDATE_NAME, &["CREATE", "DELETE", "UPDATE"], validate);
    for (name, conditions) in [
        (MUTATE_NAME, mutate.match_conditions.as_ref()),
        (VALIDATE_NAME, validate.match_conditions.as_ref()),
    ] {
        let conditions = conditions.cloned().unwrap_or_default();
        controller_kept_off(name, one(&conditions, "matchCondition"));
    }
}

/// The condition that keeps the built-in policy's Numaplane controller off
/// a webhook, as xtask/src/conditions/mod.rs writes it.
fn controller_kept_off(
    name: &str,
    condition: &k8s_openapi::api::admissionregistration::v1::MatchCondition,
) {
    use xtask::conditions::{Accounts, CONTROLLER_CONDITION, controller_exempt};
    assert_eq!(condition.name, CONTROLLER_CONDITION, "{name}");
    assert_eq!(
        condition.expression,
        controller_exempt(&Accounts::BUILT_IN),
        "{name}: run `cargo xtask generate`"
    );
}

#[test]
fn the_webhook_configurations_call_the_service_for_pipelinerollout_writes() {
    on_every_rendering(webhook_configurations_match_the_server);
}

/// The validating configuration's webhooks for the children and the other
/// rollouts: one rule each for the kinds, CEL matchConditions generated
/// from the judged keys (xtask/src/conditions/mod.rs), failurePolicy Fail in
/// every rendering, otherwise like the PipelineRollout webhook.
pub(crate) fn force_key_webhooks_send_only_force_writes(r: &Rendering) {
    use pipelinerollout_webhook::kinds::Kind;
    use xtask::conditions;
    let Webhooks {
        validating,
        validate,
        ..
    } = webhooks(&r.install);
    let all = validating.webhooks.clone().unwrap_or_default();
    let names: Vec<&str> = all.iter().map(|w| w.name.as_str()).collect();
    let expected = [
        (
            "validate-children.pipelinerollout-webhook.numaplane.numaproj.io",
            vec![
                Kind::Pipeline,
                Kind::MonoVertex,
                Kind::InterStepBufferService,
            ],
        ),
        (
            "validate-monovertexrollouts.pipelinerollout-webhook.numaplane.numaproj.io",
            vec![Kind::MonoVertexRollout],
        ),
        (
            "validate-isbservicerollouts.pipelinerollout-webhook.numaplane.numaproj.io",
            vec![Kind::IsbServiceRollout],
        ),
    ];
    let mut want_names = vec![VALIDATE_NAME];
    want_names.extend(expected.iter().map(|(n, _)| *n));
    want_names.extend(MADE_NAMES);
    want_names.push(CONTROLLERS_NAME);
    want_names.push(NAMESPACE_CONFIG_NAME);
    namespace_config_webhook_sees_only_labelled_configmaps(&all, &validate);
    made_webhooks_send_what_numaflow_makes(&all, &validate);
    assert_eq!(names, want_names, "the validating webhooks, in order");
    assert_eq!(
        names.len(),
        pipelinerollout_webhook::pki::VALIDATING_WEBHOOKS,
        "gen-certs writes a caBundle for each"
    );
    for (name, kinds) in expected {
        let hook = all.iter().find(|w| w.name == name).expect("listed");
        assert_eq!(
            hook.client_config.service, validate.client_config.service,
            "{name}"
        );
        assert_eq!(
            hook.failure_policy.as_deref(),
            Some("Fail"),
            "{name}: always Fail"
        );
        assert_eq!(hook.side_effects, "NoneOnDryRun", "{name}");
        assert_eq!(hook.admission_review_versions, ["v1"], "{name}");
        assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"), "{name}");
        assert_eq!(hook.timeout_seconds, validate.timeout_seconds, "{name}");
        assert_eq!(
            hook.namespace_selector, validate.namespace_selector,
            "{name}"
        );
        let rules = hook.rules.clone().unwrap_or_default();
        let got: BTreeSet<(String, String)> = rules
            .iter()
            .flat_map(|rule| {
                // The children's DELETE is rule 20's.
                let operations: &[&str] = if kinds.iter().all(|k| k.is_child()) {
                    &["CREATE", "DELETE", "UPDATE"]
                } else {
                    &["CREATE", "UPDATE"]
                };
                assert_eq!(sorted(rule.operations.as_ref()), operations, "{name}");
                assert_eq!(rule.scope.as_deref(), Some("Namespaced"), "{name}");
                assert_eq!(sorted(rule.api_versions.as_ref()), ["*"], "{name}");
                let groups = sorted(rule.api_groups.as_ref());
                let resources = sorted(rule.resources.as_ref());
                groups
                    .into_iter()
                    .flat_map(move |g| resources.clone().into_iter().map(move |r| (g.clone(), r)))
            })
            .collect();
        // A child's `/status` is judged too (rule 26); `/scale` never is.
        let want: BTreeSet<(String, String)> = kinds
            .iter()
            .flat_map(|k| {
                let status = k.is_child().then(|| format!("{}/status", k.resource()));
                std::iter::once(k.resource().to_owned())
                    .chain(status)
                    .map(|r| (k.group().to_owned(), r))
            })
            .collect();
        assert_eq!(got, want, "{name}: the kinds it is for");
        let conditions = hook.match_conditions.clone().unwrap_or_default();
        // The children's own expression keeps Numaplane's controller off
        // (but for pause-timestamp, rule 19); a rollout's has a condition
        // of its own first.
        let condition = if kinds.iter().all(|k| k.is_child()) {
            one(&conditions, "matchCondition")
        } else {
            let [controller, condition] = conditions.as_slice() else {
                panic!("{name}: two matchConditions, not {conditions:?}");
            };
            controller_kept_off(name, controller);
            condition
        };
        for kind in &kinds {
            assert_eq!(condition.name, conditions::name(*kind), "{name}");
            assert_eq!(
                Some(condition.expression.trim()),
                conditions::expression(*kind).as_deref(),
                "{name}: run `cargo xtask generate`, which writes match_conditions::expression({kind:?}) into manifests/base/webhooks.yaml"
            );
        }
    }
}

/// The webhook of the Numaflow controller versions (rule 27).
const CONTROLLERS_NAME: &str =
    "validate-numaflow-controllers.pipelinerollout-webhook.numaplane.numaproj.io";

/// The webhooks of what Numaflow makes for a child (rule 29).
const MADE_NAMES: [&str; 2] = [
    "validate-numaflow-vertices.pipelinerollout-webhook.numaplane.numaproj.io",
    "validate-numaflow-workloads.pipelinerollout-webhook.numaplane.numaproj.io",
];

/// The webhooks of what Numaflow makes: every Vertex (and its `/status`),
/// and the Deployments, StatefulSets and Services labelled as Numaflow's;
/// CREATE and UPDATE only; Numaflow's controller kept off; failurePolicy
/// Fail and the PipelineRollout webhook's service and namespaceSelector.
fn made_webhooks_send_what_numaflow_makes(
    all: &[k8s_openapi::api::admissionregistration::v1::ValidatingWebhook],
    validate: &k8s_openapi::api::admissionregistration::v1::ValidatingWebhook,
) {
    use pipelinerollout_webhook::kinds::{
        Made, NUMAFLOW_CONTROLLER, NUMAFLOW_PART_OF, PART_OF_LABEL,
    };
    for (name, kinds) in MADE_NAMES.into_iter().zip([
        vec![Made::Vertex],
        vec![Made::Deployment, Made::StatefulSet, Made::Service],
    ]) {
        let hook = all.iter().find(|w| w.name == name).expect("listed");
        assert_eq!(hook.client_config.service, validate.client_config.service);
        assert_eq!(hook.failure_policy.as_deref(), Some("Fail"), "{name}");
        assert_eq!(
            hook.namespace_selector, validate.namespace_selector,
            "{name}"
        );
        assert_eq!(hook.side_effects, "NoneOnDryRun", "{name}");
        let got: BTreeSet<(String, String)> = hook
            .rules
            .iter()
            .flatten()
            .map(|rule| {
                assert_eq!(
                    sorted(rule.operations.as_ref()),
                    ["CREATE", "UPDATE"],
                    "{name}"
                );
                (
                    one(&sorted(rule.api_groups.as_ref()), "group").clone(),
                    one(&sorted(rule.resources.as_ref()), "resource").clone(),
                )
            })
            .collect();
        let mut want: BTreeSet<(String, String)> = kinds
            .iter()
            .map(|k| (k.group().to_owned(), k.resource().to_owned()))
            .collect();
        if kinds == [Made::Vertex] {
            want.insert((
                Made::Vertex.group().to_owned(),
                "vertices/status".to_owned(),
            ));
            assert!(
                hook.object_selector.is_none(),
                "{name}: every Vertex is sent"
            );
        } else {
            let selector = hook.object_selector.as_ref().expect("an objectSelector");
            let expression = one(
                selector.match_expressions.as_ref().expect("expressions"),
                "expression",
            );
            assert_eq!(expression.key, PART_OF_LABEL, "{name}");
            assert_eq!(expression.operator, "In", "{name}");
            assert_eq!(
                expression.values.as_deref(),
                Some(&[NUMAFLOW_PART_OF.to_owned()][..]),
                "{name}"
            );
        }
        assert_eq!(got, want, "{name}: the kinds it is for");
        let conditions = hook.match_conditions.clone().unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c.expression
                    == format!("request.userInfo.username != '{NUMAFLOW_CONTROLLER}'")),
            "{name}: Numaflow's controller is kept off: {conditions:?}"
        );
    }
}

/// The namespace-level ConfigMap's webhook (rules 23 and 24).
const NAMESPACE_CONFIG_NAME: &str =
    "validate-namespace-config.pipelinerollout-webhook.numaplane.numaproj.io";

/// The namespace-level ConfigMap's webhook: core `configmaps`, CREATE and
/// UPDATE, an objectSelector on Numaplane's label and value (so no other
/// ConfigMap reaches it), failurePolicy Fail, sideEffects NoneOnDryRun, the
/// PipelineRollout webhook's service and namespaceSelector.
fn namespace_config_webhook_sees_only_labelled_configmaps(
    all: &[k8s_openapi::api::admissionregistration::v1::ValidatingWebhook],
    validate: &k8s_openapi::api::admissionregistration::v1::ValidatingWebhook,
) {
    use pipelinerollout_webhook::kinds::CONFIGMAPS;
    use pipelinerollout_webhook::namespace_config::{
        CONFIG_LABEL, CONTROLLER_DEFINITIONS, NAMESPACE_CONFIG,
    };
    let name = NAMESPACE_CONFIG_NAME;
    let hook = all.iter().find(|w| w.name == name).expect("listed");
    assert_eq!(hook.client_config.service, validate.client_config.service);
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"), "{name}");
    assert_eq!(
        hook.side_effects, "NoneOnDryRun",
        "{name}: rule 24's Events, none for a dry run"
    );
    let conditions = hook.match_conditions.clone().unwrap_or_default();
    assert_eq!(
        conditions.len(),
        2,
        "{name}: Numaplane and the deleters kept off"
    );
    controller_kept_off(name, &conditions[0]);
    assert_eq!(conditions[1].name, "not-system-deleters", "{name}");
    assert_eq!(
        conditions[1].expression,
        "request.operation != 'DELETE' || !(request.userInfo.username in ['system:serviceaccount:kube-system:generic-garbage-collector', 'system:serviceaccount:kube-system:namespace-controller'])",
        "{name}: a namespace being deleted never waits for the webhook"
    );
    assert_eq!(
        hook.namespace_selector, validate.namespace_selector,
        "{name}"
    );
    assert_eq!(hook.timeout_seconds, validate.timeout_seconds, "{name}");
    let rules = hook.rules.clone().unwrap_or_default();
    let rule = one(&rules, "rule");
    assert_eq!(sorted(rule.api_groups.as_ref()), [""], "{name}");
    assert_eq!(sorted(rule.resources.as_ref()), [CONFIGMAPS], "{name}");
    assert_eq!(
        sorted(rule.operations.as_ref()),
        ["CREATE", "DELETE", "UPDATE"],
        "{name}: a DELETE leaves the namespace to Numaplane's default"
    );
    let selector = hook.object_selector.clone().expect("an objectSelector");
    let expressions = selector.match_expressions.unwrap_or_default();
    let expression = one(&expressions, "matchExpression");
    assert_eq!(
        (expression.key.as_str(), expression.operator.as_str()),
        (CONFIG_LABEL, "In"),
        "{name}"
    );
    assert_eq!(
        expression.values.as_deref(),
        Some(
            &[
                NAMESPACE_CONFIG.to_owned(),
                CONTROLLER_DEFINITIONS.to_owned()
            ][..]
        ),
        "{name}: the namespace-level ConfigMaps and the controller definitions"
    );
}

#[test]
fn the_children_and_other_rollouts_are_sent_only_writes_that_touch_a_force() {
    on_every_rendering(force_key_webhooks_send_only_force_writes);
}
