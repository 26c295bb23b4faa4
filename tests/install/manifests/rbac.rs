//! RBAC: exactly what the webhook's account needs (with and without the
//! sweeper, leader election and `--manage-certs`), the force-reapply
//! grant, and who it is bound to.

use crate::manifests::NAMESPACE;
use crate::manifests::binary::{HELP, flag_value};
use crate::manifests::certificates::manages_certs;
use crate::manifests::install::{Install, named, sorted};
use crate::manifests::pod::pod;
use crate::manifests::render::{Rendering, WITH_OPT_INS, on_every_rendering};
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;
use std::collections::BTreeSet;

/// RBAC: the webhook's account, the force-reapply grant, the example bindings.
pub(crate) fn rbac_grants_exactly_what_is_needed(r: &Rendering) {
    check_rbac(&r.install, pod(&r.install).spec, r.effective_policy());
}

#[test]
fn the_rbac_grants_exactly_what_the_webhook_and_the_forcers_need() {
    on_every_rendering(rbac_grants_exactly_what_is_needed);
}

/// The rules granted to `(namespace, name)`'s service account by every
/// binding in the install.
fn rules_of_service_account(install: &Install, namespace: &str, name: &str) -> Vec<PolicyRule> {
    let is_subject = |subjects: Option<&Vec<k8s_openapi::api::rbac::v1::Subject>>,
                      default_ns: Option<&str>| {
        subjects.into_iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == name
                && s.namespace.as_deref().or(default_ns) == Some(namespace)
        })
    };
    let cluster_role = |role: &str| -> Vec<PolicyRule> {
        named(&install.cluster_roles, role, "ClusterRole")
            .rules
            .clone()
            .unwrap_or_default()
    };
    let mut rules = Vec::new();
    for binding in &install.cluster_role_bindings {
        if is_subject(binding.subjects.as_ref(), None) {
            assert_eq!(binding.role_ref.kind, "ClusterRole");
            rules.extend(cluster_role(&binding.role_ref.name));
        }
    }
    for binding in &install.role_bindings {
        let ns = binding.metadata.namespace.as_deref();
        if is_subject(binding.subjects.as_ref(), ns) {
            if binding.role_ref.kind == "ClusterRole" {
                rules.extend(cluster_role(&binding.role_ref.name));
            } else {
                let role = install
                    .roles
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(&binding.role_ref.name))
                    .expect("bound Role");
                rules.extend(role.rules.clone().unwrap_or_default());
            }
        }
    }
    rules
}

