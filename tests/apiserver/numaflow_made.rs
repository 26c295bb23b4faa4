//! End-to-end: what Numaflow's controller makes for a rollout's child is
//! Numaflow's (rule 29), through a real kube-apiserver with Numaflow's
//! Vertex CRD and the base install.
//!
//! alice is a namespace editor holding what Kubernetes' `edit` and
//! Numaflow's `numaflow-aggregate-to-edit` grant: Deployments, StatefulSets,
//! Services, Vertices and `vertices/status`. Numaflow's controller (played
//! by impersonating its account) has made, for the child Pipeline
//! `demo-0` of the PipelineRollout `demo`, a Vertex, the daemon Service and
//! the daemon Deployment, as it names and labels them. The review's
//! reproductions are refused to her: an extra Vertex labelled with the
//! pipeline's name, a forged Vertex status (both steer Numaplane's
//! assessment), the daemon Service pointed at her own pods and the daemon's
//! image changed (both answer "drained"). Her own labels and scaling are
//! free; so is the same for a Pipeline no rollout owns; a holder of
//! forceReapply.editChildren may, with a `ChildEditAllowed` Event; and
//! Numaflow's controller is never sent to the webhook.

use crate::apiserver_children_support::{self, assert_refused_by, before_webhooks, events_about};

use std::sync::MutexGuard;

use envtest::{Cluster, Installation, Output, User, binding, repo_root};
use serde_json::{Value, json};

const NUMAFLOW: &str = "system:serviceaccount:numaflow-system:numaflow-sa";
const VERTICES_WEBHOOK: &str =
    "validate-numaflow-vertices.pipelinerollout-webhook.numaplane.numaproj.io";
const WORKLOADS_WEBHOOK: &str =
    "validate-numaflow-workloads.pipelinerollout-webhook.numaplane.numaproj.io";
const PIPELINE_NAME: &str = "numaflow.numaproj.io/pipeline-name";

/// What alice (`edit` and Numaflow's edit role) and Numaflow's controller
/// may write of what Numaflow makes.
fn made_rules() -> Value {
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    json!([
        {"apiGroups": ["numaflow.numaproj.io"], "resources": ["vertices", "vertices/status", "pipelines"], "verbs": verbs},
        {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": verbs},
        {"apiGroups": [""], "resources": ["services"], "verbs": verbs},
    ])
}

/// The shared CRDs and RBAC, Numaflow's Vertex CRD, and Numaflow's
/// controller's access to what it makes.
fn setup(cluster: &Cluster) -> Result<(), String> {
    before_webhooks(cluster)?;
    cluster.install_crd(
        &repo_root().join("tests/fixtures/numaflow-controller/numaflow.numaproj.io_vertices.yaml"),
    )?;
    cluster.create_all(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-numaflow-made"}, "rules": made_rules()}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-numaflow-made"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-numaflow-made"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAFLOW}]}),
    ])
}

/// The shared installation, and this scenario's turn on it.
fn shared() -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    static SHARED: apiserver_children_support::Shared = apiserver_children_support::Shared::new();
    apiserver_children_support::shared(&SHARED, setup)
}

/// The labels Numaflow puts on what it makes for Pipeline `pipeline`.
fn numaflow_labels(pipeline: &str, component: &str) -> Value {
    json!({"app.kubernetes.io/part-of": "numaflow",
        "app.kubernetes.io/managed-by": "pipeline-controller",
        "app.kubernetes.io/component": component,
        PIPELINE_NAME: pipeline})
}

/// What Numaflow makes for Pipeline `pipeline` (uid `uid`): a Vertex, the
/// daemon Service and the daemon Deployment, owned by the Pipeline.
fn made_for(ns: &str, pipeline: &str, uid: &str) -> Vec<Value> {
    let owner = json!([{"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline",
        "name": pipeline, "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
    let daemon = numaflow_labels(pipeline, "daemon");
    vec![
        json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Vertex",
            "metadata": {"name": format!("{pipeline}-cat"), "namespace": ns,
                "labels": numaflow_labels(pipeline, "vertex"), "ownerReferences": owner},
            "spec": {"name": "cat", "pipelineName": pipeline, "replicas": 1,
                "udf": {"container": {"image": "cat"}}}}),
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("{pipeline}-daemon-svc"), "namespace": ns,
                "labels": daemon, "ownerReferences": owner},
            "spec": {"selector": daemon, "ports": [{"name": "tcp", "port": 4327}]}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("{pipeline}-daemon"), "namespace": ns,
                "labels": daemon, "ownerReferences": owner},
            "spec": {"replicas": 1, "selector": {"matchLabels": daemon},
                "template": {"metadata": {"labels": daemon},
                    "spec": {"containers": [{"name": "main", "image": "quay.io/numaproj/numaflow:v1.8.1"}]}}}}),
    ]
}

