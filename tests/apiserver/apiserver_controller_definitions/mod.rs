//! Rule 27 through the real kube-apiserver, on the shared installation of
//! `tests/apiserver/namespace_strategy.rs`: the review's reproduction. A
//! namespace editor (alice, who may write ConfigMaps in her namespace)
//! writes Numaflow controller definitions there, which Numaplane would
//! prefer to its own and apply with its own account (a definition whose
//! `fullSpec` binds her to `cluster-admin`). Without rule 27 every write
//! below is stored; with it, creating one, adding the label to a
//! ConfigMap and changing one are refused to her; `system:masters`
//! (forceReapply's groups, which controllerDefinitions takes) may, with a
//! `ControllerDefinitionsAllowed` Event; Numaplane's namespace needs no
//! permission; removing the label needs none; the namespaces the webhooks
//! skip refuse them to everyone (the skipped-namespaces policy); and the
//! audit reports one stored before the webhooks. A NumaflowController or
//! NumaflowControllerRollout naming the version that namespace defined
//! before the webhook (Numaplane would install it from there) is refused
//! to her too.

use envtest::{Cluster, User};
use serde_json::{Value, json};

use super::{LABEL, report_results, shared, team};
use crate::apiserver_support;

const DEFINITIONS: &str = "numaflow-controller-definitions";
const WEBHOOK: &str = "validate-namespace-config.pipelinerollout-webhook.numaplane.numaproj.io";

/// The namespace whose definitions predate the webhook.
pub(super) const PREDATING_DEFINITIONS: &str = "e2e-definitions-audit";

/// A ConfigMap holding one definition, version 9.9.9, whose `fullSpec`
/// binds `user` to `cluster-admin` in the namespace (the review's
/// reproduction); labelled as definitions when `labelled`.
pub(super) fn definitions(ns: &str, name: &str, labelled: bool, user: &str) -> Value {
    let labels = if labelled {
        json!({LABEL: DEFINITIONS})
    } else {
        json!({"app": "demo"})
    };
    let full_spec = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: escalate\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: User\n  name: {user}\n"
    );
    let definitions =
        json!({"controllerDefinitions": [{"version": "9.9.9", "fullSpec": full_spec}]});
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {"controller_definitions.yaml": serde_saphyr::to_string(&definitions).expect("YAML")},
    })
}

#[track_caller]
fn assert_refused(out: &envtest::Output, by: &str, says: &str) {
    assert!(!out.success, "expected a refusal: {out}");
    assert!(out.stderr.contains(by), "refused, but not by {by}: {out}");
    assert!(
        out.stderr.contains(says),
        "the refusal does not say {says:?}: {out}"
    );
}

/// The webhook's Events in `ns` as (ConfigMap, reason, note); waits up to
/// 10 s until `reason` is among them.
fn events(cluster: &Cluster, ns: &str, reason: &str) -> Vec<(String, String, String)> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found: Vec<(String, String, String)> = apiserver_support::events_in(cluster, ns)
            .iter()
            .filter(|e| e["reportingController"] == "pipelinerollout-webhook")
            .map(|e| {
                let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                (
                    text(&e["regarding"]["name"]),
                    text(&e["reason"]),
                    text(&e["note"]),
                )
            })
            .collect();
        if found.iter().any(|(_, r, _)| r == reason) || std::time::Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

#[test]
fn a_namespace_editor_may_not_write_controller_definitions() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-definitions";
    team(cluster, ns);
    let alice = cluster.kubectl(User::Alice);
    let admin = cluster.kubectl(User::Admin);
    let says = "may not write Numaflow controller definitions (a ConfigMap labelled numaplane.numaproj.io/config: numaflow-controller-definitions) in namespace \"e2e-definitions\": Numaplane prefers them to its own and applies a definition's fullSpec with its own account, which can grant any permission";

    // Creating one: refused, and nothing stored.
    let out = alice.create(&definitions(ns, "defs", true, "alice"), &[]);
    assert_refused(&out, WEBHOOK, says);
    assert!(
        out.stderr
            .contains("keep the definitions in \"numaplane-system\""),
        "{out}"
    );
    assert!(admin.get("configmap", ns, "defs").is_none());

    // Adding the label to a ConfigMap of her own: refused.
    alice
        .create(&definitions(ns, "plain", false, "alice"), &[])
        .expect_success("an unlabelled ConfigMap is hers to write");
    let label = json!({"metadata": {"labels": {LABEL: DEFINITIONS}}});
    let out = alice.merge_patch("configmap", ns, "plain", &label, &[]);
    assert_refused(&out, WEBHOOK, says);

    // system:masters may, and the Event says so.
    admin
        .create(&definitions(ns, "platform", true, "platform-admin"), &[])
        .expect_success("system:masters writes definitions");
    let found = events(cluster, ns, "ControllerDefinitionsAllowed");
    assert!(
        found.iter().any(|(name, reason, note)| name == "platform"
            && reason == "ControllerDefinitionsAllowed"
            && note.contains("in namespace \"e2e-definitions\", which Numaplane prefers to those of \"numaplane-system\"")),
        "{found:#?}"
    );

    // Changing one: refused, a ControllerDefinitionsDenied Event.
    let change = json!({"data": {"controller_definitions.yaml": "controllerDefinitions: []\n"}});
    let out = alice.merge_patch("configmap", ns, "platform", &change, &[]);
    assert_refused(&out, WEBHOOK, says);
    let found = events(cluster, ns, "ControllerDefinitionsDenied");
    assert!(
        found
            .iter()
            .any(|(name, reason, _)| name == "platform" && reason == "ControllerDefinitionsDenied"),
        "{found:#?}"
    );

    // Removing the label needs nothing: Numaplane then uses its own.
    let unlabel = json!({"metadata": {"labels": {LABEL: null}}});
    alice
        .merge_patch("configmap", ns, "platform", &unlabel, &[])
        .expect_success("removing the label");

    // Numaplane's namespace is Numaplane's.
    admin
        .run(&["create", "namespace", "numaplane-system"])
        .expect_success("Numaplane's namespace");
    admin
        .create(
            &definitions("numaplane-system", "defs", true, "numaplane"),
            &[],
        )
        .expect_success("definitions in Numaplane's namespace");

    // The namespaces the webhooks skip refuse them to everyone.
    let out = admin.create(&definitions("kube-system", "defs", true, "admin"), &[]);
    assert_refused(
        &out,
        "pipelinerollout-webhook-skipped-namespaces",
        "Numaflow controller definitions (a ConfigMap labelled numaplane.numaproj.io/config: numaflow-controller-definitions) may not be written in namespace \"kube-system\"",
    );
}

