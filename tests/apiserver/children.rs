//! End-to-end: Numaplane's children (Pipeline, MonoVertex,
//! InterStepBufferService, from Numaflow's real CRDs) and the other
//! rollouts (MonoVertexRollout, ISBServiceRollout, from Numaplane's),
//! through a real kube-apiserver with the project's manifests and policy.
//!
//! Argo CD's child actions are sent as its API server sends them: a JSON
//! merge patch by `system:serviceaccount:argocd:argocd-server`
//! (force-promote sets the label `"true"`, delete sets
//! `marked-for-deletion: "true"`); the same edits are made with kubectl as
//! alice (no permission) and carol (group sre, which the example bindings
//! grant the custom verb). The Numaplane controller's ordinary writes of
//! children are admitted and never sent to the webhook (its request counter
//! does not move).
//!
//! The scenarios share one cluster and take turns (`TURN`): the request
//! counter test needs no other request in flight.

use crate::apiserver_children_support;
use crate::apiserver_support;

use std::sync::MutexGuard;

use apiserver_children_support::{
    CHILDREN, CHILDREN_WEBHOOK, FORCE_PROMOTE, MARKED_FOR_DELETION, UPGRADE_STATE,
    assert_refused_by, before_webhooks, child, children_calls, delete_action, events_about,
    force_promote_action, label_of, rollout_of, team, validate_requests,
};
use apiserver_support::VALIDATE;
use envtest::{Installation, User};
use serde_json::{Value, json};

/// The shared installation, and this scenario's turn on it.
fn shared() -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    static SHARED: apiserver_children_support::Shared = apiserver_children_support::Shared::new();
    apiserver_children_support::shared(&SHARED, before_webhooks)
}

#[test]
fn argocd_force_promote_action_on_each_upgrading_child() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-children-promote";
    team(cluster, ns);
    for (resource, kind) in CHILDREN {
        let name = format!("{}-1", kind.to_lowercase());
        child(cluster, ns, kind, &name, Some("in-progress"));
        force_promote_action(cluster, ns, resource, &name)
            .expect_success("argocd-server's force-promote action on an in-progress child");
        assert_eq!(
            label_of(cluster, resource, ns, &name, FORCE_PROMOTE).as_deref(),
            Some("true")
        );
        let events = events_about(cluster, ns, kind, &name, "ForcePromoteAllowed");
        assert!(
            events.iter().any(|(r, n)| r == "ForcePromoteAllowed"
                && n.contains("system:serviceaccount:argocd:argocd-server")
                && n.contains(&format!("{kind} of "))
                && n.contains("\"demo\"")),
            "an Event about the {kind}, naming its parent: {events:#?}"
        );
        // A trial child too.
        let trial = format!("{}-2", kind.to_lowercase());
        child(cluster, ns, kind, &trial, Some("trial"));
        force_promote_action(cluster, ns, resource, &trial).expect_success("on a trial child");
    }
}

#[test]
fn kubectl_force_promote_needs_the_permission() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-children-kubectl";
    team(cluster, ns);
    for (resource, kind) in CHILDREN {
        let name = format!("{}-1", kind.to_lowercase());
        child(cluster, ns, kind, &name, Some("in-progress"));
        let label = format!("{FORCE_PROMOTE}=true");
        let out = cluster
            .kubectl(User::Alice)
            .run(&["label", resource, &name, "-n", ns, &label]);
        assert_refused_by(
            &out,
            CHILDREN_WEBHOOK,
            "user \"alice\" may not set metadata.labels[\"numaplane.numaproj.io/force-promote\"]",
        );
        assert!(
            out.stderr
                .contains("RBAC does not allow verb \"force-reapply\""),
            "{out}"
        );
        assert_eq!(label_of(cluster, resource, ns, &name, FORCE_PROMOTE), None);
        // Carol's group sre is granted the verb by the example bindings.
        cluster
            .kubectl(User::Carol)
            .run(&["label", resource, &name, "-n", ns, &label])
            .expect_success("carol, whom RBAC grants the custom verb");
        assert_eq!(
            label_of(cluster, resource, ns, &name, FORCE_PROMOTE).as_deref(),
            Some("true")
        );
        // Removing it needs nothing; any other value is refused.
        let out = cluster.kubectl(User::Alice).run(&[
            "label",
            resource,
            &name,
            "-n",
            ns,
            &format!("{FORCE_PROMOTE}-"),
        ]);
        out.expect_success("alice removes the label");
        let out = cluster.kubectl(User::Carol).run(&[
            "label",
            resource,
            &name,
            "-n",
            ns,
            &format!("{FORCE_PROMOTE}=false"),
        ]);
        assert_refused_by(
            &out,
            CHILDREN_WEBHOOK,
            "Numaplane acts on the label's presence",
        );
    }
}

