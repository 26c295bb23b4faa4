//! The guards of the base install, through a real kube-apiserver with no
//! webhook running: the namespaces the webhooks skip refuse the six kinds
//! the webhooks judge and their forces (deleting an owned child and a
//! namespace strategy that skips draining included, under any case of its
//! key, and changing an owned child's spec but pausing and scaling, or
//! Numaplane's and Numaflow's keys on it), the webhook's own account may change nothing but a reset of
//! `allow-data-loss` to "false", and the audit's RBAC reaches no
//! PolicyReport but the webhook's own.
//!
//! Without the binaries these tests print a skip line each, and fail in CI.

use crate::apiserver_support;
mod own_account;

use std::process::Command;
use std::time::{Duration, Instant};

use apiserver_support::{ALLOW_DATA_LOSS, ROLLOUTS, grant_components, rollout, team_namespace};
use envtest::{Assets, CRD, Cluster, Output, User, repo_root, require, test_name};
use serde_json::{Value, json};

/// The webhooks skip these namespaces (manifests/base/webhooks.yaml).
const SKIPPED: [&str; 2] = ["pipelinerollout-webhook", "kube-system"];
const SKIPPED_POLICY: &str = "manifests/base/skipped-namespaces-policy.yaml";
const ALLOW_ROLLOUTS: &str = "manifests/components/rollouts-in-skipped-namespaces";

/// The other kinds the webhooks judge, whose CRDs the guards meet too.
const OTHER_CRDS: [&str; 2] = [
    "tests/fixtures/numaflow/numaflow.numaproj.io_pipelines.yaml",
    "tests/fixtures/numaplane/numaplane.numaproj.io_monovertexrollouts.yaml",
];

/// A cluster with the Numaplane CRDs, Numaflow's Pipeline CRD and the other
/// components' RBAC.
fn cluster() -> Option<Cluster> {
    let assets = require(&test_name(), Assets::find())?;
    let cluster = Cluster::start(&assets).expect("start the API server");
    cluster.install_crd(&repo_root().join(CRD)).expect("CRD");
    for crd in OTHER_CRDS {
        cluster.install_crd(&repo_root().join(crd)).expect("CRD");
    }
    grant_components(&cluster).expect("RBAC of the other components");
    Some(cluster)
}

/// `kubectl kustomize` of a kustomization that takes `file` from the base
/// and adds `components`, as documents.
fn render_with(cluster: &Cluster, file: &str, components: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("dir");
    // kustomize takes components by relative paths only.
    let up = "../".repeat(dir.path().components().count().saturating_sub(1));
    let from_dir = |path: &str| {
        let absolute = repo_root().join(path);
        format!(
            "{up}{}",
            absolute.display().to_string().trim_start_matches('/')
        )
    };
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\n",
        from_dir(file)
    );
    if !components.is_empty() {
        text.push_str("components:\n");
        for component in components {
            text.push_str(&format!("- {}\n", from_dir(component)));
        }
    }
    std::fs::write(dir.path().join("kustomization.yaml"), text).expect("kustomization");
    let out = Command::new(cluster.kubectl_binary())
        .args(["kustomize", "--load-restrictor", "LoadRestrictionsNone"])
        .arg(dir.path())
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).expect("rendered YAML"))
        .collect()
}

/// Installs the policy objects of `file` (with `components`) as admin.
fn install(cluster: &Cluster, file: &str, components: &[&str]) {
    cluster
        .create_all(render_with(cluster, file, components))
        .expect("install the policy");
}