fn check_rbac(install: &Install, pod: &PodSpec, effective_policy: &str) {
    // The webhook's service account: create SubjectAccessReviews, nothing else.
    let account = pod
        .service_account_name
        .clone()
        .expect("serviceAccountName");
    let sa = named(&install.service_accounts, &account, "ServiceAccount");
    assert_eq!(sa.metadata.namespace.as_deref(), Some(NAMESPACE));
    assert_ne!(
        pod.automount_service_account_token
            .or(sa.automount_service_account_token),
        Some(false),
        "the token is mounted: the webhook creates SubjectAccessReviews with it"
    );
    let all_rules = rules_of_service_account(install, NAMESPACE, &account);
    let (cert_rules, rules): (Vec<PolicyRule>, Vec<PolicyRule>) =
        all_rules.into_iter().partition(is_cert_rule);
    check_cert_rbac(&cert_rules, manages_certs(&pod.containers[0]));
    // Exactly these rules: SubjectAccessReviews, Events, reading a
    // guarded object or a ConfigMap before an Event about it, (for the stale-force
    // sweeper, unless its component drops it) reading and patching them,
    // for the audit, listing and watching them and writing PolicyReports;
    // and (with --leader-elect) the Lease. Nothing else; resourceNames only
    // on the Lease.
    // (apiGroups, resources, verbs, resourceNames), each sorted.
    type Rule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);
    let mut granted: Vec<Rule> = rules
        .iter()
        .map(|rule| {
            assert!(rule.non_resource_urls.is_none());
            (
                sorted(rule.api_groups.as_ref()),
                sorted(rule.resources.as_ref()),
                sorted(Some(&rule.verbs)),
                sorted(rule.resource_names.as_ref()),
            )
        })
        .collect();
    granted.sort();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let rollouts = owned(&[
        "isbservicerollouts",
        "monovertexrollouts",
        "pipelinerollouts",
    ]);
    // The forgery check before Events, on the rollouts and on the kinds
    // that name a controller version (rule 27).
    let rollouts_and_controllers = owned(&[
        "isbservicerollouts",
        "monovertexrollouts",
        "numaflowcontrollerrollouts",
        "numaflowcontrollers",
        "pipelinerollouts",
    ]);
    let mut want = vec![
        (
            owned(&["authorization.k8s.io"]),
            owned(&["subjectaccessreviews"]),
            owned(&["create"]),
            vec![],
        ),
        (
            owned(&["events.k8s.io"]),
            owned(&["events"]),
            owned(&["create"]),
            vec![],
        ),
        (
            owned(&["numaplane.numaproj.io"]),
            rollouts_and_controllers,
            owned(&["get"]),
            vec![],
        ),
        // The children: the forgery check before Events, and every
        // replica's watch of them (rule 29).
        (
            owned(&["numaflow.numaproj.io"]),
            owned(&["interstepbufferservices", "monovertices", "pipelines"]),
            owned(&["get", "list", "watch"]),
            vec![],
        ),
        // What Numaflow makes: the forgery check before rule 29's Events.
        (
            owned(&["numaflow.numaproj.io"]),
            owned(&["vertices"]),
            owned(&["get"]),
            vec![],
        ),
        (
            owned(&["apps"]),
            owned(&["deployments", "statefulsets"]),
            owned(&["get"]),
            vec![],
        ),
        (owned(&[""]), owned(&["services"]), owned(&["get"]), vec![]),
        // The forgery check before rule 24's Events on a namespace-level
        // ConfigMap, the watch of Numaplane's cluster default strategy and
        // of the controller definitions (rule 27); no Secret.
        (
            owned(&[""]),
            owned(&["configmaps"]),
            owned(&["get", "list", "watch"]),
            vec![],
        ),
        (
            owned(&["numaplane.numaproj.io"]),
            rollouts.clone(),
            owned(&["list", "watch"]),
            vec![],
        ),
        // The audit's watch of Numaplane's namespace-level ConfigMaps
        // (selected by label; RBAC cannot narrow to one).
        (
            owned(&[""]),
            owned(&["configmaps"]),
            owned(&["list", "watch"]),
            vec![],
        ),
        (
            owned(&["wgpolicyk8s.io"]),
            owned(&["policyreports"]),
            owned(&["create", "delete", "get", "list", "patch"]),
            owned(&["pipelinerollout-webhook"]),
        ),
    ];
    let container = &pod.containers[0];
    let sweeper_on = container
        .env
        .iter()
        .flatten()
        .any(|e| e.name == "WEBHOOK_RESET_STALE_FORCE" && e.value.as_deref() == Some("true"));
    if sweeper_on {
        want.push((
            owned(&["numaplane.numaproj.io"]),
            owned(&["pipelinerollouts"]),
            owned(&["get", "list", "patch", "watch"]),
            vec![],
        ));
    }
    let leader_elect = flag_value(container, &HELP, "--leader-elect", "WEBHOOK_LEADER_ELECT")
        .is_some_and(|v| v == "true");
    if leader_elect {
        let lease = flag_value(
            container,
            &HELP,
            "--leader-elect-lease-name",
            "WEBHOOK_LEADER_ELECT_LEASE_NAME",
        )
        .expect("the Lease name has a default");
        // Reading, watching and writing the one Lease; create cannot be
        // narrowed to a name.
        want.push((
            owned(&["coordination.k8s.io"]),
            owned(&["leases"]),
            owned(&["get", "list", "patch", "watch"]),
            vec![lease],
        ));
        want.push((
            owned(&["coordination.k8s.io"]),
            owned(&["leases"]),
            owned(&["create"]),
            vec![],
        ));
        // ...and only in the webhook's namespace: from a Role there, never
        // a ClusterRole.
        let touches_leases = |rules: Option<&Vec<PolicyRule>>| {
            rules
                .into_iter()
                .flatten()
                .any(|r| r.resources.iter().flatten().any(|res| res == "leases"))
        };
        assert!(
            !install
                .cluster_roles
                .iter()
                .any(|c| touches_leases(c.rules.as_ref())),
            "no ClusterRole grants leases"
        );
        for role in install
            .roles
            .iter()
            .filter(|r| touches_leases(r.rules.as_ref()))
        {
            assert_eq!(
                role.metadata.namespace.as_deref(),
                Some(NAMESPACE),
                "the Lease's Role lives in the webhook's namespace"
            );
        }
    }
    want.sort();
    assert_eq!(
        granted, want,
        "the webhook's account has exactly the rules it needs (sweeper on: {sweeper_on}, leader election: {leader_elect})"
    );

    // The grant: the custom verb of the policy, on pipelinerollouts only.
    let grant = named(
        &install.cluster_roles,
        "pipelinerollout-force-reapply",
        "ClusterRole",
    );
    let grant_rules = grant.rules.clone().unwrap_or_default();
    let mut granted: Vec<(Vec<String>, Vec<String>, Vec<String>)> = grant_rules
        .iter()
        .map(|rule| {
            (
                sorted(rule.api_groups.as_ref()),
                sorted(rule.resources.as_ref()),
                rule.verbs.clone(),
            )
        })
        .collect();
    granted.sort();
    assert_eq!(
        granted,
        vec![
            (
                owned(&["numaflow.numaproj.io"]),
                owned(&["interstepbufferservices", "monovertices", "pipelines"]),
                owned(&["force-reapply"]),
            ),
            (
                owned(&["numaplane.numaproj.io"]),
                owned(&[
                    "isbservicerollouts",
                    "monovertexrollouts",
                    "pipelinerollouts"
                ]),
                owned(&["force-reapply"]),
            ),
        ],
        "the custom verb on every guarded kind (the SubjectAccessReview asks on the object written)"
    );
    let grant_rule = &grant_rules[0];
    let rendered: Value = serde_saphyr::from_str(effective_policy)
        .unwrap_or_else(|e| panic!("check-policy printed YAML that does not parse: {e}"));
    assert_eq!(
        rendered["forceReapply"]["rbac"]["verb"], grant_rule.verbs[0],
        "the ClusterRole grants the verb the policy asks about"
    );
}

