//! End-to-end: the drains ended by a delete or a timestamp (rules 19 to
//! 21), through a real kube-apiserver with Numaflow's and Numaplane's real
//! CRDs and the project's manifests and policy.
//!
//! Deleting a child a rollout owns is refused to a plain user (dry runs
//! too) and allowed to `system:masters`, to Numaplane's controller and to
//! the garbage collector (impersonated), whose deletes the matchConditions
//! keep off the webhook; deleting a PipelineRollout shows kubectl the
//! warning naming its deletion timeout; `pause-timestamp` changed by a user
//! is refused and by Numaflow's controller account allowed, and Numaflow's
//! and Numaplane's ordinary writes reach no webhook.

use crate::apiserver_children_support;
use crate::apiserver_support;

use std::sync::MutexGuard;

use apiserver_children_support::{
    CHILDREN, CHILDREN_WEBHOOK, assert_refused_by, before_webhooks, child, children_calls,
    events_about, validate_requests,
};
use envtest::{Installation, User, binding};
use serde_json::json;

const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";
const NUMAFLOW: &str = "system:serviceaccount:numaflow-system:numaflow-sa";
const PAUSE_TIMESTAMP: &str = "numaflow.numaproj.io/pause-timestamp";
const ROLLOUTS: &str = "pipelinerollouts.numaplane.numaproj.io";
const PIPELINES: &str = "pipelines.numaflow.numaproj.io";

/// The shared installation, and this scenario's turn on it.
fn shared() -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    static SHARED: apiserver_children_support::Shared = apiserver_children_support::Shared::new();
    apiserver_children_support::shared(&SHARED, |cluster| {
        before_webhooks(cluster)?;
        // Numaflow's controller writes Pipelines, as its install grants.
        cluster.create_all(vec![json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-numaflow"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-children"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAFLOW}],
        })])
    })
}

/// A namespace where alice may do everything to children and rollouts,
/// deleting included: what stops her is the webhook, not RBAC.
fn team(env: &Installation, ns: &str) {
    let cluster = &env.cluster;
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "editor", "namespace": ns},
                "rules": [
                    {"apiGroups": ["numaflow.numaproj.io"],
                     "resources": ["pipelines", "monovertices", "interstepbufferservices"], "verbs": verbs},
                    {"apiGroups": ["numaplane.numaproj.io"], "resources": ["pipelinerollouts"], "verbs": verbs},
                ]}),
            binding(Some(ns), "editors", "Role", "editor", &[User::Alice]),
        ])
        .expect("the team namespace");
    cluster
        .wait_for_access(User::Alice, "delete", PIPELINES, ns, true)
        .expect("access");
}

fn exists(env: &Installation, resource: &str, ns: &str, name: &str) -> bool {
    env.cluster
        .kubectl(User::Admin)
        .get(resource, ns, name)
        .is_some()
}

#[test]
fn deleting_an_owned_child_is_refused_to_a_user_and_allowed_to_the_system() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-child-deletes";
    team(env, ns);
    for (resource, kind) in CHILDREN {
        let name = format!("{}-1", kind.to_lowercase());
        child(cluster, ns, kind, &name, Some("promoted"));
        let alice = cluster.kubectl(User::Alice);
        let says = format!(
            "user \"alice\" may not delete this {kind} of {} \"demo\"",
            if kind == "Pipeline" {
                "PipelineRollout"
            } else if kind == "MonoVertex" {
                "MonoVertexRollout"
            } else {
                "ISBServiceRollout"
            }
        );
        let out = alice.run(&["delete", resource, &name, "-n", ns, "--dry-run=server"]);
        assert_refused_by(&out, CHILDREN_WEBHOOK, &says);
        let out = alice.run(&["delete", resource, &name, "-n", ns, "--wait=false"]);
        assert_refused_by(&out, CHILDREN_WEBHOOK, &says);
        assert!(out.stderr.contains("forceReapply.deleteUndrained"), "{out}");
        assert!(exists(env, resource, ns, &name), "{kind} still there");
        let events = events_about(cluster, ns, kind, &name, "DeleteUndrainedDenied");
        assert!(
            events
                .iter()
                .any(|(r, n)| r == "DeleteUndrainedDenied" && n.contains("alice")),
            "an Event on the {kind}: {events:#?}"
        );
        // system:masters holds the permission.
        cluster
            .kubectl(User::Admin)
            .run(&["delete", resource, &name, "-n", ns, "--wait=false"])
            .expect_success("admin deletes an owned child");
        // A child no rollout owns is anyone's to delete.
        let free = format!("{}-free", kind.to_lowercase());
        cluster
            .kubectl(User::Admin)
            .create(
                &json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": kind,
                    "metadata": {"name": free, "namespace": ns}, "spec": {}}),
                &[],
            )
            .expect_success("a child of no rollout");
        alice
            .run(&["delete", resource, &free, "-n", ns, "--wait=false"])
            .expect_success("alice deletes a child no rollout owns");
    }
}