/// Repeats `attempt` until it refuses with `says`: a new policy takes a
/// moment to reach the API server's admission chain.
#[track_caller]
fn until_refused(what: &str, says: &str, attempt: impl Fn() -> Output) -> Output {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = attempt();
        if !out.success && out.stderr.contains(says) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never refused with {says:?}; last: {out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[track_caller]
fn assert_refused_by(out: &Output, policy: &str, says: &str) {
    assert!(!out.success, "expected a refusal: {out}");
    assert!(
        out.stderr
            .contains(&format!("ValidatingAdmissionPolicy '{policy}'")),
        "refused, but not by {policy}: {out}"
    );
    assert!(
        out.stderr.contains(says),
        "the refusal does not say {says:?}: {out}"
    );
}

fn with_force(mut object: Value) -> Value {
    object["metadata"]["annotations"] = json!({ALLOW_DATA_LOSS: "true"});
    object
}

#[test]
fn the_skipped_namespaces_refuse_rollouts_and_forces_without_a_webhook() {
    let Some(cluster) = cluster() else { return };
    let admin = cluster.kubectl(User::Admin);
    admin
        .run(&["create", "namespace", SKIPPED[0]])
        .expect_success("the webhook's namespace");
    team_namespace(&cluster, "e2e-guarded").expect("a team namespace");
    install(&cluster, SKIPPED_POLICY, &[]);
    let policy = "pipelinerollout-webhook-skipped-namespaces";
    for namespace in SKIPPED {
        let out = until_refused(namespace, "are not admitted in namespace", || {
            admin.create(&rollout(namespace, "p", Some(json!(60))), &[])
        });
        assert_refused_by(
            &out,
            policy,
            &format!("PipelineRollouts are not admitted in namespace \"{namespace}\""),
        );
    }
    let out = admin.create(&pipeline("kube-system", "child"), &[]);
    assert_refused_by(
        &out,
        policy,
        "Pipelines are not admitted in namespace \"kube-system\"",
    );
    admin
        .create(&rollout("e2e-guarded", "p", Some(json!(60))), &[])
        .expect_success("a namespace the webhooks guard is not this policy's");
}

/// A Pipeline a rollout owns, as Numaplane makes it.
fn pipeline(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": name, "namespace": namespace,
            "labels": {"numaplane.numaproj.io/parent-rollout-name": "p"}},
        "spec": {},
    })
}