/// alice's namespace, a child Pipeline `demo-0` Numaplane made for the
/// rollout `demo` and a Pipeline `plain` of alice's own, each with what
/// Numaflow makes for it.
fn namespace(cluster: &Cluster, ns: &str) {
    let admin = cluster.kubectl(User::Admin);
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "edit", "namespace": ns}, "rules": made_rules()}),
            binding(Some(ns), "editors", "Role", "edit", &[User::Alice]),
        ])
        .expect("the editor's namespace");
    for (name, labels, user) in [
        (
            "demo-0",
            json!({"numaplane.numaproj.io/parent-rollout-name": "demo"}),
            User::NumaplaneController,
        ),
        ("plain", json!({"team": "a"}), User::Alice),
    ] {
        let pipeline = json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Pipeline",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"vertices": [{"name": "cat", "udf": {"container": {"image": "cat"}}}]}});
        let made = cluster
            .kubectl(user)
            .create(&pipeline, &["-o", "json"])
            .expect_success("a Pipeline")
            .json();
        let uid = made["metadata"]["uid"].as_str().expect("a uid");
        for object in made_for(ns, name, uid) {
            admin
                .create(&object, &[&format!("--as={NUMAFLOW}")])
                .expect_success("Numaflow's controller makes it");
        }
    }
    cluster
        .wait_for_access(User::Alice, "patch", "services", ns, true)
        .expect("access");
}