#[test]
fn the_controllers_and_the_garbage_collectors_deletes_reach_no_webhook() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-child-deletes-system";
    team(env, ns);
    for (_, kind) in CHILDREN {
        for n in ["gc", "ctl"] {
            child(
                cluster,
                ns,
                kind,
                &format!("{}-{n}", kind.to_lowercase()),
                Some("promoted"),
            );
        }
    }
    let (webhook_before, apiserver_before) = (validate_requests(env), children_calls(env));
    let as_gc = format!("--as={GARBAGE_COLLECTOR}");
    for (resource, kind) in CHILDREN {
        let name = format!("{}-gc", kind.to_lowercase());
        cluster
            .kubectl(User::Admin)
            .run(&["delete", resource, &name, "-n", ns, "--wait=false", &as_gc])
            .expect_success("the garbage collector deletes an owned child");
        let name = format!("{}-ctl", kind.to_lowercase());
        cluster
            .kubectl(User::NumaplaneController)
            .run(&["delete", resource, &name, "-n", ns, "--wait=false"])
            .expect_success("Numaplane's controller deletes its child");
    }
    assert_eq!(
        validate_requests(env),
        webhook_before,
        "the webhook answered none"
    );
    assert_eq!(
        children_calls(env),
        apiserver_before,
        "the API server called the children's webhook for none"
    );
}

#[test]
fn deleting_a_pipeline_rollout_warns_of_its_deletion_timeout() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-rollout-deletes";
    team(env, ns);
    let mut rollout = apiserver_support::rollout(ns, "demo", Some(json!(300)));
    rollout["spec"]["pipeline"]["spec"]["lifecycle"]["deletionGracePeriodSeconds"] = json!(600);
    cluster
        .kubectl(User::Alice)
        .create(&rollout, &[])
        .expect_success("alice creates a PipelineRollout");
    let out = cluster
        .kubectl(User::Alice)
        .run(&["delete", ROLLOUTS, "demo", "-n", ns, "--wait=false"])
        .expect_success("alice deletes it");
    assert!(
        out.stderr.contains(
            "Warning: its Pipelines are deleted too, each drained at most 600s, then undrained data is lost"
        ),
        "kubectl shows the warning: {out}"
    );
}

#[test]
fn pause_timestamp_is_numaflows_controllers() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-pause-timestamp";
    team(env, ns);
    child(cluster, ns, "Pipeline", "pipeline-1", Some("promoted"));
    let numaflow = |patch: serde_json::Value| {
        cluster.kubectl(User::Admin).run(&[
            "patch",
            PIPELINES,
            "pipeline-1",
            "-n",
            ns,
            "--type=merge",
            "-p",
            &patch.to_string(),
            &format!("--as={NUMAFLOW}"),
        ])
    };
    let (webhook_before, apiserver_before) = (validate_requests(env), children_calls(env));
    numaflow(json!({"metadata": {"annotations": {PAUSE_TIMESTAMP: "2026-12-01T10:00:00Z"}}}))
        .expect_success("Numaflow's controller starts a pause");
    assert_eq!(
        validate_requests(env),
        webhook_before,
        "Numaflow's write is not sent"
    );
    assert_eq!(children_calls(env), apiserver_before);
    let out = cluster.kubectl(User::Alice).run(&[
        "annotate",
        PIPELINES,
        "pipeline-1",
        "-n",
        ns,
        &format!("{PAUSE_TIMESTAMP}=2020-01-01T00:00:00Z"),
        "--overwrite",
    ]);
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "user \"alice\" may not change metadata.annotations[\"numaflow.numaproj.io/pause-timestamp\"]",
    );
    assert!(out.stderr.contains("pauseGracePeriodSeconds"), "{out}");
    // Numaflow's controller ends the pause: it removes the annotation.
    numaflow(json!({"metadata": {"annotations": {PAUSE_TIMESTAMP: null}}}))
        .expect_success("Numaflow's controller resumes");
}