#[test]
fn with_rollouts_allowed_there_a_force_is_still_refused() {
    let Some(cluster) = cluster() else { return };
    let admin = cluster.kubectl(User::Admin);
    admin
        .run(&["create", "namespace", SKIPPED[0]])
        .expect_success("the webhook's namespace");
    // A force that predates the policy: left as it is, it is not judged.
    admin
        .create(
            &with_force(rollout("kube-system", "old-force", Some(json!(60)))),
            &[],
        )
        .expect_success("a rollout made before the policy");
    install(&cluster, SKIPPED_POLICY, &[ALLOW_ROLLOUTS]);
    let policy = "pipelinerollout-webhook-skipped-namespaces";
    let out = until_refused(
        "a create with a force",
        "may not be set to \"true\"",
        || {
            admin.create(
                &with_force(rollout("kube-system", "forced", Some(json!(60)))),
                &[],
            )
        },
    );
    assert_refused_by(
        &out,
        policy,
        "allow-data-loss\"] may not be set to \"true\" in namespace \"kube-system\"",
    );
    for namespace in SKIPPED {
        admin
            .create(&rollout(namespace, "p", Some(json!(60))), &[])
            .expect_success("with the component, a rollout without a force is admitted");
        let out = admin.merge_patch(
            ROLLOUTS,
            namespace,
            "p",
            &json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "true"}}}),
            &[],
        );
        assert_refused_by(&out, policy, "may not be set to \"true\"");
        let out = admin.merge_patch(
            ROLLOUTS,
            namespace,
            "p",
            &json!({"spec": {"strategy": {"progressive": {"forcePromote": true}}}}),
            &[],
        );
        assert_refused_by(&out, policy, "forcePromote may not be turned on");
        admin
            .merge_patch(
                ROLLOUTS,
                namespace,
                "p",
                &json!({"metadata": {"annotations": {ALLOW_DATA_LOSS: "false"}}}),
                &[],
            )
            .expect_success("turning a force off");
    }
    // The children and the other rollouts: their forces are refused too.
    admin
        .create(&pipeline("kube-system", "child"), &[])
        .expect_success("with the component, a child is admitted");
    for (what, change) in [
        (
            "marked-for-deletion",
            json!({"metadata": {"annotations": {"numaplane.numaproj.io/marked-for-deletion": "true"}}}),
        ),
        (
            "pause-timestamp",
            json!({"metadata": {"annotations": {"numaflow.numaproj.io/pause-timestamp": "2020-01-01T00:00:00Z"}}}),
        ),
        (
            "the force-promote label",
            json!({"metadata": {"labels": {"numaplane.numaproj.io/force-promote": "true"}}}),
        ),
    ] {
        let out = admin.merge_patch(
            "pipelines.numaflow.numaproj.io",
            "kube-system",
            "child",
            &change,
            &[],
        );
        assert!(!out.success, "{what} was let through: {out}");
        assert_refused_by(&out, policy, "may not be set or changed in namespace");
    }
    let mvr = json!({
        "apiVersion": "numaplane.numaproj.io/v1alpha1",
        "kind": "MonoVertexRollout",
        "metadata": {"name": "m", "namespace": "kube-system"},
        "spec": {"monoVertex": {"spec": {}}},
    });
    admin
        .create(&mvr, &[])
        .expect_success("with the component, a MonoVertexRollout is admitted");
    let out = admin.merge_patch(
        "monovertexrollouts.numaplane.numaproj.io",
        "kube-system",
        "m",
        &json!({"spec": {"strategy": {"progressive": {"forcePromote": true}}}}),
        &[],
    );
    assert_refused_by(
        &out,
        policy,
        "move the MonoVertexRollout to a namespace the webhook guards",
    );
    admin
        .merge_patch(
            ROLLOUTS,
            "kube-system",
            "old-force",
            &json!({"spec": {"pipeline": {"spec": {"lifecycle": {"pauseGracePeriodSeconds": 90}}}}}),
            &[],
        )
        .expect_success("an update that leaves a standing force unchanged");
    admin
        .run(&["delete", ROLLOUTS, "old-force", "-n", "kube-system"])
        .expect_success("a delete");
}

const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";
const NUMAFLOW: &str = "system:serviceaccount:numaflow-system:numaflow-sa";
const NUMAPLANE: &str = "system:serviceaccount:numaplane-system:numaplane-sa";

/// Numaplane's namespace-level ConfigMap (`labelled`: with its label).
fn namespace_config(name: &str, strategy: &str, labelled: bool) -> Value {
    let mut object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "kube-system"},
        "data": {"upgradeStrategy": strategy},
    });
    if labelled {
        object["metadata"]["labels"] =
            json!({"numaplane.numaproj.io/config": "namespace-level-config"});
    }
    object
}

