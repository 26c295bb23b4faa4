//! End-to-end: a rollout's children are Numaplane's (rule 26), through a
//! real kube-apiserver with Numaflow's real CRDs, the project's manifests
//! and base policy, and the real garbage collector
//! (`kube-controller-manager --controllers=garbage-collector-controller
//! --use-service-account-credentials`).
//!
//! alice is a namespace editor with what Numaflow's
//! `numaflow-aggregate-to-edit` role grants: the three children with their
//! `/status`, `/finalizers` (and a MonoVertex's `/scale`), and ConfigMaps.
//! Her four attacks are refused: a forged status, an ownerReference that
//! hands the child to the garbage collector, the finalizers removed from a
//! terminating child, a vertex removed from a child Pipeline's spec. Her
//! own label, pausing and scaling are not; Numaplane's and Numaflow's
//! controllers change children without the webhook being called; a holder
//! of the permission may; and the garbage collector deletes (foreground
//! and background) and orphans the children of a deleted rollout.

use crate::apiserver_children_support;
use crate::apiserver_support;

use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use apiserver_children_support::{
    CHILDREN, CHILDREN_WEBHOOK, assert_refused_by, before_webhooks, children_calls, events_about,
};
use envtest::{Cluster, Installation, User, binding};
use serde_json::{Value, json};

const NUMAFLOW: &str = "system:serviceaccount:numaflow-system:numaflow-sa";
const NUMAPLANE: &str = "system:serviceaccount:numaplane-system:numaplane-sa";
const PARENT: &str = "numaplane.numaproj.io/parent-rollout-name";
const PIPELINES: &str = "pipelines.numaflow.numaproj.io";
const MONOVERTICES: &str = "monovertices.numaflow.numaproj.io";
const ROLLOUTS: &str = "pipelinerollouts.numaplane.numaproj.io";
const FINALIZER: &str = "numaflow.numaproj.io/finalizer";

/// The CRDs and RBAC of the shared setup, Numaflow's controller's access
/// to the children and their status, and the garbage collector.
fn setup(cluster: &Cluster) -> Result<(), String> {
    before_webhooks(cluster)?;
    let children: Vec<String> = ["pipelines", "monovertices", "interstepbufferservices"]
        .iter()
        .flat_map(|r| [r.to_string(), format!("{r}/status")])
        .collect();
    cluster.create_all(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-child-edits"},
            "rules": [{"apiGroups": ["numaflow.numaproj.io"], "resources": children,
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-child-edits"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e-child-edits"},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAFLOW},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAPLANE}]}),
    ])?;
    cluster.start_controllers_as_service_accounts("garbage-collector-controller")
}

/// The shared installation, and this scenario's turn on it.
fn shared() -> Option<(&'static Installation, MutexGuard<'static, ()>)> {
    static SHARED: apiserver_children_support::Shared = apiserver_children_support::Shared::new();
    apiserver_children_support::shared(&SHARED, setup)
}

/// A namespace where alice holds what `numaflow-aggregate-to-edit` grants.
fn editor_namespace(cluster: &Cluster, ns: &str) {
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let resources: Vec<String> = ["pipelines", "monovertices", "interstepbufferservices"]
        .iter()
        .flat_map(|r| {
            [
                r.to_string(),
                format!("{r}/status"),
                format!("{r}/finalizers"),
            ]
        })
        .chain(["monovertices/scale".to_owned()])
        .collect();
    cluster
        .create_all(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "numaflow-edit", "namespace": ns},
            "rules": [
                {"apiGroups": ["numaflow.numaproj.io"], "resources": resources, "verbs": verbs},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs},
            ]}),
            binding(Some(ns), "editors", "Role", "numaflow-edit", &[User::Alice]),
        ])
        .expect("the editor's namespace");
    cluster
        .wait_for_access(User::Alice, "patch", PIPELINES, ns, true)
        .expect("access");
}