#[test]
fn the_audit_reports_stored_definitions_outside_numaplanes_namespace() {
    let Some((env, _turn)) = shared() else { return };
    let results = report_results(env, PREDATING_DEFINITIONS);
    let found = results
        .iter()
        .find(|r| r["rule"] == "controller-definitions")
        .unwrap_or_else(|| panic!("no controller-definitions result: {results:#?}"));
    assert_eq!(found["result"], "warn", "{found:#}");
    assert_eq!(found["resources"][0]["kind"], "ConfigMap");
    assert_eq!(found["resources"][0]["name"], "defs");
    assert!(
        found["message"].as_str().is_some_and(|m| m.contains(
            "Numaflow controller definitions in namespace \"e2e-definitions-audit\": Numaplane prefers them to those of \"numaplane-system\""
        )),
        "{found:#}"
    );
}

/// A NumaflowController (or, with `rollout`, a NumaflowControllerRollout)
/// named `name` of Numaflow controller `version`.
fn controller(ns: &str, name: &str, version: &str, rollout: bool) -> Value {
    let (kind, spec) = if rollout {
        (
            "NumaflowControllerRollout",
            json!({"controller": {"version": version}}),
        )
    } else {
        ("NumaflowController", json!({"version": version}))
    };
    json!({"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

#[test]
fn a_controller_version_defined_in_a_user_namespace_needs_the_permission() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let webhook = "validate-numaflow-controllers.pipelinerollout-webhook.numaplane.numaproj.io";
    let admin = cluster.kubectl(User::Admin);
    let ns = "e2e-controller-versions";
    team(cluster, ns);
    let verbs = ["get", "list", "create", "update", "patch"];
    for namespace in [ns, PREDATING_DEFINITIONS] {
        cluster
            .create_all(vec![
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                    "metadata": {"name": "controllers", "namespace": namespace},
                    "rules": [{"apiGroups": ["numaplane.numaproj.io"],
                        "resources": ["numaflowcontrollers", "numaflowcontrollerrollouts"], "verbs": verbs}]}),
                envtest::binding(Some(namespace), "controllers", "Role", "controllers", &[User::Alice]),
            ])
            .expect("alice may write NumaflowControllers");
        cluster
            .wait_for_access(
                User::Alice,
                "create",
                "numaflowcontrollers.numaplane.numaproj.io",
                namespace,
                true,
            )
            .expect("access");
    }
    let alice = cluster.kubectl(User::Alice);

    // The namespace's own definition of 9.9.9 (made before the webhook),
    // which Numaplane would prefer: refused, by either kind.
    for rollout in [false, true] {
        let out = alice.create(
            &controller(
                PREDATING_DEFINITIONS,
                "numaflow-controller",
                "9.9.9",
                rollout,
            ),
            &[],
        );
        assert_refused(
            &out,
            webhook,
            "may not name Numaflow controller version \"9.9.9\"",
        );
        assert!(
            out.stderr.contains("Numaplane would install it from namespace \"e2e-definitions-audit\"'s own definition"),
            "{out}"
        );
    }
    // Another namespace naming it: only a user namespace defines it.
    let out = alice.create(&controller(ns, "numaflow-controller", "9.9.9", false), &[]);
    assert_refused(
        &out,
        webhook,
        "only namespace \"e2e-definitions-audit\" defines it, not \"numaplane-system\"",
    );
    // A version no user namespace defines is hers to name; changing to
    // 9.9.9 later is judged as a CREATE is.
    alice
        .create(&controller(ns, "numaflow-controller", "1.8.1", false), &[])
        .expect_success("a version no user namespace defines");
    let change = json!({"spec": {"version": "9.9.9"}});
    let out = alice.merge_patch(
        "numaflowcontroller",
        ns,
        "numaflow-controller",
        &change,
        &[],
    );
    assert_refused(
        &out,
        webhook,
        "may not name Numaflow controller version \"9.9.9\"",
    );
    // A holder of controllerDefinitions (system:masters) may, with an Event.
    admin
        .merge_patch(
            "numaflowcontroller",
            ns,
            "numaflow-controller",
            &change,
            &[],
        )
        .expect_success("system:masters names it");
    let found = events(cluster, ns, "ControllerDefinitionsAllowed");
    assert!(
        found
            .iter()
            .any(|(name, reason, note)| name == "numaflow-controller"
                && reason == "ControllerDefinitionsAllowed"
                && note
                    .contains("Numaflow controller version \"9.9.9\" on this NumaflowController")),
        "{found:#?}"
    );
    // The version kept: her label needs nothing.
    alice
        .merge_patch(
            "numaflowcontroller",
            ns,
            "numaflow-controller",
            &json!({"metadata": {"labels": {"team": "a"}}}),
            &[],
        )
        .expect_success("the version kept");
}