/// `kubectl patch` as alice (or as `as_`, impersonated by the admin).
fn patch(cluster: &Cluster, as_: Option<&str>, what: &[&str], ns: &str, how: &[&str]) -> Output {
    let mut args = vec!["patch"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-n", ns]);
    args.extend_from_slice(how);
    match as_ {
        None => cluster.kubectl(User::Alice).run(&args),
        Some(account) => {
            let who = format!("--as={account}");
            args.push(&who);
            cluster.kubectl(User::Admin).run(&args)
        }
    }
}

fn merge(json: &str) -> [&str; 3] {
    ["--type=merge", "-p", json]
}

#[test]
fn what_numaflow_makes_for_a_child_is_numaflows() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-numaflow-made";
    namespace(cluster, ns);
    let of = "of Pipeline \"demo-0\" of PipelineRollout \"demo\": Numaflow's controller makes and keeps it";

    // 3. An extra Vertex labelled with the child's name, and a forged status.
    let extra = json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Vertex",
        "metadata": {"name": "demo-0-extra", "namespace": ns, "labels": {PIPELINE_NAME: "demo-0"}},
        "spec": {"name": "extra", "pipelineName": "demo-0"}});
    let out = cluster.kubectl(User::Alice).create(&extra, &[]);
    assert_refused_by(
        &out,
        VERTICES_WEBHOOK,
        &format!("may not make this Vertex {of}"),
    );
    let status = merge(r#"{"status":{"phase":"Running","desiredReplicas":1,"readyReplicas":1}}"#);
    let mut how = vec!["--subresource=status"];
    how.extend_from_slice(&status);
    let out = patch(cluster, None, &["vertex", "demo-0-cat"], ns, &how);
    assert_refused_by(
        &out,
        VERTICES_WEBHOOK,
        &format!("may not change status of this Vertex {of}"),
    );

    // 4. The daemon Service pointed at her pods, the daemon's image changed.
    let out = patch(
        cluster,
        None,
        &["service", "demo-0-daemon-svc"],
        ns,
        &merge(r#"{"spec":{"selector":{"app":"mine"}}}"#),
    );
    assert_refused_by(
        &out,
        WORKLOADS_WEBHOOK,
        &format!("may not change spec.selector of this Service {of}"),
    );
    let out = cluster.kubectl(User::Alice).run(&[
        "set",
        "image",
        "deployment/demo-0-daemon",
        "main=evil:latest",
        "-n",
        ns,
    ]);
    assert_refused_by(
        &out,
        WORKLOADS_WEBHOOK,
        &format!("may not change spec.template of this Deployment {of}"),
    );
    assert!(
        out.stderr.contains("forceReapply.editChildren"),
        "the denial names the permission: {out}"
    );

    // Her own labels, and scaling, are free.
    patch(
        cluster,
        None,
        &["service", "demo-0-daemon-svc"],
        ns,
        &merge(r#"{"metadata":{"labels":{"team":"a"}}}"#),
    )
    .expect_success("her own label");
    patch(
        cluster,
        None,
        &["deployment", "demo-0-daemon"],
        ns,
        &merge(r#"{"spec":{"replicas":2}}"#),
    )
    .expect_success("scaling");

    // What Numaflow made for a Pipeline no rollout owns is hers.
    patch(
        cluster,
        None,
        &["service", "plain-daemon-svc"],
        ns,
        &merge(r#"{"spec":{"selector":{"app":"mine"}}}"#),
    )
    .expect_success("a Pipeline no rollout owns");

    // A holder of editChildren (system:masters) may, and the Event says so.
    patch(
        cluster,
        Some("platform-admin"),
        &["service", "demo-0-daemon-svc"],
        ns,
        &[
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"app":"fixed"}}}"#,
            "--as-group=system:masters",
        ],
    )
    .expect_success("a holder of the permission");
    let found = events_about(
        cluster,
        ns,
        "Service",
        "demo-0-daemon-svc",
        "ChildEditAllowed",
    );
    assert!(
        found
            .iter()
            .any(|(reason, note)| reason == "ChildEditAllowed"
                && note.contains("spec.selector on this Service of Pipeline \"demo-0\"")),
        "{found:#?}"
    );

    // Numaflow's controller is never judged.
    patch(
        cluster,
        Some(NUMAFLOW),
        &["vertex", "demo-0-cat"],
        ns,
        &[
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running"}}"#,
        ],
    )
    .expect_success("Numaflow's controller writes the status");
}

#[test]
fn in_the_namespaces_the_webhooks_skip_only_numaflow_makes_and_changes_them() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "kube-system";
    let policy = "pipelinerollout-webhook-skipped-namespaces";
    let admin = cluster.kubectl(User::Admin);
    let says = "only Numaflow's controller may make it or change its spec, status, finalizers, ownerReferences";
    // Numaflow's controller makes them there.
    let made = made_for(ns, "demo-0", "00000000-0000-0000-0000-000000000000");
    for object in &made {
        admin
            .create(object, &[&format!("--as={NUMAFLOW}")])
            .expect_success("Numaflow's controller makes it");
    }
    // Anyone else, system:masters included, neither makes nor changes them.
    let extra = json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": "Vertex",
        "metadata": {"name": "demo-0-extra", "namespace": ns, "labels": {PIPELINE_NAME: "demo-0"}},
        "spec": {"name": "extra", "pipelineName": "demo-0"}});
    let out = admin.create(&extra, &[]);
    assert!(
        !out.success && out.stderr.contains(policy) && out.stderr.contains(says),
        "{out}"
    );
    let out = patch(
        cluster,
        Some("platform-admin"),
        &["service", "demo-0-daemon-svc"],
        ns,
        &[
            "--type=merge",
            "-p",
            r#"{"spec":{"selector":{"app":"mine"}}}"#,
            "--as-group=system:masters",
        ],
    );
    assert!(
        !out.success && out.stderr.contains(policy) && out.stderr.contains(says),
        "{out}"
    );
    // A label of one's own stays free.
    patch(
        cluster,
        Some("platform-admin"),
        &["service", "demo-0-daemon-svc"],
        ns,
        &[
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"team":"a"}}}"#,
            "--as-group=system:masters",
        ],
    )
    .expect_success("a label of one's own");
    for object in made {
        let kind = object["kind"].as_str().unwrap_or_default().to_lowercase();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        admin
            .run(&["delete", &kind, name, "-n", ns, "--wait=false"])
            .expect_success("cleaned up");
    }
}