/// A child of `kind` as Numaplane makes it: labelled with its rollout
/// `demo`, with a spec of three vertices for a Pipeline, and
/// `extra_metadata` merged in.
fn child(cluster: &Cluster, ns: &str, kind: &str, name: &str, extra_metadata: Value) -> Value {
    let mut metadata = json!({"name": name, "namespace": ns,
        "labels": {PARENT: "demo", "numaplane.numaproj.io/upgrade-state": "promoted"}});
    if let (Some(m), Some(extra)) = (metadata.as_object_mut(), extra_metadata.as_object()) {
        m.extend(extra.clone());
    }
    let spec = match kind {
        "Pipeline" => json!({
            "vertices": [
                {"name": "in", "source": {"generator": {}}},
                {"name": "cat", "udf": {"container": {"image": "cat"}}},
                {"name": "out", "sink": {"log": {}}}],
            "edges": [{"from": "in", "to": "cat"}, {"from": "cat", "to": "out"}],
            "lifecycle": {"desiredPhase": "Running"}}),
        "MonoVertex" => json!({"replicas": 1}),
        _ => json!({}),
    };
    let object = json!({"apiVersion": "numaflow.numaproj.io/v1alpha1", "kind": kind,
        "metadata": metadata, "spec": spec});
    cluster
        .kubectl(User::NumaplaneController)
        .create(&object, &["-o", "json"])
        .expect_success("Numaplane's controller makes a child")
        .json()
}

fn get(cluster: &Cluster, resource: &str, ns: &str, name: &str) -> Option<Value> {
    cluster.kubectl(User::Admin).get(resource, ns, name)
}

/// `kubectl patch` as alice (or, with `as_`, as that account through the
/// admin's impersonation).
fn patch(
    cluster: &Cluster,
    as_: Option<&str>,
    resource: &str,
    ns: &str,
    name: &str,
    how: &[&str],
) -> envtest::Output {
    let mut args = vec!["patch", resource, name, "-n", ns];
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

/// Waits up to 60 s for `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn owning_rollout(kind: &str) -> &'static str {
    match kind {
        "Pipeline" => "PipelineRollout",
        "MonoVertex" => "MonoVertexRollout",
        _ => "ISBServiceRollout",
    }
}