#[test]
fn a_force_is_refused_where_it_cannot_act() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-children-state";
    team(cluster, ns);
    child(cluster, ns, "Pipeline", "promoted", Some("promoted"));
    let out = force_promote_action(cluster, ns, "pipelines.numaflow.numaproj.io", "promoted");
    assert_refused_by(&out, CHILDREN_WEBHOOK, "is \"promoted\"");
    assert!(out.stderr.contains("in-progress or trial"), "{out}");
    let out = delete_action(cluster, ns, "promoted");
    assert_refused_by(&out, CHILDREN_WEBHOOK, "recyclable or recyclable-expired");
    child(cluster, ns, "MonoVertex", "unlabelled", None);
    let out = force_promote_action(
        cluster,
        ns,
        "monovertices.numaflow.numaproj.io",
        "unlabelled",
    );
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "has no numaplane.numaproj.io/upgrade-state label",
    );
}

#[test]
fn argocd_delete_action_on_a_recyclable_pipeline() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-children-delete";
    team(cluster, ns);
    for state in ["recyclable", "recyclable-expired"] {
        child(cluster, ns, "Pipeline", state, Some(state));
        delete_action(cluster, ns, state).expect_success("argocd-server's delete action");
        let events = events_about(cluster, ns, "Pipeline", state, "DeleteUndrainedAllowed");
        assert!(
            events
                .iter()
                .any(|(r, n)| r == "DeleteUndrainedAllowed" && n.contains("without draining")),
            "{events:#?}"
        );
    }
    child(cluster, ns, "Pipeline", "by-alice", Some("recyclable"));
    let annotation = format!("{MARKED_FOR_DELETION}=true");
    let out = cluster.kubectl(User::Alice).run(&[
        "annotate",
        "pipelines.numaflow.numaproj.io",
        "by-alice",
        "-n",
        ns,
        &annotation,
    ]);
    assert_refused_by(&out, CHILDREN_WEBHOOK, "without draining");
    let events = events_about(cluster, ns, "Pipeline", "by-alice", "DeleteUndrainedDenied");
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "DeleteUndrainedDenied" && n.contains("alice")),
        "{events:#?}"
    );
    cluster
        .kubectl(User::Carol)
        .run(&[
            "annotate",
            "pipelines.numaflow.numaproj.io",
            "by-alice",
            "-n",
            ns,
            &annotation,
        ])
        .expect_success("carol may");
}

#[test]
fn the_controllers_ordinary_writes_are_admitted_and_never_sent() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-children-controller";
    team(cluster, ns);
    for (_, kind) in CHILDREN {
        child(
            cluster,
            ns,
            kind,
            &format!("{}-1", kind.to_lowercase()),
            Some("promoted"),
        );
    }
    let numaplane = cluster.kubectl(User::NumaplaneController);
    let (webhook_before, apiserver_before) = (validate_requests(env), children_calls(env));
    for (resource, kind) in CHILDREN {
        let name = format!("{}-1", kind.to_lowercase());
        numaplane
            .merge_patch(
                resource,
                ns,
                &name,
                &json!({"metadata": {"labels": {"app": "v2"},
                "annotations": {"numaflow.numaproj.io/instance": "0"}}}),
                &[],
            )
            .expect_success("an ordinary controller write");
        numaplane
            .merge_patch(
                resource,
                ns,
                &name,
                &json!({"spec": {"lifecycle": {"desiredPhase": "Running"}}}),
                &[],
            )
            .expect_success("a spec write");
        // Alice's ordinary edits are not sent either.
        cluster
            .kubectl(User::Alice)
            .run(&["label", resource, &name, "-n", ns, "team=a"])
            .expect_success("alice's ordinary label");
    }
    assert_eq!(
        validate_requests(env),
        webhook_before,
        "the webhook answered none of them"
    );
    assert_eq!(
        children_calls(env),
        apiserver_before,
        "the API server called the children's webhook for none of them"
    );
    // A bookkeeping change by the controller is admitted and never sent:
    // an unreachable webhook cannot stall Numaplane's own bookkeeping.
    numaplane
        .merge_patch(
            "pipelines.numaflow.numaproj.io",
            ns,
            "pipeline-1",
            &json!({"metadata": {"labels": {UPGRADE_STATE: "recyclable"}}}),
            &[],
        )
        .expect_success("the controller moves a child to recyclable");
    assert_eq!(
        children_calls(env),
        apiserver_before,
        "the API server called the children's webhook for the controller's bookkeeping"
    );
    // Anyone else's is sent, and refused.
    let out = cluster.kubectl(User::Alice).run(&[
        "label",
        "monovertices.numaflow.numaproj.io",
        "monovertex-1",
        "-n",
        ns,
        &format!("{UPGRADE_STATE}=recyclable"),
        "--overwrite",
    ]);
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "only its controller (\"system:serviceaccount:numaplane-system:numaplane-sa\"",
    );
    let out = cluster.kubectl(User::ArgocdServer).run(&[
        "annotate",
        "pipelines.numaflow.numaproj.io",
        "pipeline-1",
        "-n",
        ns,
        "numaplane.numaproj.io/requires-drain-",
    ]);
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "may not remove metadata.annotations[\"numaplane.numaproj.io/requires-drain\"]",
    );
}