#[test]
fn the_skipped_namespaces_refuse_deleting_an_owned_child_and_a_strategy_that_skips_draining() {
    let Some(cluster) = cluster() else { return };
    let admin = cluster.kubectl(User::Admin);
    admin
        .run(&["create", "namespace", SKIPPED[0]])
        .expect_success("the webhook's namespace");
    // Made before the policy: owned children, an unowned one, and a
    // strategy that already skips draining.
    for name in ["owned", "collected"] {
        admin
            .create(&pipeline("kube-system", name), &[])
            .expect_success("an owned child");
    }
    let mut free = pipeline("kube-system", "free");
    free["metadata"]["labels"] = json!({});
    admin
        .create(&free, &[])
        .expect_success("an unowned Pipeline");
    admin
        .create(&namespace_config("stored", "no-strategy", true), &[])
        .expect_success("a stored no-strategy");
    // Numaflow's controller writes Pipelines, as its install grants.
    cluster
        .create_all(vec![json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-numaflow"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAFLOW}],
        })])
        .expect("Numaflow's RBAC");
    install(&cluster, SKIPPED_POLICY, &[]);
    let policy = "pipelinerollout-webhook-skipped-namespaces";
    let pipelines = "pipelines.numaflow.numaproj.io";

    // A dry run, so that an attempt before the policy is in force deletes
    // nothing (admission judges dry runs all the same).
    let out = until_refused("deleting an owned child", "may not be deleted", || {
        admin.run(&[
            "delete",
            pipelines,
            "owned",
            "-n",
            "kube-system",
            "--dry-run=server",
        ])
    });
    assert_refused_by(
        &out,
        policy,
        "Pipeline \"owned\" belongs to the rollout \"p\" and may not be deleted in namespace \"kube-system\"",
    );
    let out = admin.run(&["delete", pipelines, "owned", "-n", "kube-system"]);
    assert_refused_by(&out, policy, "may not be deleted");
    admin
        .run(&[
            &format!("--as={GARBAGE_COLLECTOR}"),
            "delete",
            pipelines,
            "collected",
            "-n",
            "kube-system",
        ])
        .expect_success("the garbage collector deletes an owned child");
    admin
        .run(&["delete", pipelines, "free", "-n", "kube-system"])
        .expect_success("a Pipeline no rollout owns");
    // pause-timestamp is Numaflow's controller's to write, there too.
    let pause = json!({"metadata": {"annotations": {"numaflow.numaproj.io/pause-timestamp": "2020-01-01T00:00:00Z"}}});
    admin
        .run(&[
            &format!("--as={NUMAFLOW}"),
            "patch",
            pipelines,
            "owned",
            "-n",
            "kube-system",
            "--type=merge",
            "-p",
            &pause.to_string(),
        ])
        .expect_success("Numaflow's controller sets pause-timestamp");
    let out = admin.merge_patch(pipelines, "kube-system", "owned", &json!({"metadata": {"annotations": {"numaflow.numaproj.io/pause-timestamp": "2021-01-01T00:00:00Z"}}}), &[]);
    assert_refused_by(&out, policy, "may not be set or changed in namespace");

    // An owned child's status, finalizers and owners are its controllers'
    // (rule 26), there too; its labels are anyone's.
    let out = admin.run(&[
        "patch",
        pipelines,
        "owned",
        "-n",
        "kube-system",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Failed"}}"#,
    ]);
    assert_refused_by(
        &out,
        policy,
        "may not be changed in namespace \"kube-system\"",
    );
    let out = admin.merge_patch(
        pipelines,
        "kube-system",
        "owned",
        &json!({"metadata": {"finalizers": ["example.com/hold"]}}),
        &[],
    );
    assert_refused_by(
        &out,
        policy,
        "the status, finalizers and ownerReferences of Pipeline",
    );
    admin
        .run(&[
            &format!("--as={NUMAFLOW}"),
            "patch",
            pipelines,
            "owned",
            "-n",
            "kube-system",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running"}}"#,
        ])
        .expect_success("Numaflow's controller writes the status");
    admin
        .merge_patch(
            pipelines,
            "kube-system",
            "owned",
            &json!({"metadata": {"labels": {"team": "b"}}}),
            &[],
        )
        .expect_success("a label of one's own");

    // The namespace's upgrade strategy.
    for (name, strategy) in [("none", "no-strategy"), ("empty", ""), ("blank", "  ")] {
        let out = admin.create(&namespace_config(name, strategy, true), &[]);
        assert_refused_by(
            &out,
            policy,
            "data.upgradeStrategy (in any case of the key, as Numaplane reads it) may not be \"no-strategy\", empty or blank in namespace \"kube-system\"",
        );
    }
    admin
        .create(&namespace_config("drains", "pause-and-drain", true), &[])
        .expect_success("a strategy that drains, labelled: not refused as a create");
    let out = admin.merge_patch(
        "configmap",
        "kube-system",
        "drains",
        &json!({"data": {"upgradeStrategy": "no-strategy"}}),
        &[],
    );
    assert_refused_by(&out, policy, "would upgrade without draining");
    // Keys Numaplane's Go decoder reads as upgradeStrategy, in any case.
    let out = admin.merge_patch(
        "configmap",
        "kube-system",
        "drains",
        &json!({"data": {"upgradestrategy": "no-strategy"}}),
        &[],
    );
    assert_refused_by(&out, policy, "would upgrade without draining");
    let mut folded = namespace_config("folded", "progressive", true);
    folded["data"] = json!({"UPGRADESTRATEGY": ""});
    let out = admin.create(&folded, &[]);
    assert_refused_by(
        &out,
        policy,
        "in any case of the key, as Numaplane reads it",
    );
    admin
        .create(&namespace_config("unlabelled", "no-strategy", false), &[])
        .expect_success("an unlabelled ConfigMap is not Numaplane's");
    let out = admin.merge_patch(
        "configmap",
        "kube-system",
        "unlabelled",
        &json!({"metadata": {"labels": {"numaplane.numaproj.io/config": "namespace-level-config"}}}),
        &[],
    );
    assert_refused_by(&out, policy, "may not be \"no-strategy\"");
    admin
        .merge_patch(
            "configmap",
            "kube-system",
            "stored",
            &json!({"data": {"note": "kept"}}),
            &[],
        )
        .expect_success("a stored no-strategy left unchanged");
    admin
        .merge_patch(
            "configmap",
            "kube-system",
            "stored",
            &json!({"data": {"upgradeStrategy": "progressive"}}),
            &[],
        )
        .expect_success("turning it off");
    admin
        .run(&[
            "create",
            "configmap",
            "plain",
            "-n",
            "kube-system",
            "--from-literal=upgradeStrategy=no-strategy",
        ])
        .expect_success("any other ConfigMap");
}
/// A MonoVertex a rollout owns, as Numaplane makes it.
fn mono_vertex(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "numaflow.numaproj.io/v1alpha1",
        "kind": "MonoVertex",
        "metadata": {"name": name, "namespace": namespace,
            "labels": {"numaplane.numaproj.io/parent-rollout-name": "m"}},
        "spec": {},
    })
}