#[test]
fn a_namespace_editors_four_attacks_are_refused() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-child-edits-attacks";
    editor_namespace(cluster, ns);
    // 1. A forged status, on each kind.
    for (resource, kind) in CHILDREN {
        let name = format!("{}-status", kind.to_lowercase());
        child(cluster, ns, kind, &name, json!({}));
        patch(
            cluster,
            Some(NUMAFLOW),
            resource,
            ns,
            &name,
            &[
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Running"}}"#,
            ],
        )
        .expect_success("Numaflow's controller reports it running");
        let out = patch(
            cluster,
            None,
            resource,
            ns,
            &name,
            &[
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"phase":"Failed"}}"#,
            ],
        );
        assert_refused_by(
            &out,
            CHILDREN_WEBHOOK,
            &format!(
                "user \"alice\" may not change status.phase of this {kind} of {} \"demo\"",
                owning_rollout(kind)
            ),
        );
        assert!(out.stderr.contains("forceReapply.editChildren"), "{out}");
        let stored = get(cluster, resource, ns, &name).expect("still there");
        assert_eq!(stored["status"]["phase"], "Running", "{kind}: not stored");
    }
    let out = patch(
        cluster,
        None,
        PIPELINES,
        ns,
        "pipeline-status",
        &[
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Paused","drainedOnPause":true}}"#,
        ],
    );
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "status.drainedOnPause, status.phase",
    );
    // 2. The garbage collector as a deleter: an owner that alice can delete.
    let bait = cluster
        .kubectl(User::Alice)
        .create(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bait", "namespace": ns}}),
            &["-o", "json"],
        )
        .expect_success("alice's ConfigMap")
        .json();
    child(cluster, ns, "Pipeline", "handed-over", json!({}));
    let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "bait", "uid": bait["metadata"]["uid"]}]}});
    let out = patch(
        cluster,
        None,
        PIPELINES,
        ns,
        "handed-over",
        &["--type=merge", "-p", &owner.to_string()],
    );
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "may not change metadata.ownerReferences of this Pipeline of PipelineRollout \"demo\"",
    );
    cluster
        .kubectl(User::Alice)
        .run(&["delete", "configmap", "bait", "-n", ns])
        .expect_success("alice deletes her ConfigMap");
    // 3. The deletion drain ended by removing a finalizer.
    child(
        cluster,
        ns,
        "Pipeline",
        "draining",
        json!({"finalizers": [FINALIZER]}),
    );
    cluster
        .kubectl(User::Admin)
        .run(&["delete", PIPELINES, "draining", "-n", ns, "--wait=false"])
        .expect_success("system:masters deletes the child: it drains");
    let out = patch(
        cluster,
        None,
        PIPELINES,
        ns,
        "draining",
        &[
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    );
    assert_refused_by(&out, CHILDREN_WEBHOOK, "may not change metadata.finalizers");
    let dangling = json!({"metadata": {"finalizers": null, "ownerReferences": [{"apiVersion": "v1",
        "kind": "ConfigMap", "name": "gone", "uid": "00000000-0000-0000-0000-000000000000"}]}});
    let out = patch(
        cluster,
        None,
        PIPELINES,
        ns,
        "draining",
        &["--type=merge", "-p", &dangling.to_string()],
    );
    assert_refused_by(&out, CHILDREN_WEBHOOK, "metadata.finalizers");
    // 4. A vertex and its edges removed from the spec.
    child(cluster, ns, "Pipeline", "edited", json!({}));
    let out = patch(
        cluster,
        None,
        PIPELINES,
        ns,
        "edited",
        &[
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/vertices","value":[{"name":"in","source":{"generator":{}}},{"name":"out","sink":{"log":{}}}]},{"op":"replace","path":"/spec/edges","value":[{"from":"in","to":"out"}]}]"#,
        ],
    );
    assert_refused_by(
        &out,
        CHILDREN_WEBHOOK,
        "may not change spec.edges, spec.vertices",
    );
    assert!(
        out.stderr.contains("change the PipelineRollout instead"),
        "{out}"
    );
    // What each attack aimed at is as it was, the garbage collector's
    // sweep and the drain included.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        get(cluster, PIPELINES, ns, "handed-over").is_some(),
        "not collected"
    );
    let draining = get(cluster, PIPELINES, ns, "draining").expect("still draining");
    assert_eq!(draining["metadata"]["finalizers"], json!([FINALIZER]));
    let edited = get(cluster, PIPELINES, ns, "edited").expect("there");
    assert_eq!(edited["spec"]["vertices"].as_array().map(Vec::len), Some(3));
    let events = events_about(cluster, ns, "Pipeline", "edited", "ChildEditDenied");
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "ChildEditDenied" && n.contains("alice")),
        "an Event on the Pipeline: {events:#?}"
    );
    // Numaflow's controller ends the drain: its own write.
    patch(
        cluster,
        Some(NUMAFLOW),
        PIPELINES,
        ns,
        "draining",
        &[
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    )
    .expect_success("Numaflow's controller removes its finalizer");
    eventually("the drained child is gone", || {
        get(cluster, PIPELINES, ns, "draining").is_none()
    });
}