#[test]
fn the_parent_spec_path_for_all_three_rollouts() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-children-parents";
    team(cluster, ns);
    for (kind, resource, template, webhook) in [
        ("PipelineRollout", "pipelinerollouts", "pipeline", VALIDATE),
        (
            "MonoVertexRollout",
            "monovertexrollouts",
            "monoVertex",
            "validate-monovertexrollouts.pipelinerollout-webhook.numaplane.numaproj.io",
        ),
        (
            "ISBServiceRollout",
            "isbservicerollouts",
            "interStepBufferService",
            "validate-isbservicerollouts.pipelinerollout-webhook.numaplane.numaproj.io",
        ),
    ] {
        let alice = cluster.kubectl(User::Alice);
        let out = alice.create(
            &rollout_of(kind, ns, json!({"app": "demo", FORCE_PROMOTE: "true"})),
            &[],
        );
        assert_refused_by(
            &out,
            webhook,
            &format!("may not set spec.{template}.metadata.labels[\"{FORCE_PROMOTE}\"]"),
        );
        alice
            .create(&rollout_of(kind, ns, json!({"app": "demo"})), &[])
            .expect_success("alice creates it without");
        let patch = json!({"spec": {template: {"metadata": {"labels": {FORCE_PROMOTE: "true"}}}}});
        let out = alice.merge_patch(resource, ns, "demo", &patch, &[]);
        assert_refused_by(&out, webhook, "of every upgrade to come");
        let out = alice.merge_patch(
            resource,
            ns,
            "demo",
            &json!({"spec": {"strategy": {"progressive": {"forcePromote": true}}}}),
            &[],
        );
        assert_refused_by(
            &out,
            webhook,
            "may not turn on spec.strategy.progressive.forcePromote",
        );
        cluster
            .kubectl(User::ArgocdServer)
            .merge_patch(resource, ns, "demo", &patch, &[])
            .expect_success("argocd-server may");
        // Kept as it is, an edit by alice is fine.
        alice
            .merge_patch(
                resource,
                ns,
                "demo",
                &json!({"metadata": {"labels": {"team": "a"}}}),
                &[],
            )
            .expect_success("an unrelated edit keeps the label");
    }
    let out = cluster.kubectl(User::Alice).merge_patch(
        "pipelinerollouts",
        ns,
        "demo",
        &json!({"spec": {"pipeline": {"metadata": {"annotations": {MARKED_FOR_DELETION: "true"}}}}}),
        &[],
    );
    assert_refused_by(
        &out,
        VALIDATE,
        "spec.pipeline.metadata.annotations[\"numaplane.numaproj.io/marked-for-deletion\"]",
    );
}

#[test]
fn bad_shapes_and_unknown_kinds_sent_straight_to_the_webhook() {
    let Some((env, _turn)) = shared() else { return };
    let review = |resource: &str, labels: Value| {
        json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "0b5f6c1e-1111-4a4a-9c9c-000000000001",
                "kind": {"group": "numaflow.numaproj.io", "version": "v1alpha1", "kind": "Pipeline"},
                "resource": {"group": resource.split_once('.').map_or("", |(_, g)| g), "version": "v1alpha1",
                    "resource": resource.split_once('.').map_or(resource, |(r, _)| r)},
                "name": "p", "namespace": "e2e-children-forged", "operation": "UPDATE",
                "userInfo": {"username": "alice", "groups": ["devs"]},
                "object": {"metadata": {"name": "p", "labels": labels}},
                "oldObject": {"metadata": {"name": "p", "labels": {UPGRADE_STATE: "in-progress"}}},
            }
        })
        .to_string()
    };
    let answer = |body: String| -> Value {
        let (status, text) = env
            .webhook
            .post_json(&env.cluster, "/validate", &body)
            .expect("answered");
        assert_eq!(status, 200, "{text}");
        serde_json::from_str::<Value>(&text).expect("JSON")["response"].clone()
    };
    let wrong = answer(review(
        "pipelines.numaflow.numaproj.io",
        json!("force-promote"),
    ));
    assert_eq!(wrong["allowed"], false, "{wrong}");
    assert!(
        wrong["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("metadata.labels is a string, not an object"),
        "{wrong}"
    );
    let unknown = answer(review(
        "numaplanewidgets.numaplane.numaproj.io",
        json!({FORCE_PROMOTE: "true"}),
    ));
    assert_eq!(unknown["allowed"], true, "{unknown}");
    assert!(
        unknown["warnings"][0]
            .as_str()
            .unwrap_or_default()
            .contains("force-promote went unchecked"),
        "{unknown}"
    );
}