/// A rule of `--manage-certs`: on Secrets or webhook configurations.
fn is_cert_rule(rule: &PolicyRule) -> bool {
    rule.resources.iter().flatten().any(|r| {
        [
            "secrets",
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ]
        .contains(&r.as_str())
    })
}

/// A rule as (apiGroups, resources, resourceNames, verbs), each sorted.
type CertRule = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// `--manage-certs`' rules: its Secret by name (create cannot be
/// narrowed), its two webhook configurations by name; none without it.
fn check_cert_rbac(rules: &[PolicyRule], manages: bool) {
    let mut granted: Vec<CertRule> = rules
        .iter()
        .map(|rule| {
            (
                sorted(rule.api_groups.as_ref()),
                sorted(rule.resources.as_ref()),
                sorted(rule.resource_names.as_ref()),
                sorted(Some(&rule.verbs)),
            )
        })
        .collect();
    granted.sort();
    let owned = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut want = if manages {
        vec![
            (
                owned(&[""]),
                owned(&["secrets"]),
                owned(&["pipelinerollout-webhook-ca", "pipelinerollout-webhook-tls"]),
                owned(&["get", "list", "update", "watch"]),
            ),
            (
                owned(&[""]),
                owned(&["secrets"]),
                vec![],
                owned(&["create"]),
            ),
            (
                owned(&["admissionregistration.k8s.io"]),
                owned(&[
                    "mutatingwebhookconfigurations",
                    "validatingwebhookconfigurations",
                ]),
                owned(&["pipelinerollout-webhook"]),
                owned(&["get", "list", "patch", "watch"]),
            ),
        ]
    } else {
        Vec::new()
    };
    want.sort();
    assert_eq!(
        granted, want,
        "the certificate rules are exactly what --manage-certs needs (manages: {manages})"
    );
}

/// Nothing binds the force-reapply ClusterRole, but the example bindings of
/// the opt-in component (Argo CD's argocd-server, the group sre).
pub(crate) fn force_is_granted_only_by_the_opt_in_bindings(r: &Rendering) {
    let role = "pipelinerollout-force-reapply";
    let cluster_wide = r
        .install
        .cluster_role_bindings
        .iter()
        .filter(|b| b.role_ref.name == role);
    let subjects: BTreeSet<(String, String, Option<String>)> = cluster_wide
        .flat_map(|b| b.subjects.clone().unwrap_or_default())
        .map(|s| (s.kind, s.name, s.namespace))
        .collect();
    let namespaced = r
        .install
        .role_bindings
        .iter()
        .filter(|b| b.role_ref.name == role)
        .count();
    assert_eq!(namespaced, 0, "no RoleBinding of {role} is installed");
    if r.dir != WITH_OPT_INS {
        assert!(
            subjects.is_empty(),
            "manifests/{} grants a force to {subjects:?}",
            r.dir
        );
        return;
    }
    let want = BTreeSet::from([
        (
            "ServiceAccount".to_owned(),
            "argocd-server".to_owned(),
            // kustomize must not move it to the webhook's namespace.
            Some("argocd".to_owned()),
        ),
        ("Group".to_owned(), "sre".to_owned(), None),
    ]);
    assert_eq!(subjects, want, "the example bindings");
}

#[test]
fn a_force_is_granted_to_no_one_but_by_the_opt_in_example_bindings() {
    on_every_rendering(force_is_granted_only_by_the_opt_in_bindings);
}
