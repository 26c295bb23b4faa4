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
//! audit reports one stored before the webhooks.

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