#[test]
fn the_skipped_namespaces_refuse_editing_an_owned_childs_spec_and_keys() {
    let Some(cluster) = cluster() else { return };
    cluster
        .install_crd(
            &repo_root().join("tests/fixtures/numaflow/numaflow.numaproj.io_monovertices.yaml"),
        )
        .expect("CRD");
    let admin = cluster.kubectl(User::Admin);
    admin
        .create(&pipeline("kube-system", "owned"), &[])
        .expect_success("an owned Pipeline");
    admin
        .create(&mono_vertex("kube-system", "owned"), &[])
        .expect_success("an owned MonoVertex");
    let mut free = pipeline("kube-system", "free");
    free["metadata"]["labels"] = json!({});
    admin
        .create(&free, &[])
        .expect_success("an unowned Pipeline");
    // Numaflow's and Numaplane's controllers write children, as their
    // installs grant.
    cluster
        .create_all(vec![json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "e2e-controllers"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAFLOW},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NUMAPLANE},
            ],
        })])
        .expect("the controllers' RBAC");
    install(&cluster, SKIPPED_POLICY, &[]);
    let policy = "pipelinerollout-webhook-skipped-namespaces";
    let pipelines = "pipelines.numaflow.numaproj.io";
    let monovertices = "monovertices.numaflow.numaproj.io";

    // A dry run, so that an attempt before the policy is in force changes
    // nothing (admission judges dry runs all the same).
    let edit = json!({"spec": {"limits": {"readBatchSize": 100}}});
    let out = until_refused("an owned child's spec", "which a rollout owns", || {
        admin.merge_patch(
            pipelines,
            "kube-system",
            "owned",
            &edit,
            &["--dry-run=server"],
        )
    });
    assert_refused_by(
        &out,
        policy,
        "Pipeline \"owned\", which a rollout owns, may not be changed in namespace \"kube-system\" but by Numaplane's and Numaflow's controllers (changed: spec.limits)",
    );
    let out = admin.merge_patch(pipelines, "kube-system", "owned", &edit, &[]);
    assert_refused_by(&out, policy, "(changed: spec.limits)");
    let out = admin.merge_patch(
        pipelines,
        "kube-system",
        "owned",
        &json!({"spec": {"lifecycle": {"pauseGracePeriodSeconds": 60}}}),
        &[],
    );
    assert_refused_by(
        &out,
        policy,
        "(changed: spec.lifecycle.pauseGracePeriodSeconds)",
    );
    let out = admin.merge_patch(
        monovertices,
        "kube-system",
        "owned",
        &json!({"spec": {"limits": {"concurrency": 2}}}),
        &[],
    );
    assert_refused_by(&out, policy, "MonoVertex \"owned\", which a rollout owns");
    // Numaplane's and Numaflow's keys, set or removed.
    let out = admin.merge_patch(
        pipelines,
        "kube-system",
        "owned",
        &json!({"metadata": {"labels": {"numaplane.numaproj.io/upgrade-state": "promoted"}}}),
        &[],
    );
    assert_refused_by(
        &out,
        policy,
        "(changed: metadata.labels[\"numaplane.numaproj.io/upgrade-state\"])",
    );
    let out = admin.merge_patch(
        pipelines,
        "kube-system",
        "owned",
        &json!({"metadata": {"annotations": {"numaflow.numaproj.io/example": "x"}}}),
        &[],
    );
    assert_refused_by(
        &out,
        policy,
        "metadata.annotations[\"numaflow.numaproj.io/example\"]",
    );
    let out = admin.merge_patch(
        pipelines,
        "kube-system",
        "owned",
        &json!({"metadata": {"labels": {"numaplane.numaproj.io/parent-rollout-name": null}}}),
        &[],
    );
    assert_refused_by(
        &out,
        policy,
        "metadata.labels[\"numaplane.numaproj.io/parent-rollout-name\"]",
    );

    // Pausing, resuming and scaling are anyone's, and so are one's own keys.
    for phase in ["Paused", "Running"] {
        admin
            .merge_patch(
                pipelines,
                "kube-system",
                "owned",
                &json!({"spec": {"lifecycle": {"desiredPhase": phase}}}),
                &[],
            )
            .expect_success("pausing or resuming an owned Pipeline");
    }
    admin
        .merge_patch(
            monovertices,
            "kube-system",
            "owned",
            &json!({"spec": {"replicas": 3, "lifecycle": {"desiredPhase": "Paused"}}}),
            &[],
        )
        .expect_success("scaling and pausing an owned MonoVertex");
    admin
        .merge_patch(
            pipelines,
            "kube-system",
            "owned",
            &json!({"metadata": {"labels": {"team": "b"}, "annotations": {"example.com/note": "x"}}}),
            &[],
        )
        .expect_success("a label and an annotation of one's own");
    admin
        .merge_patch(pipelines, "kube-system", "free", &edit, &[])
        .expect_success("the spec of a Pipeline no rollout owns");

    // The controllers change the spec and their keys.
    for (account, size) in [(NUMAPLANE, 100), (NUMAFLOW, 200)] {
        admin
            .run(&[
                &format!("--as={account}"),
                "patch",
                pipelines,
                "owned",
                "-n",
                "kube-system",
                "--type=merge",
                "-p",
                &json!({"spec": {"limits": {"readBatchSize": size}},
                    "metadata": {"labels": {"numaplane.numaproj.io/upgrade-state": "promoted"}}})
                .to_string(),
            ])
            .expect_success("a controller edits an owned child");
    }
}