#[test]
fn the_controllers_a_holder_and_the_editors_free_edits_are_allowed() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-child-edits-allowed";
    editor_namespace(cluster, ns);
    child(cluster, ns, "Pipeline", "p", json!({}));
    child(cluster, ns, "MonoVertex", "m", json!({}));
    let calls = children_calls(env);
    // The controllers write spec and status; the webhook is never called.
    patch(
        cluster,
        Some(NUMAFLOW),
        PIPELINES,
        ns,
        "p",
        &[
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Paused","drainedOnPause":true}}"#,
        ],
    )
    .expect_success("Numaflow's controller writes the status");
    patch(
        cluster,
        Some(NUMAPLANE),
        PIPELINES,
        ns,
        "p",
        &[
            "--type=merge",
            "-p",
            r#"{"spec":{"edges":[{"from":"in","to":"out"}]}}"#,
        ],
    )
    .expect_success("Numaplane's controller writes the spec");
    // alice's own label, pausing, and scaling: free, and never sent.
    cluster
        .kubectl(User::Alice)
        .run(&["label", PIPELINES, "p", "-n", ns, "team=b"])
        .expect_success("alice labels the child");
    patch(
        cluster,
        None,
        PIPELINES,
        ns,
        "p",
        &[
            "--type=merge",
            "-p",
            r#"{"spec":{"lifecycle":{"desiredPhase":"Paused"}}}"#,
        ],
    )
    .expect_success("alice pauses the Pipeline");
    cluster
        .kubectl(User::Alice)
        .run(&["scale", MONOVERTICES, "m", "-n", ns, "--replicas=3"])
        .expect_success("alice scales the MonoVertex");
    patch(
        cluster,
        None,
        MONOVERTICES,
        ns,
        "m",
        &["--type=merge", "-p", r#"{"spec":{"replicas":4}}"#],
    )
    .expect_success("alice sets its replicas");
    assert_eq!(
        children_calls(env),
        calls,
        "the API server called the children's webhook for none of these"
    );
    let stored = get(cluster, PIPELINES, ns, "p").expect("there");
    assert_eq!(stored["status"]["phase"], "Paused");
    assert_eq!(stored["spec"]["lifecycle"]["desiredPhase"], "Paused");
    assert_eq!(
        get(cluster, MONOVERTICES, ns, "m").expect("there")["spec"]["replicas"],
        4
    );
    // system:masters holds editChildren (deleteUndrained's groups).
    cluster
        .kubectl(User::Admin)
        .run(&[
            "patch",
            PIPELINES,
            "p",
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Failed"}}"#,
        ])
        .expect_success("a holder of the permission writes the status");
    let events = events_about(cluster, ns, "Pipeline", "p", "ChildEditAllowed");
    assert!(
        events
            .iter()
            .any(|(r, n)| r == "ChildEditAllowed" && n.contains("status.phase")),
        "an Event naming the field: {events:#?}"
    );
}

#[test]
fn the_garbage_collector_deletes_and_orphans_a_deleted_rollouts_children() {
    let Some((env, _turn)) = shared() else { return };
    let cluster = &env.cluster;
    let ns = "e2e-child-edits-gc";
    editor_namespace(cluster, ns);
    let cascades = ["foreground", "background", "orphan"];
    for cascade in cascades {
        let name = format!("demo-{cascade}");
        let rollout = cluster
            .kubectl(User::Admin)
            .create(
                &apiserver_support::rollout(ns, &name, Some(json!(300))),
                &["-o", "json"],
            )
            .expect_success("a PipelineRollout")
            .json();
        let owner = json!({"apiVersion": "numaplane.numaproj.io/v1alpha1", "kind": "PipelineRollout",
            "name": name, "uid": rollout["metadata"]["uid"], "controller": true});
        child(
            cluster,
            ns,
            "Pipeline",
            &format!("{name}-0"),
            json!({"ownerReferences": [owner]}),
        );
    }
    for cascade in cascades {
        cluster
            .kubectl(User::Admin)
            .run(&[
                "delete",
                ROLLOUTS,
                &format!("demo-{cascade}"),
                "-n",
                ns,
                &format!("--cascade={cascade}"),
                "--wait=false",
            ])
            .expect_success("the rollout is deleted");
    }
    for cascade in ["foreground", "background"] {
        eventually(&format!("the {cascade} deletion's child is gone"), || {
            get(cluster, PIPELINES, ns, &format!("demo-{cascade}-0")).is_none()
        });
    }
    eventually("the orphan keeps no owner", || {
        get(cluster, PIPELINES, ns, "demo-orphan-0").is_some_and(|p| {
            p["metadata"]["ownerReferences"]
                .as_array()
                .is_none_or(Vec::is_empty)
        })
    });
    eventually("the rollouts are gone", || {
        cascades
            .iter()
            .all(|c| get(cluster, ROLLOUTS, ns, &format!("demo-{c}")).is_none())
    });
}
